"""correctness.md: a check's verdict, its conditions and its tables, in words (§7, §9).
Formatting returns lines; the command writes them, and `verify` renders them again from the
results directory alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kit.correctness import checks, methods
from kit.correctness.check_plan import CheckSpec
from kit.protocol.load import Protocol
from kit.results.run_options import CheckOptions

CORRECTNESS_MD = "correctness.md"


@dataclass(frozen=True)
class Described:
    """What correctness.md says of a check beside its verdict, all of it in its directory."""

    spec: CheckSpec
    options: CheckOptions  # the manifest's
    protocol: Protocol
    record: checks.CheckRecord  # the verdict's record: the program it ran, by SHA-256
    shared: Mapping[str, str]  # §7 B: the shared start's files and SHA-256 (run 0's record)


def markdown(d: Described, result: methods.MethodAResult | methods.MethodBResult) -> list[str]:
    """correctness.md's lines for either method."""
    if isinstance(result, methods.MethodAResult):
        return markdown_a(d, result)
    return markdown_b(d, result)


def _table(headers: list[str], rows: Sequence[Sequence[object]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    return out + ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]


def _f(x: float, digits: int = 4) -> str:
    return "NaN" if not np.isfinite(x) else f"{x:.{digits}f}"


def _about(d: Described, verdict: str) -> list[str]:
    s, o, p = d.spec, d.options, d.protocol
    label = p.model(s.model).label
    lines = [f"# §7 method {s.method}: {label} ({s.model}), {s.precision}, on {s.card}", ""]
    if s.smoke:
        lines += ["**Smoke check**: a scaled-down model and schedule, not a protocol result.", ""]
    if d.record.sides_isolated is False:
        lines += [
            f"**{checks.NOT_ISOLATED}** (its runs' records say so): this check gates no "
            "verdict; run it where the executor isolates the sides (`--executor docker`, or a "
            "machine that allows namespaces).",
            "",
        ]
    products = (
        f"`{o.products}` (SHA-256 {(o.products_sha256 or '')[:12]}…)"
        if o.products
        else "chosen by the check's own first run (smoke)"
    )
    rows = [
        ["verdict", verdict],
        ["PyTorch", f"nanoGPT's train.py with §4's patch, mode `{s.pytorch_mode}`"],
        ["contender", f"build `{s.contender_build}` (amendment 4.2); products record {products}"],
        ["contender program", _program(d.record)],
        ["seeds", ", ".join(map(str, s.seeds))],
        ["raw logs", "`runs/` (stamped), `runs.jsonl` (records), `tables/*.csv` (every digit)"],
    ]
    return lines + _table(["", ""], rows) + [""]


def _program(r: checks.CheckRecord) -> str:
    """The program the check ran (rule 6 gates only a series of this very program)."""
    if not r.contender_sha256:
        return "not recorded: this check gates no series"
    image = f", image `{r.contender_image_id}`" if r.contender_image_id else ""
    return f"SHA-256 `{r.contender_sha256}`{image}"


def markdown_a(d: Described, a: methods.MethodAResult) -> list[str]:
    s, c = d.spec, d.protocol.correctness
    verdict = {
        True: "**passed**",
        False: f"**failed**: {a.reason}",
        None: "read, not judged: one seed a side (amendment 7.1)",
    }[a.verdict]
    lines = _about(d, verdict)
    if len(a.seeds) >= len(c.seeds) and s.card != c.five_seed_card:
        lines += [
            f"§7 A's five seeds a side run on the {c.five_seed_card}; these ran on {s.card}.",
            "",
        ]
    if a.verdict is None:
        lines += [
            f"Published beside the {c.five_seed_card}'s five seeds a side, whose families "
            "give method A's verdict (amendment 7.1).",
            "",
        ]
    lines += [
        f"## Validation loss at every evaluation ({s.steps} steps, every {s.eval_interval} "
        f"on {s.eval_iters} batches; judged from step {a.from_step})",
        "",
    ]
    lines += _evaluations_table(a)
    lines += ["", f"## Final losses at step {s.steps}: median and range", ""]
    lines += _final_table(a)
    return lines + ["", "![All curves on one plot (§7 A)](method_a.png)", ""]


def _evaluations_table(a: methods.MethodAResult) -> list[str]:
    """§7 A at every evaluation: each side's median and range, and whether they are within."""
    rows = [
        [
            int(r.step),
            "yes" if r.judged else "",
            _f(r.pytorch_median),
            _f(r.pytorch_range),
            _f(r.contender_median),
            _f(r.contender_range),
            _f(r.difference),
            _f(r.allowed),
            ("yes" if r.ok else "**no**") if r.judged else "",
        ]
        for r in a.table.itertuples()
    ]
    return _table(
        [
            "step",
            "judged",
            "PyTorch median",
            "PyTorch range",
            "contender median",
            "contender range",
            "difference",
            "allowed (larger range)",
            "within",
        ],
        rows,
    )


def _final_table(a: methods.MethodAResult) -> list[str]:
    """§7 A: "the final losses as median and range", per side."""
    rows = [
        [
            r.side,
            r.seeds,
            _f(r.val_loss_median),
            f"{_f(r.val_loss_range)} [{_f(r.val_loss_min)}, {_f(r.val_loss_max)}]",
            _f(r.train_loss_median),
            f"{_f(r.train_loss_range)} [{_f(r.train_loss_min)}, {_f(r.train_loss_max)}]",
        ]
        for r in a.final.itertuples()
    ]
    return _table(
        [
            "side",
            "seeds",
            "validation median",
            "validation range [min, max]",
            "training median",
            "training range [min, max]",
        ],
        rows,
    )


def markdown_b(d: Described, b: methods.MethodBResult) -> list[str]:
    lo, hi = b.judged.window
    verdict = "**passed**" if b.passed else f"**failed**: {b.reason}"
    lines = _about(d, f"{verdict} (step 0 and steps {lo} to {hi})")
    if b.beside is not None:
        blo, bhi = b.beside.window
        said = "passed" if b.beside.passed else f"failed: {b.beside.reason}"
        lines += [f"Beside it (amendment 6.2), §7 B's steps {blo} to {bhi}: {said}.", ""]
    lines += [
        f"Step 0: PyTorch {b.step0_pytorch_loss!r}, contender {b.step0_contender_loss!r}, "
        f"{b.step0_relative_difference:.3g} relative. Largest difference in the window: "
        f"{b.judged.max_relative_difference:.3%} at step {b.judged.max_at_step}.",
        "",
        "Shared start (`shared_start/`, made once by run 0): "
        + ", ".join(f"`{Path(k).name}` {v[:12]}…" for k, v in d.shared.items()),
        "",
        "## Every step's training loss",
        "",
    ]
    rows = [
        [
            int(r.step),
            repr(r.pytorch_loss),
            repr(r.contender_loss),
            f"{r.relative_difference:.3g}",
            f"{r.tolerance:g}",
            "yes" if r.judged else ("beside" if r.beside else ""),
            ("yes" if r.ok else "**no**") if r.judged or r.beside else "",
        ]
        for r in b.table.itertuples()
    ]
    lines += _table(
        [
            "step",
            "PyTorch loss",
            "contender loss",
            "relative difference",
            "tolerance",
            "judged",
            "within",
        ],
        rows,
    )
    return lines + ["", "![Both curves on one plot (§7 B)](method_b.png)", ""]

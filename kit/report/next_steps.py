"""What to run next: the correctness checks rule 6 waits for, with the exact commands that make
them, and the command that then gates the verdicts (§3 rule 6, §7, amendment 7.3).

A configuration whose check has not passed has no verdict, and unless previewed no time. The
report, report.html, `compare` and the terminal say which check each such configuration waits
for and name the command: `micakit correctness ...` with the options the series ran under (its
protocol file, device, nanoGPT, input, contender and products), then `micakit publish DIR
--checks C...`. Formatting functions return text; `where` turns a path the series recorded into
the path the reader's shell sees (the report files keep them as recorded, `DIR` for the
directory itself, so that `verify` renders them again wherever the directory lies).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from kit.protocol.load import DEFAULT_PATH, Protocol
from kit.report import states
from kit.report.tables import Tables
from kit.results import store
from kit.results.run_options import SeriesOptions
from kit.results.store import ResultsDir

DIR = "DIR"  # the results directory itself, in report.md and report.html
ELSEWHERE = "RESULTS"  # the results folder of another card's series (7.3's five seeds a side)
WAY_OUT = "What rule 6 waits for"  # report.md's section, after the summary


def _identity(path: str) -> str:
    return path


@dataclass(frozen=True)
class Needed:
    """One check a configuration waits for, and the command that makes it."""

    what: str  # "method A, five seeds a side, on NVIDIA GeForce RTX 4090"
    command: str
    out: str  # the check's directory, as `publish --checks` then names it


@dataclass(frozen=True)
class Waiting:
    """A contender configuration with a time and no passed check (rule 6)."""

    key: str  # "model/precision/build"
    status: str  # the check's status: why it has no verdict
    needs: tuple[Needed, ...]
    note: str = ""  # where no command of the kit makes it pass, why


@dataclass(frozen=True)
class Context:
    """How the series ran, as a check of it must run too."""

    series: str  # the directory as the reader names it
    card: str
    smoke: bool
    options: SeriesOptions | None
    protocol_file: str | None  # the series' own copy, where it is not the shipped protocol
    five_seed_card: str
    seeds: tuple[int, ...]
    where: Callable[[str], str]


def context(
    rd: ResultsDir, protocol: Protocol, series: str = DIR, where: Callable[[str], str] | None = None
) -> Context:
    manifest = rd.manifest()
    try:
        o: SeriesOptions | None = SeriesOptions.from_json(manifest.options)
    except Exception:  # an options document of an older kit: the commands name placeholders
        o = None
    shipped = store.sha256_file(DEFAULT_PATH) == manifest.protocol_sha256
    protocol_file = None if shipped else f"{series}/{store.PROTOCOL}"
    return Context(
        series=series,
        card=manifest.card,
        smoke=manifest.smoke,
        options=o,
        protocol_file=protocol_file,
        five_seed_card=protocol.correctness.five_seed_card,
        seeds=tuple(protocol.correctness.seeds),
        where=where or _identity,
    )


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in text).strip("-").lower()


def _command(c: Context, method: str, model: str, precision: str | None, out: str,
             *, products: str | None = None, seeds: str | None = None) -> str:  # fmt: skip
    """`micakit correctness` with every option a check of this series needs."""
    o = c.options
    argv = ["micakit", "correctness", "--method", method, "--model", model]
    argv += ["--precision", precision] if precision else []
    argv += ["--seeds", seeds] if seeds else []
    if c.smoke:
        argv.append("--smoke")
    here = products is None  # a check of another card's series runs on that card, on CUDA
    if o is not None and here and (c.smoke or o.device != "cuda"):
        argv += ["--device", o.device]
    if o is not None and o.executor:
        argv += ["--executor", o.executor]
    if c.protocol_file:
        argv += ["--protocol", c.protocol_file]
    for option, value in (("--nanogpt", o and o.nanogpt), ("--input", o and o.input)):
        if value:
            argv += [option, c.where(str(value))]
    contender = o.contender if o is not None and o.contender else None
    argv += ["--contender", c.where(contender) if contender else "PATH/TO/contender"]
    argv += ["--products", products or c.series, "--out", out]
    return shlex.join(argv)


def _beside(c: Context, name: str) -> str:
    """A check's directory beside the series: `results/L4` -> `results/L4-check-...`."""
    return f"{c.series}-check-{name}"


def needed(c: Context, model: str, precision: str, status: str) -> tuple[Needed, ...]:
    """The checks this configuration still waits for (§7; 7.3: method A's five seeds a side on
    the protocol's card, its one seed on every other card, method B on the card itself)."""
    missing = states.missing_methods(status)
    card = _slug(c.card)
    out: list[Needed] = []
    if states.METHOD_A in missing:
        elsewhere = not c.smoke and c.card != c.five_seed_card
        name = _beside(c, f"{model}-{precision}-A")
        what = "method A, five seeds a side" + (
            f", on the {c.five_seed_card} (amendment 7.3)" if elsewhere else ""
        )
        products = f"{ELSEWHERE}/{_slug(c.five_seed_card)}" if elsewhere else None
        if elsewhere:  # another card's series and check, run on that card
            name = f"{products}-check-{model}-{precision}-A"
        out.append(Needed(what, _command(c, "A", model, precision, name, products=products), name))
    if states.METHOD_A_ONE_SEED in missing or (
        states.METHOD_A in missing and not c.smoke and c.card != c.five_seed_card
    ):
        seed = str(c.seeds[0])
        name = _beside(c, f"{model}-{precision}-A-seed{seed}-{card}")
        what = f"method A's one seed a side (seed {seed}) on {c.card} (amendment 7.3)"
        out.append(Needed(what, _command(c, "A", model, precision, name, seeds=seed), name))
    if states.METHOD_B in missing:
        name = _beside(c, f"{model}-B-{card}")
        what = f"method B on {c.card} (float32; it holds for every precision)"
        out.append(Needed(what, _command(c, "B", model, None, name), name))
    return tuple(out)


def waiting(t: Tables, c: Context, protocol: Protocol) -> list[Waiting]:
    """Each contender configuration with a time whose check has not passed, in the
    comparison's order, with the checks it waits for."""
    primary = {b.name for b in protocol.contender.builds if b.primary}
    out = []
    for _, r in t.comparison.iterrows():
        if str(r["contender_state"]) != states.State.COMPLETE.value:
            continue  # no time: no check gives it one (rule 5)
        status = str(r["correctness"])
        outcome = states.CheckOutcome.of(status)
        if outcome is states.CheckOutcome.PASSED:
            continue
        key = states.check_key(r["model"], r["precision"], r["contender_build"])
        note = ""
        if outcome is states.CheckOutcome.FAILED:
            note = "a check failed: no command makes it pass; a fixed contender is measured again"
        elif r["contender_build"] not in primary:
            note = (
                "`micakit correctness` checks the primary build only (amendment 4.2): this "
                "secondary build has no command that checks it yet"
            )
        needs = () if note else needed(c, str(r["model"]), str(r["precision"]), status)
        out.append(Waiting(key, status, needs, note))
    return out


def publish_command(c: Context, waits: list[Waiting]) -> str:
    dirs = dict.fromkeys(n.out for w in waits for n in w.needs)
    checks = " ".join(f"--checks {d}" for d in dirs) or "--checks CHECK_DIR"
    return f"micakit publish {c.series} {checks}"


def commands(waits: list[Waiting]) -> list[str]:
    """Every check command once, in order."""
    return list(dict.fromkeys(n.command for w in waits for n in w.needs))


def markdown_lines(rd: ResultsDir, t: Tables, protocol: Protocol) -> list[str]:
    """report.md's section: each withheld configuration, the checks it waits for, and the
    commands, `DIR` standing for this directory. Nothing where every check passed."""
    c = context(rd, protocol)
    waits = waiting(t, c, protocol)
    if not waits:
        return []
    lines = [
        f"## {WAY_OUT}",
        "",
        "A configuration has a verdict only once its correctness check passed for its model, "
        "precision and contender build (§3 rule 6, §7). Below, `DIR` is this results "
        "directory.",
        "",
    ]
    for w in waits:
        wants = "; ".join(n.what for n in w.needs) or w.note
        lines.append(f"- {w.key}: {w.status}. Waits for: {wants}.")
    if any(ELSEWHERE in x for x in commands(waits)):
        lines += ["", f"`{ELSEWHERE}/…` stands for the folder of the series of the card named."]
    cmds = commands(waits)
    if cmds:  # an indented block: report.md's code, and report.html's <pre>
        lines += ["", "The checks, then the verdicts gated by them:", ""]
        lines += [f"    {x}" for x in [*cmds, publish_command(c, waits)]]
    return [*lines, ""]

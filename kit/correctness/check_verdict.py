"""A check's verdict (§7, D6): every run's curve read from its stamped log, then judged.

Method A compares the evaluations of each seed on both sides; method B every step's loss from the
one shared start. The verdict is appended to `checks.jsonl` beside its plot and tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from kit.correctness import checks, curves, methods
from kit.correctness.check_plan import SHARED_START, TRAINING, CheckRun, CheckSpec, method_b_windows
from kit.engine.engine import now
from kit.errors import UserError
from kit.executors import supervised
from kit.protocol.load import Grammar, Protocol
from kit.results.planned import CONTENDER, PYTORCH
from kit.results.records import RunRecord
from kit.results.store import ResultsDir
from kit.results.tablefile import csv_text
from kit.status import RunStatus


@dataclass(frozen=True)
class Verdict:
    """A check's verdict: its record (appended to checks.jsonl), what it was judged from, and
    the tables published beside it (tables/<name>.csv)."""

    record: checks.CheckRecord
    result: methods.MethodAResult | methods.MethodBResult
    tables: dict[str, pd.DataFrame] = dataclasses.field(default_factory=dict)
    curves: tuple[pd.DataFrame, pd.DataFrame] | None = None  # method B: PyTorch's, contender's


def curve(spec: CheckSpec, run: CheckRun, grammar: Grammar, stdout_log: Path) -> pd.DataFrame:
    """A run's evaluations (A) or every step's loss (B), through to the check's last step."""
    where = f"run {run.run_id} ({run.side} seed {run.seed})"
    lines = curves.read_log_lines(stdout_log)
    if spec.method == "A":
        df, what = curves.parse_eval_lines(lines, where=where), "evaluation"
    else:
        g = grammar
        df, what = curves.parse_train_lines(lines, g.line_regex, g.step_prefix, where), "loss"
    if not len(df):
        regex = curves.EVAL_LINE_REGEX if spec.method == "A" else grammar.line_regex
        raise UserError(f"{where} printed no {what} line (the grammar {regex!r})")
    last = int(df["step"].iloc[-1])
    if last != spec.steps:
        raise UserError(
            f"{where} stopped early: its last {what} is at step {last}, and "
            f"the check needs step {spec.steps}"
        )
    return df


def evaluate(
    rd: ResultsDir,
    p: Protocol,
    s: CheckSpec,
    plan: Sequence[CheckRun],
    grammars: Mapping[str, Grammar],
) -> Verdict:
    """The verdict over every run's curve, computed from the stamped logs alone (`verify`
    computes it again); its record is undated."""
    c, root = p.correctness, rd.root
    ok = {r.run_id: r for r in rd.runs() if r.status == RunStatus.OK}
    curves: dict[str, dict[int, pd.DataFrame]] = {PYTORCH: {}, CONTENDER: {}}
    for run in plan:
        if run.kind == TRAINING:
            if run.run_id not in ok:
                raise UserError(f"run {run.run_id} ({run.slug}) has no finished record")
            log = root / ok[run.run_id].log_dir / "stdout.log"
            curves[run.side][run.seed] = curve(s, run, grammars[run.side], log)
    common: dict[str, Any] = {"contender_build": s.contender_build, "logs": "runs"}
    common |= {**identity(rd), "sides_isolated": isolated(ok, plan)}
    if s.method == "A":
        a = methods.method_a(
            curves[PYTORCH],
            curves[CONTENDER],
            s.from_step,
            eval_interval=s.eval_interval,
            last_step=s.steps,
        )
        record = checks.record_method_a(a, s.card, s.model, s.precision, **common)
        tables = {"method_a": a.table, "method_a_final": a.final, "method_a_curves": a.curves}
        return Verdict(record, a, tables)
    window, beside = method_b_windows(p, s)
    pt, ct = curves[PYTORCH][s.seeds[0]], curves[CONTENDER][s.seeds[0]]
    b = methods.method_b(pt, ct, c.step0_tolerance, c.step_tolerance, window, beside)
    record = checks.record_method_b(b, s.card, s.model, **common)
    return Verdict(record, b, {"method_b": b.table}, (pt, ct))


def isolated(ok: Mapping[int, RunRecord], plan: Sequence[CheckRun]) -> bool | None:
    """Whether every contender run was kept from the other side's files (its record's
    isolation: a container, or namespaces that hid the machine, kit.executors.supervised.hidden);
    None where no record says (an older kit's)."""
    said = [ok[r.run_id].isolation for r in plan if r.side == CONTENDER and r.run_id in ok]
    if not said or any(x is None for x in said):
        return None
    return all(supervised.hidden(x) for x in said)


def identity(rd: ResultsDir) -> dict[str, str]:
    """The contender the check ran, as its versions.json recorded it before the first run
    (rule 4): its program's SHA-256 and, under Docker, its measured image's id."""
    said = rd.versions().side(CONTENDER)
    sha = str(said.get("program_sha256") or "")
    ident = str(said.get("identity") or "")
    # without an image, the identity is the program's own hash (kit.sides.side)
    image = "" if ident in ("", f"sha256:{sha}") else ident
    return {"contender_sha256": sha, "contender_image_id": image}


def plot(rd: ResultsDir, p: Protocol, s: CheckSpec, v: Verdict, where: Path) -> Path:
    """The verdict's plot (method_a.png or method_b.png) in the folder `where`."""
    from kit.correctness import plots  # lazy: matplotlib, only once every run has finished

    title = f"{p.model(s.model).label} ({s.model}), {s.precision}, {s.card}"
    if isinstance(v.result, methods.MethodAResult):
        return plots.plot_method_a(v.result, where / "method_a.png", f"§7 A: {title}")
    window, beside = method_b_windows(p, s)
    assert v.curves is not None  # method B's verdict keeps both curves
    pt, ct = v.curves
    return plots.plot_method_b(
        pt,
        ct,
        window,
        where / "method_b.png",
        f"§7 B: {title}",
        also_window=beside,
        step_tol=p.correctness.step_tolerance,
    )


def keep(rd: ResultsDir, p: Protocol, s: CheckSpec, v: Verdict) -> Verdict:
    """The verdict `evaluate` came to, kept: its record (checks.jsonl), plot and tables."""
    record = dataclasses.replace(v.record, date_utc=now())
    plot(rd, p, s, v, rd.root)
    for name, df in v.tables.items():
        rd.write_text(f"tables/{name}.csv", csv_text(df))
    # a check judged again (a resume after it finished) appends nothing new
    same = [r for r in checks.load_checks(rd.root) if _key(r) == _key(record)]
    if not same or dataclasses.replace(same[-1], date_utc="") != v.record:
        checks.append_check(rd.root, record)
    return dataclasses.replace(v, record=record)


def shared_outputs(rd: ResultsDir) -> dict[str, str]:
    """§7 B: the shared start's files and SHA-256, as run 0 recorded them."""
    made = [r for r in rd.runs() if r.kind == SHARED_START and r.status == RunStatus.OK]
    return dict(made[-1].outputs or {}) if made else {}


def _key(r: checks.CheckRecord) -> tuple[str, str, str, str]:
    return (r.method, r.card, r.model, r.precision)

"""A check's verdict (§7, D6): every run's curve read from its stamped log, then judged.

Method A compares the evaluations of each seed on both sides; method B every step's loss from the
one shared start. The verdict is appended to `checks.jsonl` beside its plot and tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kit.correctness import checks, curves
from kit.correctness import methods as corr
from kit.correctness.plan import TRAINING, CheckRun, CheckSpec, method_b_windows
from kit.engine.engine import now
from kit.engine.scheduler import CONTENDER, PYTORCH
from kit.engine.store import ResultsDir
from kit.engine.tablefile import csv_text
from kit.errors import UserError
from kit.protocol.load import Grammar, Protocol
from kit.status import RunStatus


@dataclass(frozen=True)
class Verdict:
    """A finished check: its record (appended to checks.jsonl) and what it was judged from."""

    record: checks.CheckRecord
    result: corr.MethodAResult | corr.MethodBResult


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


def judge(
    rd: ResultsDir,
    p: Protocol,
    s: CheckSpec,
    plan: Sequence[CheckRun],
    grammars: Mapping[str, Grammar],
) -> Verdict:
    """The verdict over every run's curve: its record (checks.jsonl), plot and tables."""
    from kit.report import plots  # lazy: matplotlib, only once every run has finished

    c, root = p.correctness, rd.root
    ok = {r.run_id: r for r in rd.runs() if r.status == RunStatus.OK}
    curves: dict[str, dict[int, pd.DataFrame]] = {PYTORCH: {}, CONTENDER: {}}
    for run in plan:
        if run.kind == TRAINING:
            log = root / ok[run.run_id].log_dir / "stdout.log"
            curves[run.side][run.seed] = curve(s, run, grammars[run.side], log)
    common = {"contender_build": s.contender_build, "logs": "runs", "date_utc": now()}
    title = f"{p.model(s.model).label} ({s.model}), {s.precision}, {s.card}"
    if s.method == "A":
        a = corr.method_a(
            curves[PYTORCH],
            curves[CONTENDER],
            s.from_step,
            eval_interval=s.eval_interval,
            last_step=s.steps,
        )
        record = checks.record_method_a(a, s.card, s.model, s.precision, **common)
        plots.plot_method_a(a, root / "method_a.png", f"§7 A: {title}")
        tables = {"method_a": a.table, "method_a_final": a.final, "method_a_curves": a.curves}
        result: corr.MethodAResult | corr.MethodBResult = a
    else:
        window, beside = method_b_windows(p, s)
        pt, ct = curves[PYTORCH][s.seeds[0]], curves[CONTENDER][s.seeds[0]]
        b = corr.method_b(pt, ct, c.step0_tolerance, c.step_tolerance, window, beside)
        record = checks.record_method_b(b, s.card, s.model, **common)
        plots.plot_method_b(
            pt,
            ct,
            window,
            root / "method_b.png",
            f"§7 B: {title}",
            also_window=beside,
            step_tol=c.step_tolerance,
        )
        tables, result = {"method_b": b.table}, b
    for name, df in tables.items():
        rd.write_text(f"tables/{name}.csv", csv_text(df))
    # a check judged again (a resume after it finished) appends nothing new
    same = [r for r in checks.load_checks(root) if _key(r) == _key(record)]
    if not same or dataclasses.replace(same[-1], date_utc="") != dataclasses.replace(
        record, date_utc=""
    ):
        checks.append_check(root, record)
    return Verdict(record, result)


def _key(r: checks.CheckRecord) -> tuple[str, str, str, str]:
    return (r.method, r.card, r.model, r.precision)

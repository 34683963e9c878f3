"""Every table of a results directory, recomputed from its raw stamped logs alone (D6).

`tables()` reads the plan, the records' exit codes and the stamped logs, and judges every run
again; nothing a series computed while it ran is trusted. `verify()` compares what a directory
publishes with that recomputation and names every number and raw file that differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from kit.engine import separate as extras
from kit.engine import store
from kit.engine.scheduler import CONTENDER, PYTORCH
from kit.engine.store import ResultsDir
from kit.executors.base import RunOutcome
from kit.measure import timing
from kit.protocol.load import Protocol
from kit.report import compile_cost, verdict
from kit.report import separate as sidetables

TABLES = (
    "runs", "configurations", "comparison", "libraries", "kernels", "kernel_families",
    "graph_breaks", "compile_costs",
)  # fmt: skip
NOT_CHECKED = "correctness not checked"


@dataclass(frozen=True)
class Tables:
    runs: pd.DataFrame
    configurations: pd.DataFrame
    comparison: pd.DataFrame
    libraries: pd.DataFrame
    kernels: pd.DataFrame
    kernel_families: pd.DataFrame
    graph_breaks: pd.DataFrame
    compile_costs: pd.DataFrame  # what compiling costs: warm-up and break-even, from stamps
    missing: tuple[str, ...] = ()  # amendment 8.3: configurations lacking a separate record

    def items(self) -> list[tuple[str, pd.DataFrame]]:
        return [(name, getattr(self, name)) for name in TABLES]


def runs_table(rd: ResultsDir, protocol: Protocol) -> pd.DataFrame:
    """One row per planned run that has a record: judged again from its logs."""
    plan = rd.read_json(store.PLAN)
    configs = {c["id"]: c for c in plan["configurations"]}
    latest: dict[int, dict] = {}
    for r in rd.records():
        latest[r["run_id"]] = r
    rows = []
    for planned in plan["order"]:
        record = latest.get(planned["run_id"])
        if record is None:
            continue
        c = configs[planned["config"]]
        grammar = protocol.pytorch if c["side"] == PYTORCH else protocol.contender
        outcome = rejudge(rd.root / record["log_dir"], record, grammar, protocol)
        rows.append(
            {
                "run_id": planned["run_id"],
                **_identity(c),
                "round": planned["round"],
                "kind": planned.get("kind", "timed"),
                "discarded": planned["discarded"],
                "batch_size": record.get("batch_size"),
                "status": outcome.status,
                "step_s": outcome.step_s,
                "own_step_s": outcome.own_step_s,
                "final_loss": outcome.final_loss,
                "reason": outcome.reason,
                "log_dir": record["log_dir"],
                "window_start_ns": outcome.window_start_ns,
                "window_end_ns": outcome.window_end_ns,
            }
        )
    columns = [
        "run_id", "config", "card", "model", "precision", "side", "variant", "round", "kind",
        "discarded", "batch_size", "status", "step_s", "own_step_s", "final_loss", "reason",
        "log_dir", "window_start_ns", "window_end_ns",
    ]  # fmt: skip
    runs = pd.DataFrame(rows, columns=columns).astype(
        {"window_start_ns": "Int64", "window_end_ns": "Int64", "batch_size": "Int64"}
    )
    runs = runs.merge(sidetables.conditions_columns(rd, runs), on="run_id", how="left")
    runs = runs.merge(sidetables.flags(runs), on="run_id", how="left")
    runs["flagged"] = runs["flagged"].fillna(False).astype(bool)
    runs["flag_reasons"] = runs["flag_reasons"].fillna("")
    return runs


def _identity(c: dict) -> dict:
    """A configuration's columns, the same in every table: id, card, model, precision, side."""
    keys = ("card", "model", "precision", "side", "variant")
    return {"config": c["id"], **{k: c[k] for k in keys}}


def rejudge(log_dir: Path, record: dict, grammar, protocol: Protocol) -> timing.Outcome:
    """A run judged again from its raw logs and exit code; a skipped record keeps its reason."""
    if record["status"] == extras.NOT_PROFILED:
        return timing.Outcome(extras.NOT_PROFILED, None, None, record["reason"])
    if not (log_dir / "stdout.log").is_file():
        raise ValueError(f"run {record['run_id']}'s raw log {log_dir / 'stdout.log'} is missing")
    outcome = RunOutcome(
        record["exit_code"],
        0,
        0,
        log_dir / "stdout.log",
        log_dir / "stderr.log",
        stopped=record.get("stopped"),
    )
    return extras.judge(record.get("kind", "timed"), outcome, grammar, protocol.timing)


def configurations_table(runs: pd.DataFrame, plan: dict) -> pd.DataFrame:
    """Per configuration: timed runs that counted, median and range (§5 "What is reported")."""
    rows = []
    for c in plan["configurations"]:
        mine = runs[runs["config"] == c["id"]]
        timed = mine[mine["kind"] == "timed"]
        ok = timed[timed["status"] == timing.OK]["step_s"].astype(float)
        oom = mine[mine["status"] == timing.OOM]
        void = timed[timed["status"] == timing.VOID]
        notes = []
        if len(oom):
            notes.append(f"out of memory in run {int(oom['run_id'].iloc[0])}")
        if len(void):
            notes.append(f"{len(void)} void: " + "; ".join(void["reason"]))
        flagged = timed[timed["flagged"]]
        for _, f in flagged.iterrows():
            notes.append(f"run {f['run_id']} flagged: {f['flag_reasons']}")
        peak = pd.to_numeric(timed["peak_memory_bytes"], errors="coerce")
        rows.append(
            {
                **_identity(c),
                "primary": plan["primary"].get(c["id"], True),
                "runs": len(ok),
                "median_step_s": float(ok.median()) if len(ok) else math.nan,
                "min_step_s": float(ok.min()) if len(ok) else math.nan,
                "max_step_s": float(ok.max()) if len(ok) else math.nan,
                "peak_memory_bytes": float(peak.max()) if peak.notna().any() else math.nan,
                "flagged_runs": len(flagged),
                "out_of_memory": bool(len(oom)),
                "notes": "; ".join(notes),
            }
        )
    return pd.DataFrame(rows)


def comparison_table(
    runs: pd.DataFrame,
    configs: pd.DataFrame,
    protocol: Protocol,
    checks: dict[str, str] | None = None,
    attention: dict[str, str] | None = None,
) -> pd.DataFrame:
    """Per card, model and precision: each contender build against PyTorch's fastest mode.

    `checks` maps "model/precision" to "passed" or why not (§7, rule 6); without a passed
    check the verdict is "no verdict", and what the times alone say stands beside it, labelled.
    """
    checks = checks or {}
    attention = attention or {}
    timed_ok = runs[(runs["kind"] == "timed") & (runs["status"] == timing.OK)]
    rows = []
    for (card, model, precision), group in configs.groupby(
        ["card", "model", "precision"], sort=False
    ):
        torch_rows = group[group["side"] == PYTORCH]
        times = {
            mode: timed_ok[timed_ok["config"] == cid]["step_s"].astype(float).to_numpy()
            for mode, cid in zip(torch_rows["variant"], torch_rows["config"])
        }
        fastest = verdict.fastest_mode(times)
        oom_modes = list(torch_rows[torch_rows["out_of_memory"]]["variant"])
        p = times.get(fastest, np.array([])) if fastest else np.array([])
        for _, c in group[group["side"] == CONTENDER].iterrows():
            m = timed_ok[timed_ok["config"] == c["config"]]["step_s"].astype(float).to_numpy()
            check = checks.get(f"{model}/{precision}", NOT_CHECKED)
            if len(m) and len(p):
                times_say = verdict.by_times(m, p, protocol.timing.verdict_margin)
            else:
                times_say = ""
            if not len(m):
                shown = f"{verdict.NO_VERDICT}: " + (
                    "out of memory" if c["out_of_memory"] else "no timed run of the contender"
                )
            elif not len(p):
                shown = f"{verdict.NO_VERDICT}: no PyTorch mode ran"
            elif check != "passed":
                shown = f"{verdict.NO_VERDICT}: {check}"
            else:
                shown = times_say
            rows.append(
                {
                    "card": card,
                    "model": model,
                    "precision": precision,
                    "contender_build": c["variant"],
                    "build_role": "primary" if c["primary"] else "secondary",
                    "contender_runs": len(m),
                    "contender_median_step_s": _median(m),
                    "contender_min_step_s": float(m.min()) if len(m) else math.nan,
                    "contender_max_step_s": float(m.max()) if len(m) else math.nan,
                    "pytorch_fastest_mode": fastest or "",
                    "pytorch_attention": attention.get(
                        f"{model}/{precision}/pytorch/{fastest}", "not profiled"
                    ),
                    "pytorch_runs": len(p),
                    "pytorch_median_step_s": _median(p),
                    "pytorch_min_step_s": float(p.min()) if len(p) else math.nan,
                    "pytorch_max_step_s": float(p.max()) if len(p) else math.nan,
                    "pytorch_modes_out_of_memory": ", ".join(oom_modes),
                    # D1: median(P) / median(M), above 1 when the contender is faster
                    "ratio": _median(p) / _median(m) if len(m) and len(p) else math.nan,
                    "correctness": check,
                    "times_alone_say": times_say,
                    "verdict": shown,
                }
            )
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


COMPARISON_COLUMNS = [
    "card", "model", "precision", "contender_build", "build_role", "contender_runs",
    "contender_median_step_s", "contender_min_step_s", "contender_max_step_s",
    "pytorch_fastest_mode", "pytorch_attention", "pytorch_runs", "pytorch_median_step_s",
    "pytorch_min_step_s", "pytorch_max_step_s", "pytorch_modes_out_of_memory", "ratio",
    "correctness", "times_alone_say", "verdict",
]  # fmt: skip


def _median(a: np.ndarray) -> float:
    return float(np.median(a)) if len(a) else math.nan


GATING = "gating.json"  # the correctness checks that gate this series' verdicts (§3 rule 6)


def tables(rd: ResultsDir, checks: dict[str, str] | None = None) -> Tables:
    """Every table, judged again from the raw logs (a corrupt log raises ValueError).

    The verdicts are gated by `checks`, else by the statuses `micakit report --checks` saved
    in gating.json, else every configuration reads "correctness not checked".
    """
    if checks is None and (rd.root / GATING).exists():
        checks = rd.read_json(GATING)["statuses"]
    protocol = store.load_protocol(rd)
    plan = rd.read_json(store.PLAN)
    store.refuse_if_altered(rd)  # D6: numbers only from the records and folders a series wrote
    runs = runs_table(rd, protocol)
    configs = configurations_table(runs, plan)
    kernel, families, attention, unreadable = sidetables.kernel_tables(rd, runs, protocol)
    return Tables(
        runs=runs,
        configurations=configs,
        comparison=comparison_table(runs, configs, protocol, checks, attention),
        libraries=sidetables.libraries_table(rd, runs),
        kernels=kernel,
        kernel_families=families,
        graph_breaks=sidetables.graph_breaks_table(rd, runs),
        compile_costs=compile_cost.compile_costs(rd, runs, protocol.timing.window[0]),
        missing=(*sidetables.missing_records(runs), *unreadable),
    )

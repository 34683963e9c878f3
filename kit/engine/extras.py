"""The separate records of §6 beside the timed runs: profiled runs and graph-break runs.

A profiled run trains under Nsight Systems and yields the kernel table, never a step time (§5:
the profiler slows launches). A graph-break run trains under TORCH_LOGS=graph_breaks,recompiles
and yields the counts. Either one out of the card's memory is recorded as such (amendment 8.3).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kit.executors.base import Executor, Mount, Profiler, RunOutcome, RunSpec
from kit.measure import timing
from kit.protocol.load import Grammar, Timing
from kit.results import judging
from kit.results.planned import GRAPH_BREAKS, PROFILE
from kit.results.rawfiles import STATS_DIR, graph_break_counts, kernel_table
from kit.telemetry import graphbreaks, kernels

NOT_PROFILED = judging.NOT_PROFILED
REPORT = "profile"  # the report's name in the run's folder: profile.nsys-rep


@dataclasses.dataclass(frozen=True)
class Prepared:
    spec: RunSpec
    skip_reason: str | None = None


def prepare(kind: str, spec: RunSpec, executor: Executor, log_dir: Path) -> Prepared:
    """The run as this kind of record needs it."""
    if kind == GRAPH_BREAKS:
        return Prepared(dataclasses.replace(spec, env={**spec.env, **graphbreaks.GRAPH_BREAK_ENV}))
    if kind != PROFILE:
        return Prepared(spec)
    # §6: Nsight Systems is in neither measured image; the executor finds it outside (the
    # Docker executor mounts the host's installation read-only, for this run only)
    found = executor.profiler(spec.image, log_dir / "which-nsys")
    if not isinstance(found, Profiler):
        return Prepared(spec, found)  # the reason alone: the record's status says "not profiled"
    out = Mount("profile", log_dir, read_only=False)
    profile, _ = kernels.nsys_commands(
        spec.argv, f"{executor.where(out)}/{REPORT}", nsys=found.nsys
    )
    mounts = (*spec.mounts, *found.mounts, out)
    return Prepared(dataclasses.replace(spec, argv=tuple(profile), mounts=mounts))


def finish(
    kind: str, spec: RunSpec, executor: Executor, log_dir: Path, outcome: RunOutcome
) -> dict:
    """What the record keeps beyond the run: the kernel table's place, or the break counts."""
    if kind == GRAPH_BREAKS:
        return {"graph_breaks": graph_break_counts(log_dir)}
    if kind != PROFILE or outcome.exit_code != 0:
        return {}
    out = Mount("profile", log_dir, read_only=False)
    found = executor.profiler(spec.image, log_dir / "which-nsys")
    assert isinstance(found, Profiler), "the profiled run itself found it"
    _, stats = kernels.nsys_commands(spec.argv, f"{executor.where(out)}/{REPORT}", nsys=found.nsys)
    stats_spec = RunSpec(
        label=f"{spec.label} nsys stats",
        argv=tuple(stats),
        mounts=(*found.mounts, out),
        image=spec.image,
    )
    result = executor.run(stats_spec, log_dir / STATS_DIR)
    try:
        table = kernel_table(log_dir)
    except kernels.KernelTableError as e:
        return {
            "kernel_table_error": str(e),
            "nsys_stats_exit_code": result.exit_code,
            "nsys": found.nsys,
            "nsys_from": found.origin,
        }
    return {
        "kernels": len(table),
        "nsys_stats_exit_code": result.exit_code,
        "nsys": found.nsys,
        "nsys_from": found.origin,
    }


def judge(kind: str, outcome: RunOutcome, grammar: Grammar, t: Timing) -> timing.Outcome:
    judged = timing.judge(
        outcome.stdout_log, outcome.stderr_log, outcome.exit_code, grammar, t, outcome.stopped
    )
    return judging.as_kind(kind, judged)

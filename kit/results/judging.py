"""A recorded run judged again from its raw logs and exit code (D6): what `report` and `verify`
trust, never the judgement the series recorded. It imports no pandas, so `verify` can judge
while its report modules load (kit.results.audit)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

from kit.measure import stamped, timing
from kit.protocol.load import Grammar, Protocol, Timing
from kit.results import fields
from kit.results.planned import GRAPH_BREAKS, PROFILE, PYTORCH
from kit.results.records import RunRecord
from kit.results.store import NOT_RUN
from kit.status import RunStatus

NOT_PROFILED = RunStatus.NOT_PROFILED


def grammar(protocol: Protocol, side: str) -> Grammar:
    """The grammar a side's output is judged by (D4): PyTorch's, or the contender's."""
    return protocol.pytorch if side == PYTORCH else protocol.contender


def as_kind(kind: str, judged: timing.Outcome) -> timing.Outcome:
    """A separate record never yields a step time (§5 "Profiled runs are separate"): a profiled
    or graph-break run that trained to the end is ok, with its losses and window kept."""
    if kind in (PROFILE, GRAPH_BREAKS) and judged.status in (timing.OK, timing.VOID):
        return timing.Outcome(
            timing.OK,
            None,
            None,
            "",
            judged.final_loss,
            judged.last_step,
            judged.window_start_ns,
            judged.window_end_ns,
        )
    return judged


def rejudge(
    root: Path | str,
    record: RunRecord,
    grammar: Grammar,
    t: Timing,
    held: frozenset[str] | None = None,
    read: Callable[[Path | str], bytes] | None = None,
) -> timing.Outcome:
    """A run judged again from its raw logs and exit code; a run the kit did not start, from
    the note its folder holds (a record from before such notes keeps its reason).

    `held`: what its folder holds (`ResultsDir.listing`), else the folder is not listed and a
    missing stdout is found by reading it. `read`: how a log's bytes are had (`verify` gives
    the bytes it has just hashed). A raw log that is missing or no longer parses raises
    ValueError.
    """
    folder = f"{root}/{record.log_dir}"  # joined as text: a report judges thousands of runs
    if f"{record.log_dir}/{NOT_RUN}" in record.files:
        # a run the kit did not start: its folder says why (kit.engine.engine)
        said = json.loads((read or stamped.read_bytes)(f"{folder}/{NOT_RUN}"))
        return timing.Outcome(RunStatus(said["status"]), None, None, str(said["reason"]))
    if record.status == NOT_PROFILED:  # recorded before such a run left its folder a note
        return timing.Outcome(NOT_PROFILED, None, None, record.reason)
    stdout = f"{folder}/stdout.log"
    missing = ValueError(f"run {record.run_id}'s raw log {stdout} is missing")
    if held is not None and f"{record.log_dir}/stdout.log" not in held:
        raise missing
    try:
        judged = timing.judge(
            stdout,
            f"{folder}/stderr.log",
            record.exit_code,
            grammar,
            t,
            record.stopped,
            read,
        )
    except FileNotFoundError as e:
        if e.filename != stdout:
            raise
        raise missing from None
    return as_kind(record.kind, judged)


# what a record says of its run's judgement, each field recomputed from the raw logs (verify)
JUDGEMENT = ("status", "reason", *fields.NAMES)


def differences(
    record: RunRecord, again: timing.Outcome, logs: fields.Logs
) -> list[tuple[str, object, object]]:
    """Each field of the judgement `record` carries that differs from `again` (the run judged
    again from its raw logs; `logs`: its folder): (field, recorded, recomputed)."""
    mine = {"status": record.status, "reason": record.reason, **record.judged}
    fresh: dict[str, object] = {"status": again.status, "reason": again.reason}
    fresh |= {f.name: f.read(again, logs) for f in fields.recorded(record.judged)}
    return [
        (name, mine.get(name), fresh[name])
        for name in JUDGEMENT
        if name in fresh and not _same(mine.get(name), fresh[name])
    ]


def _same(a: object, b: object) -> bool:
    """Equal, a float within a rounding of the last digit (a record read back from JSON)."""
    if a is None and isinstance(b, float) and not math.isfinite(b):
        return True  # stored as null, as JSON holds no NaN or infinity (store.finite)
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12)
    return a == b

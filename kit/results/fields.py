"""Each per-run measurement, declared once: its name, unit, how it is read from the run's raw
logs, and how its column is written (D6).

The record's `judged` part (the engine), verify's comparison of each record with its raw logs
(kit.results.judging), the per-run columns of tables/runs.csv and summary.json's per-run
fields (kit.report) all iterate over `FIELDS`, in its order. A new measurement is one `Field`
here and its reader. The logs are parsed once (`timing.judge`, the protocol's §5 clock); a
reader takes that judgement, and the run's folder for what the judgement does not hold.

A field added after others (`Field.later`) is absent from what a kit wrote before it: it is
compared only where a record, a table or summary.json carries it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kit.measure import timing

Value = float | int | None


@dataclass(frozen=True)
class Logs:
    """A run's folder, as a reader sees it: `folder` is the attempt's folder (runs/<id>-<config>/
    attempt-<k>, joined to the results directory's root); `held`: raw files' bytes already read
    (verify reads each log once, for its hash and its judgement), by path."""

    folder: str
    held: Mapping[str, bytes] = field(default_factory=dict)

    def size(self, name: str) -> int | None:
        """A raw file's size in bytes; None where the run left none (a run not started)."""
        path = f"{self.folder}/{name}"
        data = self.held.get(path)
        if data is not None:
            return len(data)
        try:
            return os.path.getsize(path)
        except OSError:
            return None


@dataclass(frozen=True)
class Field:
    name: str  # the key in a record's "judged", a runs.csv column, a summary.json key
    unit: str  # "s", "bytes", "" (a number without unit)
    read: Callable[[timing.Outcome, Logs], Value]  # from the judged logs and the run's folder
    dtype: str = "float64"  # its runs.csv column: "Int64" writes whole numbers without ".0"
    description: str = ""  # as summary.schema.json says it
    later: bool = False  # added after the first: a directory written before it lacks it


FIELDS: tuple[Field, ...] = (
    Field(
        "step_s",
        "s",
        lambda o, _: o.step_s,
        description="§5's step time: the median step over the window, seconds",
    ),
    Field(
        "own_step_s",
        "s",
        lambda o, _: o.own_step_s,
        description="The program's own step reading over the same window, seconds (never compared)",
    ),
    Field(
        "final_loss",
        "",
        lambda o, _: o.final_loss,
        description="The last step's training loss",
    ),
    Field(
        "stderr_bytes",
        "bytes",
        lambda _, logs: logs.size("stderr.log"),
        "Int64",
        description="The run's kept stderr.log, bytes",
        later=True,
    ),
)
NAMES = tuple(f.name for f in FIELDS)
# the fields a file written before them lacks: left out of verify's recomputation there
LATER = tuple(f.name for f in FIELDS if f.later)


def read_all(outcome: timing.Outcome, logs: Logs) -> dict[str, Value]:
    """Every field of a run, read from its judged logs and its folder, in `FIELDS`' order."""
    return {f.name: f.read(outcome, logs) for f in FIELDS}


def recorded(judged: Mapping[str, object]) -> list[Field]:
    """The fields a record's `judged` is compared on: each field every record carries, and a
    later one where this record carries it (an older kit's record lacks it)."""
    return [f for f in FIELDS if not f.later or f.name in judged]

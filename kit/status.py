"""The statuses a run record carries, as `runs.jsonl` writes them.

A `StrEnum`: a member equals its JSON value, so records read back from the results directory
compare with these members as they are, and records written with them hold the same strings
as before (an older results directory reads unchanged).
"""

from __future__ import annotations

import enum


class RunStatus(enum.StrEnum):
    OK = "ok"  # §5: the window's stamps were read; a timed run has a step time
    OUT_OF_MEMORY = "out of memory"  # amendment 8: no time, and the configuration stops
    VOID = "void"  # §5: the run ended before its window; a timed run's slot runs again
    FAILED = "failed"  # amendment 8.4: a crash ends the series; resume runs it again
    NOT_PROFILED = "not profiled"  # §6: a profiled run skipped (no nsys), with its reason


# a record with one of these is a run's final record: the series never runs it again (one that
# failed runs again at the resume, amendment 8.4)
FINAL = frozenset({RunStatus.OK, RunStatus.OUT_OF_MEMORY, RunStatus.VOID, RunStatus.NOT_PROFILED})

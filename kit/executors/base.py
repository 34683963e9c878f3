"""Executors: where a run's program runs (a local process, or a Docker container).

Both hand the program's output to the same outside clock (`kit.measure.clock`), so a run's stamps
mean
the same thing whichever executor ran it (§5: one instrument for both sides).
"""

from __future__ import annotations

import abc
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Mount:
    """A host folder the program needs; the executor decides where the program sees it."""

    name: str  # a short word: "nanogpt", "data", "work", "program", "libs"
    host: Path
    read_only: bool = True


@dataclass(frozen=True)
class RunSpec:
    """One run, as the side built it: what to start, with what, and where."""

    label: str  # configuration id and run number, for messages and container labels
    argv: tuple[str, ...]  # may use paths from Executor.where(mount)
    env: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    workdir: str | None = None  # a path from Executor.where(...), or None
    image: str | None = None  # the measured image of this side (Docker executor)
    gpu: str | None = None  # None: no card; "all", an index or a UUID (Docker device request)
    trace_libraries: bool = False  # amendment 2: log which shared libraries the program opens
    stall_s: float | None = None  # stop the run when no output line came for this long
    limit_s: float | None = None  # stop the run when it has run this long (a whole-run limit)


@dataclass(frozen=True)
class RunOutcome:
    """What the executor saw. Step times are never computed here, only from the stamped logs."""

    exit_code: int | None  # None: the run did not finish (interrupted); < 0: killed by signal
    start_ns: int  # time.monotonic_ns() just before the program was started
    end_ns: int  # time.monotonic_ns() once its output had closed and it had exited
    stdout_log: Path
    stderr_log: Path
    libraries_dir: Path | None = None  # raw LD_DEBUG output, when trace_libraries was asked
    stopped: str | None = None  # why the kit stopped the run (a stall, the whole-run limit)


class Limits:
    """A run's stall and whole-run limits, checked from its stamped logs' growth (either
    executor polls `check` while it waits): the reason to stop it, or None."""

    def __init__(self, spec: RunSpec, logs: tuple[Path, ...]) -> None:
        self.spec = spec
        self.logs = logs
        self.start = self.last_change = time.monotonic()
        self.size = -1

    def check(self) -> str | None:
        now = time.monotonic()
        grown = sum(p.stat().st_size if p.exists() else 0 for p in self.logs)
        if grown != self.size:
            self.size, self.last_change = grown, now
        if self.spec.stall_s and now - self.last_change > self.spec.stall_s:
            return (
                f"stopped by the kit: no output line for {self.spec.stall_s:g} s "
                "(the protocol's stall limit, timing.stall_s)"
            )
        if self.spec.limit_s and now - self.start > self.spec.limit_s:
            return (
                f"stopped by the kit: still running after {self.spec.limit_s:.0f} s, the "
                "whole-run limit (timing.run_limit_factor times its configuration's "
                "discarded run)"
            )
        return None


class Executor(abc.ABC):
    """The interface a series drives. Tests use both real executors with fake programs."""

    name: str

    @abc.abstractmethod
    def where(self, mount: Mount) -> str:
        """The path under which the program sees `mount`."""

    @abc.abstractmethod
    def run(self, spec: RunSpec, log_dir: Path) -> RunOutcome:
        """Start the program, stamp its lines into log_dir as they come, wait for it to end."""

    def sweep(self) -> None:  # noqa: B027 - optional hook
        """Remove what a crashed series left behind (containers); nothing for local runs."""

    def image_info(self, ref: str) -> dict:
        """What identifies a side's image (its id and digests); nothing without images."""
        return {"image": ref}

    def finish(self) -> None:  # noqa: B027 - optional hook
        """A complete series' end: drop what only its runs needed (a cache volume)."""

    def which(self, program: str, image: str | None, scratch: Path) -> bool:
        """Whether `program` can be started where the runs of `image` run."""
        spec = RunSpec(
            label=f"which {program}",
            argv=("/bin/sh", "-c", f"command -v {program}"),
            image=image,
        )
        return self.run(spec, scratch).exit_code == 0

    def versions(self) -> dict[str, str]:
        """Versions this executor contributes to the series record (e.g. the Docker engine)."""
        return {}

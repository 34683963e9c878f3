"""Executors: where a run's program runs (a local process, or a Docker container).

Both hand the program's output to the same outside clock (`kit.measure.clock`), so a run's stamps
mean the same thing whichever executor ran it (§5: one instrument for both sides).

`Executor` declares everything the engine and the command line call to run a program; `Images`
what they call on the images the runs run from, which only an executor with images provides.
"""

from __future__ import annotations

import abc
import dataclasses
import socket
import time
from collections.abc import Callable, Mapping, Sequence
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
    # stderr's bytes kept (timing.stderr_cap_bytes): its first and last lines, the cut marked
    stderr_cap_bytes: int | None = None
    limit_s: float | None = None  # stop the run when it has run this long (a whole-run limit)
    # the stamped stdout's first lines so far (whole lines, at most WATCHED_BYTES) -> a reason
    # to stop the run, or None; polled with the limits (a series' check of §5's clock)
    watch: Callable[[bytes], str | None] | None = field(default=None, compare=False)
    # folders the run may not see but where its mounts say (the results directory): the local
    # executor covers them in a namespace of the run's own; a container sees only its mounts
    confine: tuple[Path, ...] = ()
    # the side whose run this is ("pytorch", "contender"): a series' runs of one side share a
    # compiler cache that no run of the other side sees (kit.executors.local, .docker)
    side: str = ""

    def reading(self, name: str) -> RunSpec:
        """The same run with its mount `name` (if it has one) read-only."""
        mounts = tuple(dataclasses.replace(m, read_only=m.read_only or m.name == name)
                       for m in self.mounts)  # fmt: skip
        return dataclasses.replace(self, mounts=mounts)


@dataclass(frozen=True)
class Profiler:
    """How a profiled run starts Nsight Systems (§6): the program's path where the run sees it,
    and what must be mounted for it (nothing when it is installed where the run runs)."""

    nsys: str
    mounts: tuple[Mount, ...] = ()
    origin: str = ""  # where it came from, for the record: "PATH", "the host, read-only"


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
    # what kept the run from the rest of the results directory: "container", "namespaces", or
    # "none" with why; None where the executor does not say (a run without `confine`)
    isolation: str | None = None
    # the processes that outlived the program and were stopped, in words; None: none did
    outlived: str | None = None


WATCHED_BYTES = 1 << 16  # a run's watch reads its first lines only: bounded work per poll


class Limits:
    """A run's stall and whole-run limits, checked from its stamped logs' growth (either
    executor polls `check` while it waits): the reason to stop it, or None. The first of
    `logs` is the stamped stdout, which the spec's `watch` reads while it grows."""

    def __init__(self, spec: RunSpec, logs: tuple[Path, ...]) -> None:
        self.spec = spec
        self.logs = logs
        self.start = self.last_change = time.monotonic()
        self.size = -1
        self.watched = 0  # the bytes of stdout the watch has seen

    def check(self) -> str | None:
        now = time.monotonic()
        grown = sum(p.stat().st_size if p.exists() else 0 for p in self.logs)
        if grown != self.size:
            self.size, self.last_change = grown, now
            why = self._watch()
            if why:
                return why
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

    def _watch(self) -> str | None:
        if self.spec.watch is None or self.watched >= WATCHED_BYTES:
            return None
        try:
            with open(self.logs[0], "rb") as f:
                data = f.read(WATCHED_BYTES)
        except FileNotFoundError:
            return None
        last = len(data) == WATCHED_BYTES  # all the watch reads: this is its last look
        data = data[: data.rfind(b"\n") + 1]  # whole lines: the writer may be mid-line
        if len(data) == self.watched and not last:
            return None
        self.watched = WATCHED_BYTES if last else len(data)
        return self.spec.watch(data)


class Images(abc.ABC):
    """The images an executor runs each side from (§8): looked up, pulled, read and measured.
    An executor that runs from images provides one (`Executor.images`); the local one lacks
    it, and so runs no image."""

    @abc.abstractmethod
    def id_of(self, ref: str) -> str | None:
        """The id of image `ref` where the runs run, None where there is no such image."""

    @abc.abstractmethod
    def info(self, ref: str) -> dict:
        """What identifies a side's image: its ref, id, registry digests and size."""

    @abc.abstractmethod
    def labels(self, ref: str) -> dict[str, str]:
        """The labels of image `ref`: what its build recorded (the program it holds)."""

    @abc.abstractmethod
    def files(self, ref: str, paths: Sequence[str]) -> dict[str, str]:
        """What image `ref` holds at each of `paths` (a folder: every file under it), by its
        path in the image, with its SHA-256 (a link: "-> TARGET"); a bare name is looked for on
        the image's PATH, as a run starts it."""

    @abc.abstractmethod
    def pull(self, ref: str, on_line: Callable[[str], None] | None = None) -> str | None:
        """Pull image `ref` from the registry it names, saying so on `on_line`; its id, or None
        where `ref` names no registry."""

    @abc.abstractmethod
    def runner(self) -> dict:
        """What identifies the image the kit itself runs in (the runner image, pulled or
        built), as info() does; {} where the kit runs on the host."""

    @abc.abstractmethod
    def footprint(self, ref: str, out_dir: Path, say: Callable[[str], None]) -> None:
        """§8: measure image `ref` (size, layers, file list) into out_dir (footprint.json,
        files.tsv), and the base its build names beside it, saying what it measures on `say`;
        what out_dir already holds is kept (a resumed series)."""

    @abc.abstractmethod
    def footprint_ratio(self, contender: Mapping, pytorch: Mapping) -> dict:
        """§8: the ratio record of two footprint records, for the caller to write."""


class Executor(abc.ABC):
    """The interface a series drives. Tests use both real executors with fake programs."""

    name: str
    # the images each side runs from (§8), where the executor runs from images; None: no image
    images: Images | None = None

    @abc.abstractmethod
    def where(self, mount: Mount) -> str:
        """The path under which the program sees `mount`."""

    @abc.abstractmethod
    def run(self, spec: RunSpec, log_dir: Path) -> RunOutcome:
        """Start the program, stamp its lines into log_dir as they come, wait for it to end."""

    def sweep(self) -> None:  # noqa: B027 - optional hook
        """Remove what a crashed series left behind (containers); nothing for local runs."""

    def use_series(self, series_id: str) -> None:  # noqa: B027 - optional hook
        """Name the series whose runs follow (labels, the sides' caches kept across resumes); a
        resumed series passes the same id."""

    def finish(self) -> None:  # noqa: B027 - optional hook
        """A complete series' end: drop what only its runs needed (the sides' caches)."""

    def which(self, program: str, image: str | None, scratch: Path) -> bool:
        """Whether `program` can be started where the runs of `image` run."""
        spec = RunSpec(
            label=f"which {program}",
            argv=("/bin/sh", "-c", f"command -v {program}"),
            image=image,
        )
        return self.run(spec, scratch).exit_code == 0

    def profiler(self, image: str | None, scratch: Path) -> Profiler | str:
        """Nsight Systems for a profiled run of `image` (§6), or why there is none."""
        if self.which("nsys", image, scratch):
            return Profiler("nsys", origin="PATH")
        return "nsys not found"

    def running(self) -> str | None:
        """The container of the run in progress, whose processes are the run's though not the
        kit's children (a CPU series' conditions tell them from others' by it); None here."""
        return None

    def versions(self) -> dict[str, str]:
        """Versions this executor contributes to the series record (e.g. the Docker engine)."""
        return {}

    def host(self) -> str:
        """The name of the machine the runs run on (the manifest's `host`): this one."""
        return socket.gethostname()

    def host_path(self, path: Path) -> str | None:
        """Where `path` lies on the engine's host, where the kit runs in a container and can
        tell (its mounts); None here: the kit's own paths are the user's."""
        return None

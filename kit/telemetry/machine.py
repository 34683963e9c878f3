"""§5 Conditions for a CPU series: the machine before and during every run.

A card is checked for other programs before a run and sampled during it (kit.telemetry.sampler).
A CPU series has no card: what disturbs it is other work on the same cores, which took a CPU
smoke's steps from 8 ms to 420 ms without a word. So, mirroring the card:

- `wait_until_quiet`: before every run, the share of all CPUs' time that processes other than
  the kit's used over a short look (`[conditions]` in the protocol file); while it is above the
  protocol's threshold the check waits, up to the series' --idle-timeout, then lets the run go
  on marked as measured on a busy machine (--refuse-busy: refuses at once instead). Unlike a
  card held by another program, a busy CPU still measures, only worse: CI machines and shared
  hosts run series that way, and the mark says so beside every number.
- `MachineSampler`: during every run, the CPUs' counters every second, into a JSON-lines file
  on the kit's line clock; `summarize_machine` recomputes a run's figures from it over its
  timed window, as the card's samples are.

"Others" are every process but the kit's own: the kit's process and everything below it (a
local run, its compile workers, the line reader) and the processes of the run's container.
The load average is recorded but judges nothing: it counts the kit's own last run for a minute.
"""

from __future__ import annotations

import bisect
import json
import statistics
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from kit.errors import UserError
from kit.telemetry.procfs import Process, ProcFiles, Reading, own_pids
from kit.telemetry.sample_lines import write_sample

SCHEMA = "micakit.machine"
VERSION = 1
Clock = Callable[[], int]  # nanoseconds, time.monotonic_ns like the line stamps


class MachineBusy(UserError):
    """Other processes kept the CPUs busy, and the series was told to refuse (--refuse-busy)."""


@dataclass(frozen=True)
class Look:
    """What other processes did over one look: between two readings."""

    others_cpu_share: float  # of all CPUs' time, 0 to 1
    busiest: tuple[str, ...]  # the busiest other processes, "name (pid N): 97% of a CPU"
    load_1m: float | None
    cpu_mhz: float | None
    cpus: int


def _total(p: Process) -> int:
    return p.ticks + p.reaped_ticks


class Watcher:
    """Tells the kit's processes from others' between readings of `files`."""

    def __init__(
        self,
        files: ProcFiles,
        roots: Collection[int],
        container: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.files, self.roots, self.container = files, frozenset(roots), container
        self.last: Reading | None = None
        self.own: set[int] = set()

    def read(self) -> tuple[Reading, int]:
        """A reading, and the kit's processes' ticks since the previous one (0 the first time).

        The sum of their times (each with its reaped children's) is compared across readings:
        a process that ends and is waited for by one of the kit's moves its time into its
        parent's, and the sum keeps it; one that leaves otherwise (a container's first process,
        waited for by Docker's shim) is taken out of the earlier sum, so it lowers nothing."""
        reading = self.files.read()
        run = self.container()
        inside = (lambda pid: run in self.files.cgroup(pid)) if run else None
        own = own_pids(reading.processes, self.roots, inside)
        grown = 0
        if self.last is not None:
            now, before = reading.processes, self.last.processes
            grown = sum(_total(now[pid]) for pid in own)
            for pid in self.own:
                old, new = before[pid], now.get(pid)
                stayed = new is not None and new.started == old.started and pid in own
                reaped_by_own = new is None and old.ppid in own
                if stayed or reaped_by_own:
                    grown -= _total(old)
        self.last, self.own = reading, own
        return reading, max(grown, 0)

    def look(self, seconds: float, sleep: Callable[[float], None] = time.sleep) -> Look:
        """Others' share of the CPUs over `seconds`, and the busiest of them."""
        before, _ = self.read()
        sleep(seconds)
        after, own = self.read()
        total = after.total_ticks - before.total_ticks
        others = after.busy_ticks - before.busy_ticks - own
        per_cpu_ticks = total / after.cpus if total > 0 else 0
        busiest = []
        for pid, p in after.processes.items():
            if pid in self.own:
                continue
            old = before.processes.get(pid)
            used = p.ticks - (old.ticks if old is not None and old.started == p.started else 0)
            if per_cpu_ticks and used > 0:
                busiest.append((used / per_cpu_ticks, f"{p.name} (pid {pid})"))
        busiest.sort(reverse=True)
        return Look(
            others_cpu_share=min(max(others / total, 0.0), 1.0) if total > 0 else 0.0,
            busiest=tuple(f"{name}: {share:.0%} of a CPU" for share, name in busiest[:3]),
            load_1m=after.load_1m,
            cpu_mhz=after.cpu_mhz,
            cpus=after.cpus,
        )


@dataclass(frozen=True)
class MachineCheck:
    """How the machine was found before a run: recorded beside the run (idle.json)."""

    waited_s: float
    polls: int
    busy: bool  # still busy when the wait ended: the run is measured on a busy machine
    others_cpu_share: float  # the last look's
    busy_share: float  # the protocol's threshold
    load_1m: float | None
    cpu_mhz: float | None
    cpus: int
    busiest: tuple[str, ...]
    device: str = "cpu"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["busiest"] = list(self.busiest)
        return data


def wait_until_quiet(
    watcher: Watcher,
    busy_share: float,
    look_s: float = 0.5,
    timeout_s: float = 60.0,
    poll_s: float = 1.0,
    refuse_at_once: bool = False,
    clock: Clock = time.monotonic_ns,
    *,
    sleep: Callable[[float], None] = time.sleep,
    waiting: Callable[[float, float], None] | None = None,
) -> MachineCheck:
    """Return once other processes use no more than `busy_share` of all CPUs' time over a look
    of `look_s`; after `timeout_s` of waiting, return the check marked busy; with
    `refuse_at_once`, raise `MachineBusy` naming the busiest processes instead of waiting.
    `waiting(timeout_s, others_cpu_share)` is called once, as the wait begins: when the first
    look finds the machine busy, even where that look (part of the wait) took the whole limit
    on a loaded machine; not where there is no wait (`timeout_s` 0)."""
    start_ns = clock()
    polls = 0
    while True:
        look = watcher.look(look_s, sleep)
        polls += 1
        waited_s = (clock() - start_ns) / 1e9
        quiet = look.others_cpu_share <= busy_share
        if polls == 1 and not (quiet or refuse_at_once) and timeout_s > 0 and waiting is not None:
            waiting(timeout_s, look.others_cpu_share)  # said once, not at every poll
        if quiet or refuse_at_once or waited_s >= timeout_s:
            if not quiet and refuse_at_once:
                raise MachineBusy(
                    f"other processes use {look.others_cpu_share:.0%} of the CPUs, above the "
                    f"protocol's {busy_share:.0%} (conditions.cpu_busy_share): "
                    + ("; ".join(look.busiest) or "none named"),
                    "end them and start the series again, or leave out --refuse-busy to wait "
                    "for them and mark the runs measured on a busy machine",
                )
            return MachineCheck(
                waited_s=waited_s,
                polls=polls,
                busy=not quiet,
                others_cpu_share=look.others_cpu_share,
                busy_share=busy_share,
                load_1m=look.load_1m,
                cpu_mhz=look.cpu_mhz,
                cpus=look.cpus,
                busiest=look.busiest,
            )
        sleep(max(0.0, min(poll_s, timeout_s - waited_s)))


class MachineSampler:
    """The CPUs' counters every `interval_s` on a background thread while one run goes, into a
    JSON-lines file: a header, `{"kind": "sample", "t_ns", "busy_ticks", "total_ticks",
    "own_ticks", "load_1m", "cpu_mhz"}` (the ticks counted from the sampler's start), a last
    sample and `{"kind": "end"}` at `stop()`. A reading that fails is an error record; the run
    goes on."""

    def __init__(
        self,
        watcher: Watcher,
        path: Path,
        interval_s: float = 1.0,
        clock: Clock = time.monotonic_ns,
    ) -> None:
        self.watcher, self.path, self.interval_s, self.clock = watcher, path, interval_s, clock
        self.samples = 0
        self.own_ticks = 0
        self._first: Reading | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._file: IO[str] | None = None

    def __enter__(self) -> MachineSampler:
        self._file = self.path.open("w", encoding="utf-8")
        header = {"kind": "header", "format": SCHEMA, "schema_version": VERSION,
                  "t_ns": self.clock(), "clock": "time.monotonic_ns",
                  "interval_s": self.interval_s}  # fmt: skip
        self._write(header)
        self._sample()
        self._thread = threading.Thread(target=self._run, name="micakit-machine", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is None or self._file is None:
            return
        self._stop.set()
        self._thread.join()
        self._sample()
        self._write({"kind": "end", "t_ns": self.clock(), "samples": self.samples})
        self._file.close()
        self._file = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        now = self.clock()
        try:
            reading, grown = self.watcher.read()
        except Exception as error:  # the samples serve the run, never the other way round
            self._write({"kind": "error", "t_ns": now, "message": f"{type(error).__name__}: "
                         f"{error}"})  # fmt: skip
            return
        if self._first is None:
            self._first, grown = reading, 0  # counted from here, as the CPUs' ticks are
        self.own_ticks += grown
        self.samples += 1
        self._write(
            {
                "kind": "sample",
                "t_ns": now,
                "busy_ticks": reading.busy_ticks - self._first.busy_ticks,
                "total_ticks": reading.total_ticks - self._first.total_ticks,
                "own_ticks": self.own_ticks,
                "cpus": reading.cpus,
                "load_1m": reading.load_1m,
                "cpu_mhz": reading.cpu_mhz,
            }
        )

    def _write(self, record: Mapping[str, object]) -> None:
        if self._file is None:
            return
        try:
            write_sample(self._file, record)
        except OSError:
            self._file = None  # the disk is full or gone: the run still goes on


@dataclass(frozen=True)
class MachineSummary:
    """A run's machine over its timed window, recomputed from its samples file: between the
    first and the last sample inside the window, or the samples around a shorter one."""

    others_cpu_share: float | None  # None: fewer than two samples
    load_1m_max: float | None
    cpu_mhz_median: float | None
    sample_count: int


def summarize_machine(
    path: Path | str, start_ns: int | None, end_ns: int | None, text: str | None = None
) -> MachineSummary:
    """`text`: the file's text where the caller has read it already (verify, for its hash);
    `path` then names it in messages alone (a string: verify asks this of thousands of runs)."""
    text = Path(path).read_text("utf-8") if text is None else text
    records = [json.loads(x) for x in text.splitlines() if x.strip()]
    # the file's name: "format" ("schema" in a file an earlier kit wrote)
    if not records or records[0].get("format", records[0].get("schema")) != SCHEMA:
        raise UserError(f"{path} is not a micakit machine samples file")
    version = int(records[0].get("schema_version", records[0].get("version", 0)))
    if version > VERSION:
        raise UserError(
            f"{path} is machine samples version {version}; this micakit reads up to {VERSION}",
            "upgrade micakit to read this results directory",
        )
    samples = [r for r in records if r.get("kind") == "sample"]
    # a run's few samples: bisect and statistics, not numpy (verify reads thousands of runs')
    stamps = [int(r["t_ns"]) for r in samples]
    first = bisect.bisect_left(stamps, start_ns) if start_ns is not None else 0
    last = bisect.bisect_right(stamps, end_ns) if end_ns is not None else len(stamps)
    if last - first < 2:
        # a window shorter than two samples apart: the samples around it. The last may come
        # after the run's end, where a container's last moments are no longer told from
        # others' (its processes are gone unread): a window of two seconds or more never is
        first, last = max(first - 1, 0), min(last + 1, len(samples))
    window = samples[first:last]
    share = None
    if len(window) >= 2:
        first, last = window[0], window[-1]
        total = last["total_ticks"] - first["total_ticks"]
        others = last["busy_ticks"] - first["busy_ticks"] - (last["own_ticks"] - first["own_ticks"])
        share = min(max(others / total, 0.0), 1.0) if total > 0 else None
    loads = [r["load_1m"] for r in window if r.get("load_1m") is not None]
    mhz = [r["cpu_mhz"] for r in window if r.get("cpu_mhz") is not None]
    return MachineSummary(
        others_cpu_share=share,
        load_1m_max=max(loads) if loads else None,
        cpu_mhz_median=float(statistics.median(mhz)) if mhz else None,
        sample_count=len(window),
    )

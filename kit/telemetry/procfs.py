"""The machine's CPUs as Linux's /proc and /sys show them: time spent, load, clock, processes.

What a CPU series' conditions are read from (kit.telemetry.machine). Files are read, never a
program started; `ProcFiles(root)` reads them under another root, so tests give a folder of
fake files. Times are in clock ticks (USER_HZ), the unit of /proc/stat and /proc/<pid>/stat
alike.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

_CPU_LINE = re.compile(r"^cpu\d+ ", re.M)


@dataclass(frozen=True)
class Process:
    """One process of /proc/<pid>/stat."""

    pid: int
    ppid: int
    name: str
    ticks: int  # its own time: utime + stime
    reaped_ticks: int  # its waited-for children's: cutime + cstime
    started: int  # when it started, ticks after boot: a PID used again is another process


@dataclass(frozen=True)
class Reading:
    """The machine at one moment: every CPU's time, and each process's."""

    busy_ticks: int  # all CPUs' time not idle: user, nice, system, irq, softirq, steal
    total_ticks: int  # all CPUs' time
    cpus: int
    load_1m: float | None
    cpu_mhz: float | None  # the mean of the CPUs' clocks; None where not readable (some VMs)
    processes: Mapping[int, Process]


class ProcFiles:
    """Reads /proc and /sys under `root` ("/" on the machine itself)."""

    def __init__(self, root: Path | str = "/") -> None:
        self.root = Path(root)
        self.proc = self.root / "proc"

    def read(self) -> Reading:
        busy, total, cpus = self.cpu_ticks()
        return Reading(busy, total, cpus, self.load_1m(), self.cpu_mhz(), self.processes())

    def cpu_ticks(self) -> tuple[int, int, int]:
        """(busy, total, CPUs) from /proc/stat's first line: user nice system idle iowait irq
        softirq steal (guest time is already in user's)."""
        text = (self.proc / "stat").read_text()
        fields = [int(x) for x in text.split("\n", 1)[0].split()[1:9]]
        fields += [0] * (8 - len(fields))
        total = sum(fields)
        idle = fields[3] + fields[4]  # idle and waiting for input or output
        return total - idle, total, max(len(_CPU_LINE.findall(text)), 1)

    def load_1m(self) -> float | None:
        try:
            return float((self.proc / "loadavg").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def cpu_mhz(self) -> float | None:
        """The CPUs' mean clock: cpufreq's scaling_cur_freq (kHz), else /proc/cpuinfo's
        "cpu MHz", else None (a VM may show neither)."""
        found = []
        for path in sorted((self.root / "sys/devices/system/cpu").glob("cpu*/cpufreq")):
            try:
                found.append(int((path / "scaling_cur_freq").read_text()) / 1e3)
            except (OSError, ValueError):
                continue
        if not found:
            try:
                text = (self.proc / "cpuinfo").read_text()
            except OSError:
                return None
            found = [float(x) for x in re.findall(r"^cpu MHz\s*:\s*([0-9.]+)", text, re.M)]
        return sum(found) / len(found) if found else None

    def processes(self) -> dict[int, Process]:
        out = {}
        for entry in os.scandir(self.proc):
            if not entry.name.isdigit():
                continue
            try:
                text = Path(entry.path, "stat").read_text()
            except OSError:  # it ended while being read
                continue
            found = parse_stat(text)
            if found is not None:
                out[found.pid] = found
        return out

    def cgroup(self, pid: int) -> str:
        try:
            return (self.proc / str(pid) / "cgroup").read_text()
        except OSError:
            return ""


def parse_stat(text: str) -> Process | None:
    """/proc/<pid>/stat: `pid (name) state ppid ... utime stime cutime cstime ... starttime`
    (fields 14 to 17, and 22); the name may hold spaces and parentheses, so it ends at the last
    ')'."""
    head, _, rest = text.rpartition(")")
    pid, _, name = head.partition(" (")
    fields = rest.split()
    if len(fields) < 20 or not pid.strip().isdigit():
        return None
    t = [int(x) for x in fields[11:15]]
    return Process(int(pid), int(fields[1]), name, t[0] + t[1], t[2] + t[3], int(fields[19]))


def own_pids(
    processes: Mapping[int, Process],
    roots: Collection[int],
    in_container: Callable[[int], bool] | None = None,
) -> set[int]:
    """The kit's processes: `roots` and every process below them, and any process of the run's
    container (`in_container`, for a run the kit does not start as its child)."""
    children: dict[int, list[int]] = {}
    for p in processes.values():
        children.setdefault(p.ppid, []).append(p.pid)
    todo = [pid for pid in processes if pid in roots]
    if in_container is not None:
        todo += [pid for pid in processes if pid not in roots and in_container(pid)]
    own: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid not in own:
            own.add(pid)
            todo.extend(children.get(pid, ()))
    return own


def own_ticks(processes: Mapping[int, Process], own: Collection[int]) -> int:
    """The time of the kit's processes, their reaped children's included: a child that ends
    moves its time into its parent's (cutime), so the sum keeps it."""
    return sum(processes[pid].ticks + processes[pid].reaped_ticks for pid in own)

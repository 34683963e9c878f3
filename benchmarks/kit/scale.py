"""report and verify of a large results directory (a benchmark of the kit itself, not a test).

Makes a results directory of N planned runs (default 15,000) from the fake contender
(tests/fakes, D4's contract) on the CPU, then times `micakit report DIR` and
`micakit verify DIR` as whole processes, with each one's peak memory (its largest process).

Running 15,000 runs for real would take hours, so the directory is grown from real ones:

1. a series of the fake contender starts under a protocol whose plan has N runs, and is stopped
   (SIGTERM, as a user would) once its discarded runs and first round are recorded;
2. every later timed run is a copy of a real timed run of its configuration: its raw files
   copied into the run's own folder with every stamp shifted to a later time (the stamped logs'
   and the samples' alike), and its record written as the engine writes one (new run id, round,
   folder, times and file hashes);
3. `micakit series --resume DIR` runs what is left (the profiled runs) for real and publishes.

So the directory is one the kit accepts as its own: `verify` must say clean, and the benchmark
fails if it does not.

`--baseline CHECKOUT` times another checkout's kit beside this one, in the same process and
the same repeats, taking turns, so both see the same load: each kit makes its own directory
(the same protocol, fake contender and size; an older kit cannot read a newer kit's records)
by the same steps with its own `run.py`. Several `--runs` measure the growth: time and peak
memory against the run count, the slope of log(time) on log(runs) (1: linear), and a log–log
plot (`--plot PATH`, matplotlib). `--profile N` prints cProfile's top N lines (cumulative
time, the kit's own functions) of one more run of each command.

    python benchmarks/kit/scale.py [--runs 15000 ...] [--repeat 5] [--baseline CHECKOUT]
        [--plot scale.png] [--profile 25] [--keep DIR] [--floor-import [PYTHON=]STATEMENT ...]

Beside the times, floors on the same directory, each the median of the repeats: a bare loop
that walks it and reads and hashes every file once (what any `verify` of this layout does at
least); the interpreter started with pandas imported (what any command whose tables are pandas
frames does at least); and with numpy and click imported (what a reading command whose tables
were numpy arrays would do at least). `--floor-import [PYTHON=]STATEMENT` adds another start to
time, by this interpreter or another (a table library the kit does not install, in a venv of
its own: `--floor-import /tmp/v/bin/python='import polars'`).

`--keep DIR` keeps the directories (`DIR/<runs>-<kit>`), and a later run with the same DIR times
those already made as they are, so a measurement can be repeated without making them again. A
kept directory another kit commit made is made again: this kit would time it as an older
directory (verify re-renders one as the kit that made it did), not as its own.

Each kit runs each command once untimed before the timed repeats (its modules' bytecode written,
the directory's files in the page cache), and always with its bytecode: PYTHONDONTWRITEBYTECODE
is taken out of the commands' environment, since an installed kit is never compiled from source
on each start.

Goal: report and verify each under 1.5 s at 15,000 runs on an idle two-core machine (the
median of --repeat timings), under half of 209f6cc's time beside it, and a 300-run series
(a GPU series' size) under 0.3 s each.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kit.results import store  # noqa: E402

INPUT = Path(
    os.environ.get("MICAKIT_INPUT")
    or ROOT.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"
)
CONFIGS = 3  # the contender's float32 and two float16 variants
STAMP = re.compile(rb"^(\d+) ", re.M)  # a stamped log's line
SAMPLE_STAMP = re.compile(
    rb'"t_ns": ?(\d+)'
)  # a samples file's line (machine.jsonl, samples.jsonl)
COMMANDS = ("report", "verify")
KIT_COMMIT = """
try:
    from kit import kit_commit
except ImportError:
    from kit.engine.versions import kit_commit
print(kit_commit())
"""


@dataclass(frozen=True)
class Kit:
    """A checkout of the kit: this one, or the baseline (`--baseline`)."""

    name: str
    root: Path

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, str(self.root / "run.py"), *args]

    @property
    def env(self) -> dict[str, str]:
        # the checkout's own kit, whatever kit PYTHONPATH names; its modules' bytecode written
        # and read as an installed kit's is (PYTHONDONTWRITEBYTECODE in the caller's environment
        # would compile every module from source in every timed run, a third of a second)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        return {**env, "PYTHONPATH": str(self.root)}

    @functools.cached_property
    def commit(self) -> str:
        """The commit the kit writes into a directory's manifest (`kit.kit_commit`; an older
        kit's is in kit.engine.versions)."""
        said = subprocess.run(
            [sys.executable, "-c", KIT_COMMIT],
            check=True,
            cwd=self.root,  # an older kit asks git in the folder it runs in
            env=self.env,
            stdout=subprocess.PIPE,
            text=True,
        )
        return said.stdout.strip()

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.argv(*args),
            check=check,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )


def protocol(kit: Kit, path: Path, runs: int) -> Path:
    # every configuration: one discarded run, `runs` timed runs, one profiled run
    per_config = max(1, runs // CONFIGS - 2)
    timing = f"""[timing]
steps = 100
window = [20, 100]
runs = {per_config}
discarded_runs = 1
log_interval = 10
cross_check_tolerance = 0.2
verdict_margin = 0.05
stall_s = 60.0
"""
    text = (kit.root / "kit" / "files" / "protocol.toml").read_text()
    path.write_text(re.sub(r"\[timing\].*?(?=\n\[)", timing.strip(), text, flags=re.S))
    return path


def start_series(kit: Kit, out: Path, proto: Path) -> None:
    series_help = subprocess.run(
        kit.argv("series", "--help"), env=kit.env, capture_output=True, text=True, check=False
    ).stdout
    # a kit that samples the machine around every CPU run needs --full-cpu for the contender
    full_cpu = ["--full-cpu"] if "--full-cpu" in series_help else []
    args = [
        *kit.argv("series"), "--out", str(out), "--protocol", str(proto), "--device", "cpu",
        *full_cpu, "--no-pytorch", "--contender", str(kit.root / "tests/fakes/contender.py"),
        "--executor", "local", "--model", "shakespeare-char", "--precision", "float32",
        "--precision", "float16", "--input", str(INPUT), "--idle-timeout", "0",
    ]  # fmt: skip
    if "--idle-timeout" not in series_help:
        args = args[:-2]
    proc = subprocess.Popen(args, env=kit.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # the discarded runs and round 1 of every configuration
    want = 2 * CONFIGS
    while proc.poll() is None:
        log = out / "runs.jsonl"
        if log.exists() and sum(1 for _ in log.open()) >= want:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            return
        time.sleep(0.2)
    raise SystemExit(f"{kit.name}: the series ended before {want} runs (exit {proc.returncode})")


def _shifted(m: re.Match[bytes], offset: int, template: bytes) -> bytes:
    return template % (int(m.group(1)) + offset)


def _planned(record: dict) -> dict:
    """A record's planned run: under "run" (schema 2 on), or flat beside the envelope (before)."""
    return record.get("run", record)


def grow(out: Path) -> int:
    """Fill every unrecorded timed run with a shifted copy of a real one; return their count."""
    plan = json.loads((out / "plan.json").read_text())
    records = [json.loads(line) for line in (out / "runs.jsonl").open()]
    done = {r["run_id"] for r in records}
    model = {
        _planned(r)["config"]: r
        for r in records
        if _planned(r)["kind"] == "timed" and r["status"] == "ok"
    }
    shift = max(r["end_ns"] for r in records if r["end_ns"]) + 1_000_000
    recorded = {Path(r["log_dir"]).parent for r in records}
    for folder in (out / "runs").iterdir():
        if Path("runs", folder.name) not in recorded:
            # the run the stop cut short: it runs again at the resume, as from the start
            shutil.rmtree(folder)
    lines = []
    for run in plan["order"]:
        if run["run_id"] in done or run["kind"] != "timed":
            continue
        src = model[run["config"]]
        slug = Path(src["log_dir"]).parent.name.split("-", 1)[1]
        log_dir = f"runs/{run['run_id']:04d}-{slug}/attempt-1"
        offset = shift - src["start_ns"]
        logs = functools.partial(_shifted, offset=offset, template=b"%d ")
        sampled = functools.partial(_shifted, offset=offset, template=b'"t_ns":%d')
        files = {}
        for rel in src["files"]:
            data = (out / rel).read_bytes()
            if rel.endswith(("/stdout.log", "/stderr.log")):
                data = STAMP.sub(logs, data)
            elif rel.endswith(".jsonl"):
                data = SAMPLE_STAMP.sub(sampled, data)
            elif rel.endswith("/run.json"):  # what the run's start said, as its record says it
                started = json.loads(data)
                started["start_ns"] += offset
                started["end_ns"] += offset
                data = (json.dumps(started, indent=2) + "\n").encode()
            new = log_dir + rel[len(src["log_dir"]) :]
            path = out / new
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            files[new] = store.sha256_file(path)
        rec = dict(src, run_id=run["run_id"], log_dir=log_dir, files=files)
        if "run" in src:
            rec["run"] = {**src["run"], "round": run["round"]}
        else:
            rec["round"] = run["round"]
        rec["start_ns"] = src["start_ns"] + offset
        rec["end_ns"] = src["end_ns"] + offset
        shift = rec["end_ns"] + 1_000_000
        lines.append(json.dumps(rec) + "\n")
    with open(out / "runs.jsonl", "a") as f:
        f.writelines(lines)
    return len(lines)


def make(kit: Kit, out: Path, runs: int) -> None:
    """A directory of `runs` planned runs, made by `kit` (steps 1 to 3 above)."""
    t0 = time.perf_counter()
    start_series(kit, out, protocol(kit, out.parent / f"{out.name}.toml", runs))
    copied = grow(out)
    resumed = kit.run("series", "--resume", str(out), check=False)
    if resumed.returncode != 0:
        raise SystemExit(f"{kit.name}: the resume failed (exit {resumed.returncode}):\n"
                         f"{resumed.stderr}")  # fmt: skip
    made = sum(1 for _ in (out / "runs.jsonl").open())
    print(
        f"{kit.name}: {made} runs ({copied} copied from real ones), "
        f"made in {time.perf_counter() - t0:.0f} s; {flagged(out)}",
        flush=True,
    )


def made_with(out: Path) -> str | None:
    """The kit commit a directory's manifest names (None where it names none)."""
    try:
        found = json.loads((out / "manifest.json").read_text()).get("kit_commit")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def flagged(out: Path) -> str:
    """How many of the directory's runs §5 flags (its configurations table's `flagged_runs`):
    every copy of a run made on a busy machine is flagged too, and a flagged run costs both
    commands more (its reasons are worded, listed and rendered), so the count is said beside
    the times."""
    csv.field_size_limit(sys.maxsize)  # its notes name every flagged run, in one cell
    with open(out / "tables" / "configurations.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "flagged_runs" not in rows[0]:
        return "flags not tabled by this kit"
    n = sum(int(r["flagged_runs"] or 0) for r in rows)
    if not n:
        return "no timed run flagged (§5)"
    return f"{n} timed runs flagged (§5; a copy of a run made on a busy machine is flagged too)"


@dataclass(frozen=True)
class Timing:
    wall_s: float
    cpu_s: float  # user and system time of the process and the children it waited for
    peak_mb: float  # the largest process's maximum resident set (wait4 takes in its children's)


def timed(kit: Kit, args: list[str]) -> Timing:
    """One run of `micakit ARGS` as a whole process. On a loaded machine its CPU time says
    more than its wall time: other processes' share of the cores is not the kit's."""
    return waited(kit.argv(*args), kit.env, f"{kit.name}: micakit {' '.join(args)}")[0]


def waited(
    argv: list[str], env: dict[str, str], name: str, output: bool = False
) -> tuple[Timing, bytes]:
    """`argv` run as a whole process: its wall and CPU time, its peak memory, and its output
    where asked for (else it goes to /dev/null, as a command's report does here)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE if output else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    # read, not communicate(): that reaps the process, and wait4 below takes its usage
    out = proc.stdout.read() if proc.stdout is not None else b""
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{name}: exit {proc.returncode}\n{err.decode(errors='replace')}")
    return Timing(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024), out


# The floor under any command that checks every file of a directory once, as `verify` must
# (each raw file against the hash its record gives): a bare walk that reads and hashes each
# file, in one process, with nothing else of the kit.
FLOOR = """
import hashlib, os, sys
stack, files, size = [sys.argv[1]], 0, 0
while stack:
    with os.scandir(stack.pop()) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                with open(entry.path, "rb") as f:
                    data = f.read()
                hashlib.sha256(data)
                files, size = files + 1, size + len(data)
print(files, size)
"""
# and under any command that reads its tables with pandas: the interpreter started, pandas
# imported, nothing read; beside it, the same with numpy and click alone (a reading command
# whose tables were numpy arrays)
IMPORTS = ("import pandas", "import numpy, click")


@dataclass(frozen=True)
class Start:
    """An interpreter started with a statement (`--floor-import [PYTHON=]STATEMENT`)."""

    python: str
    statement: str

    @classmethod
    def parse(cls, text: str) -> Start:
        python, sep, statement = text.partition("=")
        if not sep or python.lstrip().startswith(("import", "from")):
            return cls(sys.executable, text)  # a statement alone, with this interpreter
        if not Path(python).is_file():
            raise argparse.ArgumentTypeError(f"no interpreter at {python} (PYTHON=STATEMENT)")
        return cls(python, statement)

    def said(self) -> str:
        mine = self.python == sys.executable
        return f"`{self.statement}`" + ("" if mine else f" (by {self.python})")


def floors(directory: Path, repeat: int, starts: list[Start]) -> str:
    """The floors (FLOOR, then each start), each the median of `repeat` runs, in a line."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    walks = [
        waited([sys.executable, "-c", FLOOR, str(directory)], env, "the floor's walk", True)
        for _ in range(repeat)
    ]
    files, size = (int(x) for x in walks[0][1].split())
    walk_s = statistics.median(t.wall_s for t, _ in walks)
    walk_cpu = statistics.median(t.cpu_s for t, _ in walks)
    said = []
    for start in starts:
        # one start untimed first: its bytecode written, its files in the cache
        waited([start.python, "-c", start.statement], env, start.statement)
        runs = [
            waited([start.python, "-c", start.statement], env, start.statement)[0]
            for _ in range(repeat)
        ]
        said.append(f"{start.said()} {statistics.median(t.wall_s for t in runs):.2f} s")
    return (
        f"floor: {files:,} files ({size / 1e6:.0f} MB) walked, read and hashed once by a bare "
        f"loop in {walk_s:.2f} s ({walk_cpu:.2f} s CPU, one process); Python started with "
        + "; ".join(said)
    )


# cProfile of one command in the kit's own process (`run.py` ends with os._exit), by CPU time
PROFILED = """
import contextlib, cProfile, io, pstats, sys, time
from kit.cli.main import main
profile = cProfile.Profile(time.process_time)
with contextlib.redirect_stdout(io.StringIO()):
    profile.enable()
    try:
        main(sys.argv[2:], standalone_mode=False)
    except SystemExit:
        pass
    profile.disable()
# the kit's own functions below its command layer: click's and the command's frames would
# fill the top lines with the whole run
stats = pstats.Stats(profile, stream=sys.stdout).sort_stats("cumulative")
stats.print_stats(r"/kit/(?!cli/)", int(sys.argv[1]))
"""


def profile(kit: Kit, args: list[str], lines: int) -> str:
    """cProfile's top `lines` by cumulative CPU time of one run of `micakit ARGS`, the kit's
    own functions outside kit/cli (the process's own CPU: its forked workers' is not seen)."""
    proc = subprocess.run(
        [sys.executable, "-c", PROFILED, str(lines), *args],
        env=kit.env,
        capture_output=True,
        text=True,
        check=False,
    )
    text = proc.stdout
    return text[text.find("   ncalls") :] if "   ncalls" in text else text + proc.stderr


def slope(sizes: list[int], values: list[float]) -> float:
    """The slope of log(value) on log(runs): 1 where it grows linearly."""
    return float(np.polyfit(np.log(sizes), np.log(values), 1)[0])


def plot(found: dict, cpus: dict, sizes: list[int], path: Path) -> None:
    """CPU time (on a loaded machine the wall time is mostly others' share of the cores) and
    peak memory against the run count, log–log."""
    import matplotlib  # lazy: only where a plot is asked for

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for (kit, command), rows in found.items():
        xs = [n for n in sizes if n in rows]
        left.plot(xs, [cpus[(kit, command)][n] for n in xs], marker="o", label=f"{kit}: {command}")
        right.plot(xs, [rows[n][1] for n in xs], marker="o", label=f"{kit}: {command}")
    for ax, what in ((left, "CPU seconds (median)"), (right, "peak memory, MB (largest process)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("runs in the directory")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("micakit report and verify against the run count (log–log)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--runs", type=int, nargs="+", default=[15_000], help="planned runs (several: growth)"
    )
    ap.add_argument("--repeat", type=int, default=3, help="timings of each command")
    ap.add_argument("--baseline", type=Path, help="another checkout of the kit, timed beside")
    ap.add_argument("--plot", type=Path, help="write the log–log plot of the growth here")
    ap.add_argument("--profile", type=int, default=0, help="print cProfile's top N lines")
    ap.add_argument(
        "--floor-import",
        type=Start.parse,
        action="append",
        default=[],
        metavar="[PYTHON=]STATEMENT",
        help="another interpreter start to time beside the floors (repeatable)",
    )
    ap.add_argument(
        "--keep",
        type=Path,
        help="make the directories under here and keep them; those already made are reused",
    )
    a = ap.parse_args()
    if not INPUT.exists():
        raise SystemExit(f"needs tiny Shakespeare at {INPUT} (or MICAKIT_INPUT=PATH)")
    kits = [Kit("this kit", ROOT)]
    if a.baseline:
        if not (a.baseline / "run.py").is_file():
            raise SystemExit(f"{a.baseline} is no checkout of the kit (no run.py)")
        kits.append(Kit(f"baseline {a.baseline.name}", a.baseline.resolve()))
    starts = [*(Start(sys.executable, s) for s in IMPORTS), *a.floor_import]
    print(f"load (1, 5, 15 min) at the start: {os.getloadavg()}; {os.cpu_count()} CPUs")
    found: dict[tuple[str, str], dict[int, tuple[float, float]]] = {}  # (median s, peak MB)
    cpus: dict[tuple[str, str], dict[int, float]] = {}  # the median CPU seconds
    with tempfile.TemporaryDirectory() as tmp:
        base = a.keep or Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        for size in a.runs:
            dirs = {}
            for i, kit in enumerate(kits):
                dirs[kit.name] = base / f"{size}-{i}"
                if a.keep and (dirs[kit.name] / "report.md").exists():
                    made_by = made_with(dirs[kit.name])
                    if made_by == kit.commit:
                        # made by an earlier run of this kit with the same --keep: timed again
                        print(
                            f"{kit.name}: {dirs[kit.name]} as an earlier run made it; "
                            f"{flagged(dirs[kit.name])}",
                            flush=True,
                        )
                        continue
                    # another kit's directory: this kit would read it as an older directory
                    # (verify re-renders it as that kit made it), which is not what is timed
                    print(
                        f"{kit.name}: {dirs[kit.name]} was made by kit commit {made_by}, not "
                        f"{kit.commit}: made again",
                        flush=True,
                    )
                    shutil.rmtree(dirs[kit.name])
                make(kit, dirs[kit.name], size)
            # one untimed run of each first: the kits' bytecode written, the files in the cache
            for kit in kits:
                for command in COMMANDS:
                    timed(kit, [command, str(dirs[kit.name])])
            times: dict[tuple[str, str], list[Timing]] = {}
            for _ in range(a.repeat):  # taking turns, so every kit sees the same load
                for kit in kits:
                    for command in COMMANDS:
                        got = timed(kit, [command, str(dirs[kit.name])])
                        times.setdefault((kit.name, command), []).append(got)
            for kit in kits:
                for command in COMMANDS:
                    got = times[(kit.name, command)]
                    t = [x.wall_s for x in got]
                    cpu = statistics.median(x.cpu_s for x in got)
                    peak = max(x.peak_mb for x in got)
                    median = statistics.median(t)
                    found.setdefault((kit.name, command), {})[size] = (median, peak)
                    cpus.setdefault((kit.name, command), {})[size] = cpu
                    print(
                        f"{size:>6} runs  {kit.name:22s} {command:7s} median {median:6.2f} s  "
                        f"min {min(t):6.2f} s  max {max(t):6.2f} s  CPU {cpu:6.2f} s  "
                        f"peak {peak:5.0f} MB"
                    )
            print(f"{size:>6} runs  {floors(dirs[kits[0].name], a.repeat, starts)}", flush=True)
            if len(kits) > 1:
                for command in COMMANDS:
                    mine, theirs = (found[(k.name, command)][size][0] for k in kits)
                    mine_cpu, their_cpu = (cpus[(k.name, command)][size] for k in kits)
                    print(
                        f"{size:>6} runs  {command}: {mine / theirs:.2f} of the baseline's time, "
                        f"{mine_cpu / their_cpu:.2f} of its CPU time"
                    )
            if a.profile:
                for command in COMMANDS:
                    print(f"--- cProfile, {kits[0].name}: micakit {command} ({size} runs) ---")
                    print(profile(kits[0], [command, str(dirs[kits[0].name])], a.profile))
            if a.keep is None:
                for d in dirs.values():
                    shutil.rmtree(d)
            print(f"load (1, 5, 15 min) now: {os.getloadavg()}", flush=True)
    if len(a.runs) > 1:
        for (kit_name, command), rows in found.items():
            xs = sorted(rows)
            b = slope(xs, [rows[n][0] for n in xs])
            c = slope(xs, [cpus[(kit_name, command)][n] for n in xs])
            m = slope(xs, [rows[n][1] for n in xs])
            # the fixed start-up cost (imports) bends the log-log line below 1; the cost of each
            # further thousand runs, size to size, says whether the rest grows linearly
            cpu = cpus[(kit_name, command)]
            each = [
                (cpu[hi] - cpu[lo]) / (hi - lo) * 1000 for lo, hi in zip(xs, xs[1:], strict=False)
            ]
            said = "linear" if max(each) <= 1.5 * min(each) else "not linear"
            print(
                f"{kit_name:22s} {command:7s} time ~ runs^{b:.2f}, CPU time ~ runs^{c:.2f}, "
                f"peak memory ~ runs^{m:.2f}; CPU s per 1,000 more runs: "
                f"{', '.join(f'{x:.3f}' for x in each)} ({said})"
            )
        if a.plot:
            plot(found, cpus, sorted(a.runs), a.plot)


if __name__ == "__main__":
    main()

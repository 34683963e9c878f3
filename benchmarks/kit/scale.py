"""report and verify of a large results directory (a benchmark of the kit itself, not a test).

Makes a results directory of N planned runs (default 15,000) from the fake contender
(tests/fakes, D4's contract) on the CPU, then times `micakit report DIR` and
`micakit verify DIR` as whole processes.

Running 15,000 runs for real would take hours, so the directory is grown from real ones:

1. a series of the fake contender starts under a protocol whose plan has N runs, and is stopped
   (SIGTERM, as a user would) once its discarded runs and first round are recorded;
2. every later timed run is a copy of a real timed run of its configuration: its raw files
   copied into the run's own folder with every stamp shifted to a later time, and its record
   written as the engine writes one (new run id, round, folder, times and file hashes);
3. `micakit series --resume DIR` runs what is left (the profiled runs) for real and publishes.

So the directory is one the kit accepts as its own: `verify` must say clean, and the benchmark
fails if it does not.

    python benchmarks/kit/scale.py [--runs 15000] [--repeat 3] [--keep DIR]

Goal: report and verify each under 2 s at 15,000 runs (the median of --repeat timings).
"""

from __future__ import annotations

import argparse
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kit.protocol.load import DEFAULT_PATH  # noqa: E402
from kit.results import store  # noqa: E402

FAKES = ROOT / "tests" / "fakes"
INPUT = Path(
    os.environ.get("MICAKIT_INPUT")
    or ROOT.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"
)
CONFIGS = 3  # the contender's float32 and two float16 variants
STAMP = re.compile(rb"^(\d+) ", re.M)


def protocol(path: Path, runs: int) -> Path:
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
    text = DEFAULT_PATH.read_text()
    path.write_text(re.sub(r"\[timing\].*?(?=\n\[)", timing.strip(), text, flags=re.S))
    return path


def kit(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args],
        check=check,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_series(out: Path, proto: Path) -> None:
    args = [
        sys.executable, str(ROOT / "run.py"), "series", "--out", str(out),
        "--protocol", str(proto), "--device", "cpu", "--full-cpu", "--no-pytorch",
        "--contender", str(FAKES / "contender.py"), "--executor", "local",
        "--model", "shakespeare-char", "--precision", "float32", "--precision", "float16",
        "--input", str(INPUT),
    ]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # the discarded runs and round 1 of every configuration
    want = 2 * CONFIGS
    while proc.poll() is None:
        log = out / "runs.jsonl"
        if log.exists() and sum(1 for _ in log.open()) >= want:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
            return
        time.sleep(0.2)
    raise SystemExit(f"the series ended before {want} runs (exit {proc.returncode})")


def _shifted(m: re.Match[bytes], offset: int) -> bytes:
    return b"%d " % (int(m.group(1)) + offset)


def grow(out: Path) -> int:
    """Fill every unrecorded timed run with a shifted copy of a real one; return their count."""
    plan = json.loads((out / "plan.json").read_text())
    records = [json.loads(line) for line in (out / "runs.jsonl").open()]
    done = {r["run_id"] for r in records}
    model = {
        r["run"]["config"]: r
        for r in records
        if r["run"]["kind"] == "timed" and r["status"] == "ok"
    }
    shift = max(r["end_ns"] for r in records if r["end_ns"]) + 1_000_000
    lines = []
    for run in plan["order"]:
        if run["run_id"] in done or run["kind"] != "timed":
            continue
        src = model[run["config"]]
        slug = Path(src["log_dir"]).parent.name.split("-", 1)[1]
        log_dir = f"runs/{run['run_id']:04d}-{slug}/attempt-1"
        if (out / log_dir).parent.exists():
            continue  # a run the stop cut short: the resume runs it again
        offset = shift - src["start_ns"]
        files = {}
        for rel in src["files"]:
            data = (out / rel).read_bytes()
            if rel.endswith("stdout.log") or rel.endswith("stderr.log"):
                data = STAMP.sub(functools.partial(_shifted, offset=offset), data)
            new = log_dir + rel[len(src["log_dir"]) :]
            path = out / new
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            files[new] = store.sha256_file(path)
        rec = dict(src, run_id=run["run_id"], log_dir=log_dir, files=files)
        rec["run"] = {**src["run"], "round": run["round"]}
        rec["start_ns"] = src["start_ns"] + offset
        rec["end_ns"] = src["end_ns"] + offset
        shift = rec["end_ns"] + 1_000_000
        lines.append(json.dumps(rec) + "\n")
    with open(out / "runs.jsonl", "a") as f:
        f.writelines(lines)
    return len(lines)


def timed(args: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = kit(*args, check=False)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"micakit {' '.join(args)}: exit {proc.returncode}\n{proc.stderr}")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15_000, help="planned runs in the directory")
    ap.add_argument("--repeat", type=int, default=3, help="timings of each command")
    ap.add_argument("--keep", type=Path, help="make the directory here and keep it")
    a = ap.parse_args()
    if not INPUT.exists():
        raise SystemExit(f"needs tiny Shakespeare at {INPUT} (or MICAKIT_INPUT=PATH)")
    with tempfile.TemporaryDirectory() as tmp:
        out = a.keep or Path(tmp) / "series"
        t0 = time.perf_counter()
        start_series(out, protocol(Path(tmp) / "protocol.toml", a.runs))
        copied = grow(out)
        resumed = kit("series", "--resume", str(out), check=False)
        if resumed.returncode != 0:
            raise SystemExit(f"the resume failed (exit {resumed.returncode}):\n{resumed.stderr}")
        made_s = time.perf_counter() - t0
        runs = sum(1 for _ in (out / "runs.jsonl").open())
        print(f"directory: {runs} runs ({copied} copied from real ones), made in {made_s:.0f} s")
        for name, args in (("report", ["report", str(out)]), ("verify", ["verify", str(out)])):
            t = timed(args, a.repeat)
            print(
                f"{name:7s} median {statistics.median(t):.2f} s  "
                f"min {min(t):.2f} s  max {max(t):.2f} s  (goal < 2 s)"
            )
        if a.keep is None:
            shutil.rmtree(out)


if __name__ == "__main__":
    main()

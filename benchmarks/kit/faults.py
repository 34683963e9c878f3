"""The runner under faults (a benchmark of the kit itself, not a test).

A series of the fake contender (tests/fakes, D4's contract) on the CPU, stopped again and again:

1. kill -9 of micakit at N random moments (default 20), `series --resume` after each;
2. SIGTERM at M random moments (default 50) of another series, resuming after each;
3. two writers at once: a resume beside a running series, and two `--out` started together.

It prints kills, resumes, runs lost (planned runs with no finished record at the end), runs
repeated (a run id finished twice), processes left behind after a stop (a program or a reader
of the stopped series), signals honoured (micakit ended, nothing left), the second writers'
exit codes and `verify`'s result.

    python benchmarks/kit/faults.py [--kills 20] [--sigterms 50] [--seed 1] [--max-s 3]

Goal: 20/20 resumes, 0 lost, 0 repeated, 0 left behind, 50/50 signals honoured, the second
writer refused (exit 2), verify clean.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kit.protocol.load import DEFAULT_PATH  # noqa: E402

FAKES = ROOT / "tests" / "fakes"
INPUT = ROOT.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"
TIMING = """[timing]
steps = 100
window = [20, 100]
runs = 3
discarded_runs = 1
log_interval = 10
cross_check_tolerance = 0.2
verdict_margin = 0.05
stall_s = 60.0
"""
DONE = ("ok", "not profiled")


def protocol(path: Path) -> Path:
    text = DEFAULT_PATH.read_text()
    path.write_text(re.sub(r"\[timing\].*?(?=\n\[)", TIMING.strip(), text, flags=re.S))
    return path


def series_args(out: Path, proto: Path) -> list[str]:
    return [
        "series", "--out", str(out), "--protocol", str(proto), "--device", "cpu", "--full-cpu",
        "--no-pytorch", "--contender", str(FAKES / "contender.py"), "--executor", "local",
        "--model", "shakespeare-char", "--precision", "float32", "--precision", "float16",
        "--input", str(INPUT),
    ]  # fmt: skip


def start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "a") as err:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "run.py"), *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=ROOT,
            start_new_session=True,
        )


def records(out: Path) -> list[dict]:
    path = out / "runs.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x] if path.exists() else []


def left_behind(out: Path, within_s: float = 10.0) -> int:
    """Processes of the stopped series still alive (its program or its reader) after a while."""
    needle = str(out).encode()
    deadline = time.monotonic() + within_s
    while True:
        found = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmd = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if needle in cmd and state != "Z" and b"run.py" not in cmd:
                found += 1
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def tally(out: Path) -> tuple[int, int]:
    plan = json.loads((out / "plan.json").read_text())["order"]
    done = [r["run_id"] for r in records(out) if r["status"] in DONE]
    lost = len({p["run_id"] for p in plan} - set(done))
    repeated = len(done) - len(set(done))
    return lost, repeated


def verify(out: Path, env: dict) -> int:
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "verify", str(out)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ).returncode


def attempts(out: Path) -> int:
    return len(list((out / "runs").glob("*/attempt-*"))) if (out / "runs").exists() else 0


def moment(out: Path, proc: subprocess.Popen, rng, max_s: float) -> float:
    """How long from now to the stop: one in five lands in the kit's start-up (its first
    seconds: versions, the lock, the first run's start), the rest within the runs (after
    the next run has started, 0 to max_s later), whatever the machine's start-up costs."""
    if rng.random() < 0.2:
        return rng.uniform(0.0, 2.0)
    seen = attempts(out)
    deadline = time.monotonic() + 120
    while attempts(out) == seen and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return rng.uniform(0.0, max_s)


def stopping(
    base: Path, proto: Path, env: dict, log: Path, n: int, sig: int, rng, args_max_s: float
) -> dict:
    """n stops with `sig` at random moments (see `moment`), each followed by a resume, each
    series then run to its end; a series that ends before the n-th stop is followed by
    another (base-1, base-2, ...)."""
    stops = resumes = honoured = left = failures = 0
    lost = repeated = 0
    verdicts = []
    index = 0
    while stops < n and failures <= 5:
        index += 1
        out = base.with_name(f"{base.name}-{index}")
        args = series_args(out, proto)
        proc = start(args, env, log)
        while True:
            try:
                proc.wait(timeout=moment(out, proc, rng, args_max_s) if stops < n else 900)
                if stops >= n or proc.returncode == 0:
                    break
            except subprocess.TimeoutExpired:
                if sig == signal.SIGKILL:
                    os.kill(proc.pid, signal.SIGKILL)  # micakit alone: its tree must end itself
                else:
                    os.killpg(proc.pid, sig)  # as a terminal or a supervisor sends it
                stops += 1
                try:
                    code = proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    code = None
                stranded = left_behind(out)
                left += stranded
                if code in (130, -sig) and not stranded:
                    honoured += 1
            if proc.returncode not in (None, 0, 130, -signal.SIGKILL, -signal.SIGTERM):
                failures += 1
                print(f"  exit {proc.returncode}:", log.read_text()[-600:], file=sys.stderr)
                if failures > 5:
                    break
            if (out / "manifest.json").exists():
                proc = start(["series", "--resume", str(out)], env, log)
                resumes += 1
            else:
                proc = start(args, env, log)  # stopped before its first run: started again
        if (out / "plan.json").exists():
            a, b = tally(out)
            lost, repeated = lost + a, repeated + b
            verdicts.append(verify(out, env))
    return {
        "series": index,
        "stops": stops,
        "resumes": resumes,
        "runs lost": lost,
        "runs repeated": repeated,
        "left behind": left,
        "honoured": honoured,
        "verify": verdicts,
    }


def two_writers(tmp: Path, proto: Path, env: dict, log: Path) -> dict:
    out = tmp / "two"
    first = start(series_args(out, proto), env, log)
    while not (out / "manifest.json").exists() and first.poll() is None:
        time.sleep(0.05)
    second = start(["series", "--resume", str(out)], env, log)
    resume_code = second.wait(60)
    first.wait(600)
    # two `--out` started together on one new directory
    out2 = tmp / "two-out"
    a, b = (start(series_args(out2, proto), env, log) for _ in range(2))
    codes = sorted([a.wait(600), b.wait(600)])
    lost, repeated = tally(out2)
    return {
        "resume beside a series": resume_code,
        "first series": first.returncode,
        "two --out at once": codes,
        "runs lost": lost,
        "runs repeated": repeated,
        "verify": verify(out2, env),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--sigterms", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-s", type=float, default=3.0, help="latest stop after a run starts")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        proto = protocol(tmp / "protocol.toml")
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        env["MICAKIT_FAKE"] = json.dumps({"step_ms": {"*": 10.0}, "state": str(tmp / "state")})
        log = tmp / "stderr.txt"
        t0 = time.monotonic()
        kill = stopping(tmp / "kill9", proto, env, log, args.kills, signal.SIGKILL, rng, args.max_s)
        print(f"kill -9:  {kill}", flush=True)
        term = stopping(
            tmp / "sigterm", proto, env, log, args.sigterms, signal.SIGTERM, rng, args.max_s
        )
        print(f"SIGTERM:  {term}", flush=True)
        two = two_writers(tmp, proto, env, log)
        print(f"writers:  {two}", flush=True)
        print(
            f"\n{kill['stops']} kills, {kill['resumes']} resumes, runs lost "
            f"{kill['runs lost'] + term['runs lost']}, runs repeated "
            f"{kill['runs repeated'] + term['runs repeated']}, processes left behind "
            f"{kill['left behind'] + term['left behind']}; signals honoured "
            f"{term['honoured']}/{term['stops']}; the second writer: exit "
            f"{two['resume beside a series']}, two --out: exits {two['two --out at once']}; "
            f"verify: {kill['verify'] + term['verify'] + [two['verify']]} "
            f"({time.monotonic() - t0:.0f} s)"
        )


if __name__ == "__main__":
    main()

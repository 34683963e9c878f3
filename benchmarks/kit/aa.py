"""Benchmark: A/A series on this machine, the floor of what the kit can tell apart here.

Each case runs `micakit series --aa` on the CPU and reads its tables/aa.csv, which the kit
recomputes from the raw logs: per A/A configuration, the ratio of its twin's median to its own
(the A/A ratio), the round ratios' range, the bootstrap interval of the ratio, and the flag the
report's title would carry; beside them the machine's load over the case (the 1-minute load
average before and after, and the median share of the CPUs other processes used over the A/A
runs' timed steps, from tables/runs.csv).

(a) sleep: the fake contender (tests/fakes, D4's contract) sleeping to a deadline 1 ms a step:
    the clock's and the scheduler's floor. Goal: the A/A ratio within 0.2% of 1.00 and every
    round within 1%.
(b) nanogpt: nanoGPT's scaled-down M1 (the smoke series' model) in eager mode against its
    twin: a real program's floor.
(c) nanogpt-busy: (b) with a busy neighbour, one process spinning on one core.

    python benchmarks/kit/aa.py --nanogpt PATH --input PATH [--runs 5] [--case sleep ...]

(b) and (c) need a nanoGPT checkout at the pinned commit and tiny Shakespeare; without
--nanogpt only (a) runs. Each case's protocol is the kit's own with `runs` rounds, PyTorch's
eager mode alone, and the CPU's busy mark left to the figures (conditions.cpu_busy_share 1.0:
the load is printed instead of waited out).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kit.engine.series import files_beside  # noqa: E402
from kit.protocol.load import DEFAULT_PATH, load  # noqa: E402

FAKES = ROOT / "tests" / "fakes"
INPUT = ROOT.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"
CASES = ("sleep", "nanogpt", "nanogpt-busy")


def protocol(path: Path, runs: int) -> Path:
    """The kit's protocol with `runs` rounds (timed and smoke), PyTorch's eager mode alone in
    the smoke series, and no wait for a busy CPU (the load is printed beside the figures)."""
    for name in files_beside(load(DEFAULT_PATH)):  # the patch and the files it names beside it
        if not Path(name).is_absolute():
            (path.parent / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(DEFAULT_PATH.parent / name, path.parent / name)
    text = DEFAULT_PATH.read_text()
    for table in ("timing", "smoke"):
        text = re.sub(
            rf"(\n\[{table}\](?:(?!\n\[).)*?\nruns = )\d+", rf"\g<1>{runs}", text, flags=re.S
        )
    text = re.sub(
        r"(\n\[smoke\](?:(?!\n\[).)*?\nmodes = )\[[^\]]*\]", r'\g<1>["eager"]', text, flags=re.S
    )
    text = re.sub(r"\ncpu_busy_share = [0-9.]+", "\ncpu_busy_share = 1.0", text)
    path.write_text(text)
    return path


def series_args(case: str, out: Path, proto: Path, a: argparse.Namespace) -> list[str]:
    args = ["series", "--out", str(out), "--protocol", str(proto), "--device", "cpu"]
    args += ["--executor", "local", "--model", "shakespeare-char", "--precision", "float32"]
    args += ["--input", str(a.input)]
    if case == "sleep":
        contender = str(FAKES / "contender.py")
        return [*args, "--full-cpu", "--no-pytorch", "--contender", contender, "--aa"]
    eager = "shakespeare-char/float32/pytorch/eager"
    return [*args, "--smoke", "--nanogpt", str(a.nanogpt), "--allow-torch", "--aa", eager]


@contextmanager
def neighbour(busy: bool) -> Iterator[None]:
    """One process spinning on one core (the last), for as long as the case runs."""
    if not busy:
        yield
        return
    core = max(os.sched_getaffinity(0))
    spin = f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True:\n    pass\n"
    proc = subprocess.Popen([sys.executable, "-c", spin])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def run_case(case: str, a: argparse.Namespace, tmp: Path) -> dict[str, object]:
    out = tmp / case
    proto = protocol(tmp / f"{case}.toml", a.runs)
    env = {**os.environ, "MICAKIT_FAKE": json.dumps({"step_ms": {"*": 1.0}})}
    env["MICAKIT_FAKES"] = str(FAKES)
    load_before = os.getloadavg()[0]
    start = time.monotonic()
    with neighbour(case == "nanogpt-busy"):
        proc = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), *series_args(case, out, proto, a), "-q"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    wall_s = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{case}: series exit {proc.returncode}: {proc.stderr[-2000:]}")
    aa = pd.read_csv(out / "tables" / "aa.csv")
    runs = pd.read_csv(out / "tables" / "runs.csv")
    mine = runs[runs["kind"].isin(["aa", "aa-twin"])]
    others = mine["others_cpu_share"] if "others_cpu_share" in mine else pd.Series(dtype=float)
    return {
        "case": case,
        "aa": aa,
        "wall_s": wall_s,
        "load": (load_before, os.getloadavg()[0]),
        "others": float(others.median()) if others.notna().any() else float("nan"),
    }


def report(found: dict) -> None:
    aa: pd.DataFrame = found["aa"]  # type: ignore[assignment]
    before, after = found["load"]  # type: ignore[misc]
    print(
        f"{found['case']}: {found['wall_s']:.0f} s; load (1 min) {before:.2f} before, "
        f"{after:.2f} after; others' CPU share over the A/A runs {found['others']:.0%}"
    )
    for _, r in aa.iterrows():
        print(
            f"  {r['config']} against {r['twin']}: A/A ratio {r['ratio']:.4f} "
            f"(95% interval {r['ratio_interval_low']:.4f}–{r['ratio_interval_high']:.4f}); "
            f"rounds {r['ratio_min']:.4f}–{r['ratio_max']:.4f}, A/A spread "
            f"{r['aa_spread']:.2%}, timed rounds' spread {r['timed_spread']:.2%}; "
            + (f"flagged: {r['flag_reasons']}" if r["flagged"] else "not flagged")
        )
        if found["case"] == "sleep":
            met = abs(r["ratio"] - 1) <= 0.002 and r["aa_spread"] <= 0.01
            said = "met" if met else "missed"
            print(f"  goal (ratio within 0.2% of 1, every round within 1%): {said}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nanogpt", type=Path, help="nanoGPT at the pinned commit")
    parser.add_argument("--input", type=Path, default=INPUT, help="tiny Shakespeare's input.txt")
    parser.add_argument("--runs", type=int, default=5, help="timed rounds, and A/A rounds")
    parser.add_argument("--case", action="append", choices=CASES, help="default: every case")
    a = parser.parse_args(argv)
    cases = a.case or [c for c in CASES if c == "sleep" or a.nanogpt]
    print(f"machine: {os.cpu_count()} CPUs; {a.runs} timed rounds and {a.runs} A/A rounds a case")
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            report(run_case(case, a, Path(tmp)))


if __name__ == "__main__":
    main(sys.argv[1:])

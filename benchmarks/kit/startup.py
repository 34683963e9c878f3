"""How long `micakit --help` and `micakit --version` take from a cold process; goal 0.3 s.

    python benchmarks/kit/startup.py [--runs 10]

Each figure is the median wall time of RUNS fresh processes of the kit's interpreter (`python -m
kit.cli.main ARGS`, as the `micakit` script runs it), from start to exit. The CLI imports only
click before it parses its arguments; the commands import what they use.

Then the two processes every local run starts beside its program, whose CPU a series pays once
a run: its supervisor (as the local executor starts it; `--probe` only tries the namespaces)
and the outside clock's reader (its interpreter and imports), with the supervisor as it was
started before (with `site`) beside them. These have no goal: they are said.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from kit.executors import supervisor

ROOT = Path(__file__).resolve().parents[2]
GOAL_S = 0.3
CASES = (("--help",), ("--version",))
# what no CLI can beat: the interpreter alone, and the interpreter with click
FLOORS = {"python -c pass": ("-c", "pass"), "python -c 'import click'": ("-c", "import click")}
PER_RUN = {
    "a run's supervisor": supervisor.command("--probe")[1:],
    "a run's supervisor, with site (before)": supervisor.command("--probe")[2:],
    "a run's outside-clock reader, its imports": ("-S", "-c", "import kit.measure.clock"),
}


def cold_start_s(args: tuple[str, ...], runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system) seconds of `runs` fresh `python ARGS` processes, one after
    the other. On a loaded machine the wall time grows with the load; the CPU time much less."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, *args], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, check=True
        )
        wall.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="cold processes per command")
    a = parser.parse_args(argv)
    # the interpreter and the kit's files into the page cache first
    cold_start_s(("-m", "kit.cli.main", "--version"), 1)
    worst = 0.0
    for args in CASES:
        wall, cpu = (np.array(x) for x in cold_start_s(("-m", "kit.cli.main", *args), a.runs))
        median = float(np.median(wall))
        worst = max(worst, median)
        print(
            f"micakit {' '.join(args):<9} median {median:.3f} s (min {wall.min():.3f}, "
            f"max {wall.max():.3f}, {a.runs} processes), CPU median {np.median(cpu):.3f} s"
        )
    for name, args in FLOORS.items():
        wall, cpu = cold_start_s(args, a.runs)
        print(f"floor: {name} median {np.median(wall):.3f} s, CPU median {np.median(cpu):.3f} s")
    for name, args in PER_RUN.items():
        wall, cpu = cold_start_s(args, a.runs)
        print(f"per run: {name} median {np.median(wall):.3f} s, CPU median {np.median(cpu):.3f} s")
    print(f"goal: median <= {GOAL_S} s: {'met' if worst <= GOAL_S else 'missed'}")
    return 0 if worst <= GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())

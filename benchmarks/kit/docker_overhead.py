"""What the Docker executor adds to a run, against `docker run` and local processes (a benchmark).

1. Per run: from the call to the program's first line (create, attach, start), and from its
   last line to the container's removal, for the Docker executor; the same two for `docker run
   --rm` from the command line on the same image (the CLI is used here only, as the reference);
   and the first of them for a local process.
2. Stamp delay (§5: the outside clock): a probe prints its own CLOCK_MONOTONIC time every 5 ms,
   400 lines; the delay of a line is its stamp minus the time written in it. Containers share
   the host's monotonic clock (Docker makes no time namespace), so the two are on one axis.

    python benchmarks/kit/docker_overhead.py [--image micakit-base:bookworm] [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kit.executors.base import Executor, RunSpec  # noqa: E402
from kit.executors.docker import connection  # noqa: E402
from kit.executors.docker.executor import DockerExecutor  # noqa: E402
from kit.executors.local import LocalExecutor  # noqa: E402
from kit.measure import stamped  # noqa: E402

PROBE = """
import sys, time
n, period = int(sys.argv[1]), float(sys.argv[2]) / 1e3
t0 = time.monotonic()
for i in range(n):
    time.sleep(max(0.0, t0 + i * period - time.monotonic()))
    sys.stdout.write(f"{time.monotonic_ns()}\\n")
    sys.stdout.flush()
"""


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "min": min(values),
        "p50": statistics.median(values),
        "p99": pct(values, 99),
        "max": max(values),
    }


def executor_overhead(ex: Executor, image: str | None, runs: int, tmp: Path) -> dict:
    first_ms, removed_ms = [], []
    for i in range(runs):
        spec = RunSpec(label=f"overhead {i}", argv=("sh", "-c", "echo first"), image=image)
        t0 = time.monotonic_ns()
        outcome = ex.run(spec, tmp / f"{ex.name}-{i}")
        t1 = time.monotonic_ns()
        (line,) = stamped.read_stamped(outcome.stdout_log)
        first_ms.append((line.stamp_ns - t0) / 1e6)
        removed_ms.append((t1 - line.stamp_ns) / 1e6)
    return {
        "call_to_first_line_ms": summary(first_ms),
        "last_line_to_return_ms": summary(removed_ms),
    }


def cli_overhead(image: str, runs: int) -> dict:
    """`docker run --rm` as a user types it: first line read here, then the CLI's exit."""
    first_ms, removed_ms = [], []
    for _ in range(runs):
        t0 = time.monotonic_ns()
        proc = subprocess.Popen(
            ["docker", "run", "--rm", image, "sh", "-c", "echo first"], stdout=subprocess.PIPE
        )
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.select()
        t_line = time.monotonic_ns()
        proc.stdout.read()
        proc.wait()
        t1 = time.monotonic_ns()
        first_ms.append((t_line - t0) / 1e6)
        removed_ms.append((t1 - t_line) / 1e6)
    return {
        "call_to_first_line_ms": summary(first_ms),
        "last_line_to_return_ms": summary(removed_ms),
    }


def stamp_delay(
    ex: Executor, argv0: str, image: str | None, lines: int, period_ms: float, tmp: Path
) -> dict:
    spec = RunSpec(
        label="probe", argv=(argv0, "-c", PROBE, str(lines), str(period_ms)), image=image
    )
    outcome = ex.run(spec, tmp / f"probe-{ex.name}")
    assert outcome.exit_code == 0, outcome.stderr_log.read_text()
    delays_us = [(s.stamp_ns - int(s.text)) / 1e3 for s in stamped.read_stamped(outcome.stdout_log)]
    assert len(delays_us) == lines
    return summary(delays_us)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--image", default=os.environ.get("MICAKIT_BASE_IMAGE", "micakit-base:bookworm")
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--lines", type=int, default=400)
    parser.add_argument("--period-ms", type=float, default=5.0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    client = connection.connect()
    docker_ex = DockerExecutor(client, f"bench-{os.getpid()}")
    local_ex = LocalExecutor()
    out: dict = {"image": args.image, "engine": connection.versions(client)}
    with tempfile.TemporaryDirectory(prefix="micakit-bench-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            executor_overhead(docker_ex, args.image, 2, tmp / "warm")  # the volume, the caches
            out["docker_executor"] = executor_overhead(docker_ex, args.image, args.runs, tmp)
            out["local_executor"] = executor_overhead(local_ex, None, args.runs, tmp)
            if shutil.which("docker"):
                out["docker_run_cli"] = cli_overhead(args.image, args.runs)
            out["stamp_delay_docker_us"] = stamp_delay(
                docker_ex, "python3", args.image, args.lines, args.period_ms, tmp
            )
            out["stamp_delay_local_us"] = stamp_delay(
                local_ex, sys.executable, None, args.lines, args.period_ms, tmp
            )
        finally:
            docker_ex.drop_cache()
    print(f"image {args.image}, engine {out['engine']['docker_engine']}, {args.runs} runs each")
    print(f"{'':34} {'min':>8} {'p50':>8} {'p99':>8} {'max':>8}")
    for key in ("docker_executor", "docker_run_cli", "local_executor"):
        for what, s in out.get(key, {}).items():
            row = f"{key} {what}"
            print(f"{row:34} " + " ".join(f"{s[k]:8.1f}" for k in ("min", "p50", "p99", "max")))
    for key in ("stamp_delay_docker_us", "stamp_delay_local_us"):
        s = out[key]
        print(f"{key:34} " + " ".join(f"{s[k]:8.1f}" for k in ("min", "p50", "p99", "max")))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

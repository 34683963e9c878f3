"""Benchmark of the instrument itself (§5's outside clock), not a test.

A probe program prints a line carrying its own `time.monotonic_ns()` every 5 ms, 401 lines
(steps 0..400 of a timing run). For every line, the stamp delay is the reader's stamp minus the
probe's own time; the window's step time (lines 100 to 400, 300 intervals) from the stamps is
set against the probe's own reading of the same window.

    python benchmarks/kit/clock.py [--repeats 5] [--interval-ms 5] [--with-sampler]

Goal on a 2-core machine: p99 stamp delay at most 1 ms; agreement within 0.05%.
`--with-sampler` runs the card sampler (on the recorded fake card, as a series runs it: a
thread of the kit's process, 1 s and 50 ms intervals) during every probe run, to show what it
adds to the stamps (issue goal: no measurable change in p99).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kit.executors.base import RunSpec  # noqa: E402
from kit.executors.local import LocalExecutor  # noqa: E402
from kit.measure.clock import read_stamped  # noqa: E402

PROBE = """
import sys, time
interval = float(sys.argv[1]) / 1e3
start = time.monotonic()
for i in range(401):
    time.sleep(max(0.0, start + i * interval - time.monotonic()))
    print(i, time.monotonic_ns(), flush=True)
"""


def measure(executor, interval_ms: float, folder: Path, spec_for=None) -> dict:
    spec = (spec_for or (lambda argv: RunSpec("probe", argv)))(
        (sys.executable, "-c", PROBE, str(interval_ms))
    )
    outcome = executor.run(spec, folder)
    lines = list(read_stamped(outcome.stdout_log))
    written = np.array([int(x.text.split()[1]) for x in lines], dtype=np.int64)
    stamped = np.array([x.stamp_ns for x in lines], dtype=np.int64)
    delay_ms = (stamped - written) / 1e6
    outside = (stamped[400] - stamped[100]) / 300
    own = (written[400] - written[100]) / 300
    return {
        "lines": len(lines),
        "p50_ms": float(np.percentile(delay_ms, 50)),
        "p99_ms": float(np.percentile(delay_ms, 99)),
        "max_ms": float(delay_ms.max()),
        "agreement_pct": float(abs(outside - own) / own * 100),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--interval-ms", type=float, default=5.0)
    parser.add_argument("--with-sampler", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            folder = Path(tmp) / str(i)
            if args.with_sampler:
                from kit.telemetry.nvml import FakeCard
                from kit.telemetry.sampler import Sampler

                fixture = (
                    Path(__file__).resolve().parents[2] / "tests/fixtures/nvml/steady_run.json"
                )
                card = FakeCard.from_file(fixture)
                folder.mkdir(parents=True)
                with Sampler(card, folder / "samples.jsonl"):
                    rows.append(measure(LocalExecutor(), args.interval_ms, folder))
            else:
                rows.append(measure(LocalExecutor(), args.interval_ms, folder))
    df = pd.DataFrame(rows)
    print(df.to_string(float_format=lambda x: f"{x:.4f}"))
    print(
        f"\nover {args.repeats} runs: p50 {df.p50_ms.median():.4f} ms, "
        f"p99 worst {df.p99_ms.max():.4f} ms (goal <= 1 ms), max {df.max_ms.max():.4f} ms, "
        f"agreement worst {df.agreement_pct.max():.5f}% (goal <= 0.05%)"
    )


if __name__ == "__main__":
    main()

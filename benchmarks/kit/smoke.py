"""Benchmark: the CPU smoke series end to end, and how much of it is training and how much kit.

    python benchmarks/kit/smoke.py [--nanogpt PATH] [--input PATH] [series options...]

Training is the time each run's program lived (from its start to its exit, the records'
start_ns and end_ns); the kit's share is the rest of the wall time: process starts of the kit,
nanoGPT's and the data's preparation, versions, the report. Goal: the kit's share under 10%.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "smoke"
        cmd = [
            sys.executable,
            str(ROOT / "run.py"),
            "series",
            "--smoke",
            "--device",
            "cpu",
            "--executor",
            "local",
            "--out",
            str(out),
            *argv,
        ]
        start = time.monotonic()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall_s = time.monotonic() - start
        records = [json.loads(x) for x in (out / "runs.jsonl").read_text().splitlines()]
        ran = [r for r in records if r["start_ns"] is not None]
        training_s = sum((r["end_ns"] - r["start_ns"]) / 1e9 for r in ran)
    kit_s = wall_s - training_s
    print(f"smoke series: {len(ran)} runs, wall {wall_s:.1f} s")
    print(f"  training (the runs' programs): {training_s:.1f} s ({training_s / wall_s:.1%})")
    print(f"  the kit (everything else):     {kit_s:.1f} s ({kit_s / wall_s:.1%}; goal < 10%)")


if __name__ == "__main__":
    main(sys.argv[1:])

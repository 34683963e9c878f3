"""What the bill of materials adds to measuring an image's footprint (§8; a benchmark).

Measures IMAGE's footprint (`kit.executors.docker.inventory.footprint`: the tar stream of a
container never started, every file hashed) `--repeat` times with its SBOM, and as many times
with the SBOM's writing left out (`sbom.write` replaced here, in this process only); each pair
alternates, so a machine that slows down weighs on both. `--profile` adds cProfile's view of
one SBOM's writing: the functions where its time goes.

    python benchmarks/kit/sbom.py [--image micakit-test-pytorch:ci] [--repeat 2] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import docker  # noqa: E402

from kit.executors.docker import inventory, sbom  # noqa: E402


def measure(client: docker.DockerClient, image: str, with_sbom: bool) -> tuple[float, dict]:
    written = sbom.write
    if not with_sbom:
        sbom.write = lambda *_: ""  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as folder:
            start = time.monotonic()
            record = inventory.footprint(client, image, Path(folder))
            return time.monotonic() - start, record
    finally:
        sbom.write = written  # type: ignore[assignment]


def profile(client: docker.DockerClient, image: str) -> str:
    prof = cProfile.Profile()
    written = sbom.write

    def profiled(*args: object) -> str:
        prof.enable()
        try:
            return written(*args)  # type: ignore[arg-type]
        finally:
            prof.disable()

    sbom.write = profiled  # type: ignore[assignment]
    try:
        measure(client, image, True)
    finally:
        sbom.write = written  # type: ignore[assignment]
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
    return out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default="micakit-test-pytorch:ci", help="the image to measure")
    ap.add_argument("--repeat", type=int, default=2, help="measurements of each kind")
    ap.add_argument("--profile", action="store_true", help="cProfile one SBOM's writing")
    a = ap.parse_args()
    client = docker.from_env()
    with_s, without_s = [], []
    record: dict = {}
    for _ in range(a.repeat):
        took, record = measure(client, a.image, True)
        with_s.append(took)
        without_s.append(measure(client, a.image, False)[0])
    files = record["files"]
    print(f"{a.image}: {files['entries']} entries, {files['regular_file_bytes']} bytes of files")
    print(f"machine: {os.cpu_count()} CPUs, load (1 min) {os.getloadavg()[0]:.2f} at the end")
    for name, times in (("with the SBOM", with_s), ("without it", without_s)):
        print(
            f"footprint {name}: median {statistics.median(times):.1f} s "
            f"(min {min(times):.1f} s, max {max(times):.1f} s, {len(times)} runs)"
        )
    if a.profile:
        print(profile(client, a.image))


if __name__ == "__main__":
    main()

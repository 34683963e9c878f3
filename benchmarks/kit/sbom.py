"""What the bill of materials adds to measuring an image's footprint (§8; a benchmark).

Measures IMAGE's footprint (`kit.executors.docker.inventory.footprint`: the tar stream of a
container never started, every file hashed into files.tsv) `--repeat` times with its SBOM, and
as many times without (`with_sbom=False`: no owners, no SBOM); each pair alternates, so a
machine that slows down weighs on both. It prints the ratio of the medians, the SBOM's size,
and the machine's load (/proc/loadavg) before and after. `--profile` adds cProfile's view of
one SBOM's making (`sbom.owners` and `sbom.write`): the functions where its time goes.

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


def measure(
    client: docker.DockerClient, image: str, with_sbom: bool
) -> tuple[float, float, dict, int]:
    """Seconds one footprint took (wall clock, and this process's CPU: the engine's export
    runs in dockerd, the reading, hashing and SBOM here), its record, and its SBOM's size in
    bytes (0 without)."""
    with tempfile.TemporaryDirectory() as folder:
        start, cpu = time.monotonic(), time.process_time()
        record = inventory.footprint(client, image, Path(folder), with_sbom=with_sbom)
        took, cpu = time.monotonic() - start, time.process_time() - cpu
        written = Path(folder, sbom.SBOM_NAME)
        return took, cpu, record, written.stat().st_size if written.exists() else 0


def profile(client: docker.DockerClient, image: str) -> str:
    prof = cProfile.Profile()
    originals = sbom.owners, sbom.write

    def profiled(function):  # type: ignore[no-untyped-def]
        def run(*args: object) -> object:
            prof.enable()
            try:
                return function(*args)
            finally:
                prof.disable()

        return run

    sbom.owners, sbom.write = (profiled(f) for f in originals)  # type: ignore[assignment]
    try:
        measure(client, image, True)
    finally:
        sbom.owners, sbom.write = originals  # type: ignore[assignment]
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
    with_s, without_s, with_cpu, without_cpu = [], [], [], []
    record: dict = {}
    size = 0
    load_before = Path("/proc/loadavg").read_text().strip()
    for _ in range(a.repeat):
        took, cpu, record, size = measure(client, a.image, True)
        with_s.append(took)
        with_cpu.append(cpu)
        took, cpu, _, _ = measure(client, a.image, False)
        without_s.append(took)
        without_cpu.append(cpu)
    files = record["files"]
    print(f"{a.image}: {files['entries']} entries, {files['regular_file_bytes']} bytes of files")
    print(f"machine: {os.cpu_count()} CPUs; /proc/loadavg before: {load_before}, after: "
          f"{Path('/proc/loadavg').read_text().strip()}")  # fmt: skip
    for name, times in (("with the SBOM", with_s), ("without it", without_s)):
        print(
            f"footprint {name}: median {statistics.median(times):.2f} s "
            f"(min {min(times):.2f} s, max {max(times):.2f} s, {len(times)} runs)"
        )
    for name, times in (("with the SBOM", with_cpu), ("without it", without_cpu)):
        print(f"this process's CPU {name}: median {statistics.median(times):.2f} s")
    for what, w, o in (("wall clock", with_s, without_s), ("CPU", with_cpu, without_cpu)):
        ratio = statistics.median(w) / statistics.median(o)
        pairs = ", ".join(f"{x / y:.3f}" for x, y in zip(w, o, strict=True))
        print(f"with / without, {what}: {ratio:.3f} (medians); pair by pair: {pairs}")
    print(f"SBOM: {size} bytes")
    if a.profile:
        print(profile(client, a.image))


if __name__ == "__main__":
    main()

"""What the §5 sampler costs: CPU time per second of sampling, goal under 1% of one core.

    python benchmarks/kit/sampler.py [--seconds 10] [--real]

By default the card is the recorded one (tests/fixtures/nvml/steady_run.json), so the figure is
the sampler's own cost: its thread, its JSON lines, its file. `--real` samples the machine's
first NVIDIA card through NVML instead, adding NVML's calls. `run_sampler_for` is for other
benchmarks (the clock benchmark measures the stamps' delay with the sampler running beside).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kit.telemetry.nvml import Card, open_card  # noqa: E402
from kit.telemetry.recorded import FakeCard  # noqa: E402
from kit.telemetry.sampler import Sampler  # noqa: E402
from kit.telemetry.samples import summarize_samples  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "nvml" / "steady_run.json"
GOAL_CORE_FRACTION = 0.01


@dataclass(frozen=True)
class SamplerCost:
    wall_s: float
    cpu_s: float  # process CPU time, user and system, over the sampling
    samples: int
    memory_reads: int
    file_bytes: int

    @property
    def core_fraction(self) -> float:
        return self.cpu_s / self.wall_s if self.wall_s else float("nan")

    def lines(self) -> list[str]:
        return [
            f"sampled {self.wall_s:.1f} s: {self.samples} samples, "
            f"{self.memory_reads} memory reads, {self.file_bytes} bytes written",
            f"CPU {self.cpu_s * 1e3 / self.wall_s:.2f} ms per second of sampling = "
            f"{self.core_fraction:.3%} of one core (goal < {GOAL_CORE_FRACTION:.0%})",
        ]


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_sampler_for(
    seconds: float,
    card: Card | None = None,
    *,
    interval_s: float = 1.0,
    memory_interval_s: float | None = 0.05,
    directory: Path | None = None,
) -> SamplerCost:
    """Run a Sampler for `seconds` while this thread sleeps; return what it cost the process."""
    card = card or FakeCard.from_file(FIXTURE, clock=time.monotonic_ns)
    with tempfile.TemporaryDirectory(dir=directory) as temp:
        path = Path(temp) / "samples.jsonl"
        sampler = Sampler(card, path, interval_s=interval_s, memory_interval_s=memory_interval_s)
        cpu_before, wall_before = _cpu_s(), time.monotonic()
        with sampler:
            time.sleep(seconds)
        cpu, wall = _cpu_s() - cpu_before, time.monotonic() - wall_before
        summary = summarize_samples(path)
        return SamplerCost(
            wall_s=wall,
            cpu_s=cpu,
            samples=summary.sample_count,
            memory_reads=sampler.memory_reads,
            file_bytes=path.stat().st_size,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=1.0, help="full samples, seconds")
    parser.add_argument("--memory-interval", type=float, default=0.05, help="memory, seconds")
    parser.add_argument("--real", action="store_true", help="sample card 0 through NVML")
    args = parser.parse_args(argv)
    card: Card | None = open_card() if args.real else None
    cost = run_sampler_for(
        args.seconds, card, interval_s=args.interval, memory_interval_s=args.memory_interval
    )
    print(f"card: {'NVML card 0' if args.real else FIXTURE.name}")
    print("\n".join(cost.lines()))
    return 0 if cost.core_fraction < GOAL_CORE_FRACTION else 1


if __name__ == "__main__":
    sys.exit(main())

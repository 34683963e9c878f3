"""The card's conditions around every run (§5 "Conditions"), and the versions (rule 4, §6).

Before every run the card must hold no other program; during every run its clocks,
temperature, power and memory are sampled on the same monotonic clock as the line stamps. The
samples are raw files of the run, so every summary and flag is recomputed from them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kit.engine import store
from kit.telemetry import sampler, samples
from kit.telemetry.nvml import Card

SAMPLES = "samples.jsonl"
IDLE = "idle.json"


@dataclasses.dataclass
class CardConditions:
    card: Card
    idle_timeout_s: float = 60.0
    refuse_busy: bool = False

    @contextmanager
    def around(self, log_dir: Path) -> Iterator[None]:
        check = sampler.wait_until_idle(
            self.card, timeout_s=self.idle_timeout_s, refuse_at_once=self.refuse_busy
        )
        store.write_json(log_dir / IDLE, dataclasses.asdict(check))
        with sampler.Sampler(self.card, log_dir / SAMPLES):
            yield


def run_summary(log_dir: Path, start_ns: int | None, end_ns: int | None) -> dict:
    """Peak memory and the window's clocks of one run, from its samples; {} without samples."""
    path = log_dir / SAMPLES
    if not path.exists():
        return {}
    return samples.summarize_samples(path, start_ns, end_ns).to_dict()

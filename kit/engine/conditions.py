"""The conditions around every run (§5 "Conditions"): the card's, or a CPU series' machine's.

Before every run the card must hold no other program; during every run its clocks,
temperature, power and memory are sampled on the same monotonic clock as the line stamps. A CPU
series checks the machine the same way: before every run, that other processes leave its CPUs
alone enough; during it, their share of the CPUs, the load and the CPUs' clock. The samples are
raw files of the run, so every summary and flag is recomputed from them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kit.protocol.load import Conditions
from kit.results import run_conditions, store
from kit.results.rawfiles import IDLE, MACHINE, SAMPLES
from kit.telemetry import machine, sampler
from kit.telemetry.nvml import Card
from kit.telemetry.procfs import ProcFiles


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
        store.write_json(log_dir / IDLE, {"schema_version": 1, **dataclasses.asdict(check)})
        with sampler.Sampler(self.card, log_dir / SAMPLES):
            yield


@dataclasses.dataclass
class MachineConditions:
    """A CPU series' machine around every run: the check before (idle.json) and the samples
    during (machine.jsonl). `running` names the container of the run in progress, whose
    processes are the run's though not the kit's children (the Docker executor)."""

    protocol: Conditions
    idle_timeout_s: float = 60.0
    refuse_busy: bool = False
    running: Callable[[], str | None] = lambda: None
    files: ProcFiles = dataclasses.field(default_factory=ProcFiles)

    still_busy: bool = False  # the last check waited in vain: the machine stays busy
    # where a wait for the machine is said as it begins (the terminal's progress, on stderr)
    said: Callable[[str], None] = lambda text: None

    def _waiting(self, timeout_s: float, others_cpu_share: float) -> None:
        self.said(f"waiting up to {timeout_s:.0f} s: others use {others_cpu_share:.0%} of the CPUs")

    @contextmanager
    def around(self, log_dir: Path) -> Iterator[None]:
        watcher = machine.Watcher(self.files, (os.getpid(),), self.running)
        # a machine found busy after a whole wait is not waited for again before every run
        # while it stays busy (a card found busy stops the series after one wait); once it is
        # found quiet, the next busy spell is waited for again
        check = machine.wait_until_quiet(
            watcher,
            self.protocol.cpu_busy_share,
            self.protocol.cpu_look_s,
            timeout_s=0.0 if self.still_busy else self.idle_timeout_s,
            refuse_at_once=self.refuse_busy,
            waiting=self._waiting,
        )
        self.still_busy = check.busy
        store.write_json(log_dir / IDLE, {"schema_version": 1, **check.to_dict()})
        with machine.MachineSampler(watcher, log_dir / MACHINE):
            yield


def recorded(log_dir: Path, window: tuple[int | None, int | None]) -> dict:
    """What the run's conditions come to over its timed window, as its record keeps them (read
    once, when the run ends, so no report reads its samples again)."""
    return run_conditions.summarize(run_conditions.from_folder(log_dir), str(log_dir), *window)

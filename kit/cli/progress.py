"""Progress on stderr: a live display on a terminal, plain lines elsewhere (logs, CI, pipes)."""

from __future__ import annotations

import io
import time
from typing import IO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from kit.engine.series import Hooks
from kit.results.planned import AA_KINDS, AA_TWIN, Config, PlannedRun
from kit.results.records import RunRecord
from kit.status import RunStatus


def describe(run: PlannedRun) -> str:
    if run.timed:
        return f"round {run.round}"
    if run.kind in AA_KINDS:  # the twin by its name, `<config>~aa`
        return f"A/A round {run.round}" + (" twin" if run.kind == AA_TWIN else "")
    return run.kind


def plan_lines(configs: list[Config], order: list[PlannedRun], done: set[int]) -> list[str]:
    lines = [f"{len(configs)} configurations:"]
    lines += [f"  {i:2d}  {c.id}" for i, c in enumerate(configs)]
    lines.append(f"{len(order)} runs planned ({len(done)} already done):")
    by_round: dict[tuple, list[str]] = {}
    index = {c.id: i for i, c in enumerate(configs)}
    names: dict = {}
    for r in order:
        key = (r.round, r.kind)
        names[key] = describe(r)
        by_round.setdefault(key, []).append(str(index[r.config]))
    for key, items in by_round.items():
        lines.append(f"  {names[key]:>12}: " + " ".join(items))
    return lines


class PlainProgress(Hooks):
    """One line per event, for logs and pipes."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.total = 0
        self.finished = 0
        self.started_at = time.monotonic()

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def planned(self, configs: list[Config], order: list[PlannedRun], done: set[int]) -> None:
        self.total = len(order)
        self.finished = len(done)
        for line in plan_lines(configs, order, done):
            self._print(line)

    def run_started(self, run: PlannedRun, config: Config, position: int, total: int) -> None:
        self._print(f"[{position + 1}/{total}] {describe(run)}: {config.id} (run {run.run_id})")

    def run_finished(self, run: PlannedRun, record: RunRecord) -> None:
        self.finished += 1
        step = record.step_s
        shown = f"{step * 1e3:.3f} ms/step" if step is not None else record.reason
        if shown.startswith(record.status):
            self._print(f"    {shown}")
        else:
            self._print(f"    {record.status}" + (f": {shown}" if shown else ""))

    def message(self, text: str) -> None:
        self._print(text)

    def close(self) -> None:
        pass


class LiveProgress(PlainProgress):
    """A rich progress bar with the current configuration, round and run, and an ETA."""

    def __init__(self, console: Console) -> None:
        super().__init__(console.file)
        self.console = console
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        # the bar's one task, sized once the plan is known
        self.task = self.bar.add_task("starting", total=None)

    def _print(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False)

    def planned(self, configs: list[Config], order: list[PlannedRun], done: set[int]) -> None:
        super().planned(configs, order, done)
        self.bar.update(self.task, total=len(order), completed=len(done))
        self.bar.start()

    def run_started(self, run: PlannedRun, config: Config, position: int, total: int) -> None:
        self.bar.update(self.task, description=f"{describe(run)} · {config.id} · run {run.run_id}")

    def run_finished(self, run: PlannedRun, record: RunRecord) -> None:
        self.bar.advance(self.task)
        if record.status != RunStatus.OK:
            self._print(f"run {run.run_id} {run.config}: {record.status}: {record.reason}")

    def close(self) -> None:
        self.bar.stop()


def make(console: Console) -> PlainProgress:
    if console.quiet:  # -q: nothing on stderr but errors
        return PlainProgress(io.StringIO())
    return LiveProgress(console) if console.is_terminal else PlainProgress(console.file)

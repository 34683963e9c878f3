"""§5 Conditions: the card before and during every run.

- `wait_until_idle`: before every run the card must hold no other program.
- `Sampler`: during every run the card's clocks, temperature and power are sampled every second,
  and its memory more often for the peak. Raw samples go to a JSON-lines file; every summary is
  recomputed from that file (kit.telemetry.samples).

This module takes a `kit.telemetry.nvml.Card` and never imports pynvml.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kit.errors import UserError
from kit.telemetry.nvml import (
    Card,
    CardError,
    GpuProcess,
)
from kit.telemetry.sample_lines import write_sample

SAMPLES_SCHEMA = "micakit.samples"
SAMPLES_VERSION = 1

Clock = Callable[[], int]  # nanoseconds; the kit's line stamps use time.monotonic_ns

# ---------------------------------------------------------------------------------------------
# Before the run


class CardBusy(UserError):
    """The card held another program for longer than the series may wait (§5)."""

    def __init__(self, message: str, fix: str, processes: tuple[GpuProcess, ...]) -> None:
        super().__init__(message, fix)
        self.processes = processes


@dataclass(frozen=True)
class IdleCheck:
    """How the card was found before a run: recorded beside the run."""

    waited_s: float
    polls: int
    memory_used_bytes: int | None


def _foreign(
    card: Card, ignore_pids: Collection[int], max_idle_memory_bytes: int | None
) -> tuple[tuple[GpuProcess, ...], int | None]:
    try:
        procs = tuple(p for p in card.processes() if p.pid not in ignore_pids)
        memory = card.memory_used_bytes()
    except CardError as error:
        raise UserError(
            f"cannot read which programs hold the card: {error}",
            "check the card with nvidia-smi on the host; the driver may need a reset",
        ) from error
    if not procs and max_idle_memory_bytes is not None and memory > max_idle_memory_bytes:
        # NVML lists no process of another PID namespace (another container) on some setups;
        # memory in use still shows that one is there.
        procs = (GpuProcess(pid=0, name="unlisted (another container?)", used_memory_bytes=memory),)
    return procs, memory


def wait_until_idle(
    card: Card,
    timeout_s: float = 60.0,
    poll_s: float = 1.0,
    refuse_at_once: bool = False,
    clock: Clock = time.monotonic_ns,
    *,
    sleep: Callable[[float], None] = time.sleep,
    ignore_pids: Collection[int] = (),
    max_idle_memory_bytes: int | None = None,
) -> IdleCheck:
    """Return once the card holds no other program; raise `CardBusy` naming the programs found
    if it still holds one after `timeout_s` (at once with `refuse_at_once`).

    §5: "Before every run the card must hold no other program." `max_idle_memory_bytes`, when
    given, also counts a card using more memory than that as busy, for programs NVML cannot list.
    """
    start_ns = clock()
    polls = 0
    while True:
        procs, memory = _foreign(card, ignore_pids, max_idle_memory_bytes)
        polls += 1
        waited_s = (clock() - start_ns) / 1e9
        if not procs:
            return IdleCheck(waited_s=waited_s, polls=polls, memory_used_bytes=memory)
        if refuse_at_once or waited_s >= timeout_s:
            listed = "; ".join(p.describe() for p in procs)
            waited = "" if refuse_at_once else f" after waiting {waited_s:.0f} s"
            raise CardBusy(
                f"the card holds another program{waited}: {listed}",
                "end it (nvidia-smi lists the card's programs) and start the series again; "
                "§5 allows no other program on the card during a run",
                procs,
            )
        sleep(max(0.0, min(poll_s, timeout_s - waited_s)))


# ---------------------------------------------------------------------------------------------
# During the run


class Sampler:
    """Samples a card on a background thread while one run goes, into a JSON-lines file.

    Records, one JSON object a line, flushed as written, each stamped `t_ns` by `clock` (the
    kit's line clock, `time.monotonic_ns`, so samples and output lines share one time axis):

    - `{"kind": "header", "format": "micakit.samples", "schema_version": 1, ...}` first (an
      earlier kit's: "schema" and "version");
    - `{"kind": "sample", ...Sample fields..., "clock_events": [...]}` every `interval_s`;
    - `{"kind": "memory", "memory_used_bytes": N}` every `memory_interval_s`, written only when
      the value changed since the last record that carried it (the peak stays exact, the file
      small);
    - `{"kind": "error", "message": ..., "stopped": bool}` when the card fails to answer: after
      `max_consecutive_errors` failures in a row sampling stops, and the run goes on;
    - `{"kind": "end", ...counts...}` last, written by `stop()`.

    Cheap by design: the thread sleeps in `Event.wait` between readings (no busy loop holding
    the GIL), and NVML's calls release the GIL.
    """

    def __init__(
        self,
        card: Card,
        path: str | os.PathLike[str],
        interval_s: float = 1.0,
        memory_interval_s: float | None = 0.05,
        clock: Clock = time.monotonic_ns,
        *,
        max_consecutive_errors: int = 3,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.card = card
        self.path = Path(path)
        self.interval_s = interval_s
        self.memory_interval_s = (
            memory_interval_s if memory_interval_s and memory_interval_s < interval_s else None
        )
        self.clock = clock
        self.max_consecutive_errors = max_consecutive_errors
        self.samples = 0
        self.memory_reads = 0
        self.errors: list[str] = []
        self.peak_memory_bytes: int | None = None
        self._last_memory: int | None = None
        self._failures_in_a_row = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._file: IO[str] | None = None
        self._stopped_sampling = False

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("a Sampler samples one run; make a new one for the next")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w", encoding="utf-8")
        header: dict[str, Any] = {
            "kind": "header",
            "format": SAMPLES_SCHEMA,
            "schema_version": SAMPLES_VERSION,
            "t_ns": self.clock(),
            "clock": "time.monotonic_ns",
            "interval_s": self.interval_s,
            "memory_interval_s": self.memory_interval_s,
            "card": None,
        }
        try:
            header["card"] = self.card.info().to_dict()
        except CardError as error:
            self._note_error(str(error))
        self._write(header)
        self._thread = threading.Thread(target=self._run, name="micakit-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and close the file; safe to call twice."""
        if self._thread is None or self._file is None:
            return
        self._stop.set()
        self._thread.join()
        self._write(
            {
                "kind": "end",
                "t_ns": self.clock(),
                "samples": self.samples,
                "memory_reads": self.memory_reads,
                "errors": len(self.errors),
                "peak_memory_bytes": self.peak_memory_bytes,
            }
        )
        try:
            self._file.close()
        except OSError as error:
            self._note_error(f"cannot close {self.path}: {error}")
        self._file = None

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the thread --------------------------------------------------------------------------

    def _run(self) -> None:
        interval_ns = int(self.interval_s * 1e9)
        memory_ns = int(self.memory_interval_s * 1e9) if self.memory_interval_s else None
        next_full = self.clock()
        next_memory = next_full
        while not self._stopped_sampling:
            now = self.clock()
            if now >= next_full:
                self._guarded(self._read_full, now)
                # A late reading moves the schedule on rather than bursting to catch up.
                next_full = max(next_full + interval_ns, now + interval_ns // 2)
                next_memory = now + (memory_ns or interval_ns)
            elif memory_ns is not None and now >= next_memory:
                self._guarded(self._read_memory, now)
                next_memory = max(next_memory + memory_ns, now + memory_ns // 2)
            due = min(next_full, next_memory) if memory_ns is not None else next_full
            if self._stop.wait(max(0.0, (due - self.clock()) / 1e9)):
                break

    def _guarded(self, read: Callable[[int], None], now: int) -> None:
        # §5 / hyperfine's lesson: the samples serve the run, never the other way round. Any
        # failure is recorded, and sampling stops only after several in a row.
        try:
            read(now)
            self._failures_in_a_row = 0
        except Exception as error:  # a failing sampler must not end the run
            self._failures_in_a_row += 1
            message = f"{type(error).__name__}: {error}"
            stopped = self._failures_in_a_row >= self.max_consecutive_errors
            self._note_error(message)
            self._write({"kind": "error", "t_ns": now, "message": message, "stopped": stopped})
            if stopped:
                self._stopped_sampling = True

    def _read_full(self, now: int) -> None:
        sample = self.card.sample()
        self.samples += 1
        self._seen_memory(sample.memory_used_bytes)
        self._write({"kind": "sample", "t_ns": now, **sample.to_dict()})

    def _read_memory(self, now: int) -> None:
        used = self.card.memory_used_bytes()
        self.memory_reads += 1
        if used != self._last_memory:
            self._seen_memory(used)
            self._write({"kind": "memory", "t_ns": now, "memory_used_bytes": used})

    def _seen_memory(self, used: int | None) -> None:
        if used is None:
            return
        self._last_memory = used
        if self.peak_memory_bytes is None or used > self.peak_memory_bytes:
            self.peak_memory_bytes = used

    def _note_error(self, message: str) -> None:
        self.errors.append(message)

    def _write(self, record: Mapping[str, object]) -> None:
        if self._file is None:
            return
        try:
            write_sample(self._file, record)
        except OSError as error:
            # The disk is full or gone: nothing more can be recorded, the run still goes on.
            self._note_error(f"cannot write {self.path}: {error}")
            self._stopped_sampling = True

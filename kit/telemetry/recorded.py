"""A card replayed from a recorded JSON fixture (tests/fixtures/nvml/), and the recording of
one: tests and the sampler's benchmark know exactly what the card said, with no card at hand."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kit.telemetry.nvml import Card, CardError, CardInfo, GpuProcess, Sample

FIXTURE_SCHEMA = "micakit.nvml-fixture"
FIXTURE_VERSION = 1


@dataclass(frozen=True)
class _Moment:
    t_s: float
    sample: Sample | None
    processes: tuple[GpuProcess, ...]
    error: str | None


class FakeCard:
    """A card replayed from a recorded JSON fixture (tests/fixtures/nvml/), so that tests know
    exactly what the card said.

    The fixture (format "micakit.nvml-fixture", schema_version 1) holds `info` and a `timeline` of
    moments `{"t_s", "sample", "processes"}` or `{"t_s", "error"}`; from an error moment on, every
    reading raises `CardError`, as NVML does for a lost GPU.

    With a `clock` (nanoseconds), the card is at the last moment whose `t_s` has passed since its
    first reading; without one, each `sample()` steps to the next moment and the last one stays.
    `processes()` and `memory_used_bytes()` read the current moment without stepping.
    """

    def __init__(
        self, fixture: Mapping[str, Any], *, clock: Callable[[], int] | None = None
    ) -> None:
        name = fixture.get("format", fixture.get("schema"))  # "schema" in an earlier recording
        if name != FIXTURE_SCHEMA:
            raise ValueError(f"not an NVML fixture: format {name!r}")
        version = int(fixture.get("schema_version", fixture.get("version", 0)))
        if version > FIXTURE_VERSION:
            raise ValueError(f"NVML fixture version {version} is newer than this kit")
        self._info = CardInfo.from_dict(fixture["info"])
        self._timeline = tuple(
            _Moment(
                t_s=float(m["t_s"]),
                sample=Sample.from_dict(m["sample"]) if m.get("sample") else None,
                processes=tuple(GpuProcess.from_dict(p) for p in m.get("processes", ())),
                error=m.get("error"),
            )
            for m in fixture["timeline"]
        )
        if not self._timeline:
            raise ValueError("an NVML fixture needs at least one moment")
        self._clock = clock
        self._origin_ns: int | None = None
        self._step = 0
        self.sample_calls = 0
        self.memory_calls = 0

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> FakeCard:
        return cls(json.loads(Path(path).read_text(encoding="utf-8")), **kwargs)

    def _now(self) -> _Moment:
        if self._clock is None:
            return self._timeline[min(self._step, len(self._timeline) - 1)]
        now = self._clock()
        if self._origin_ns is None:
            self._origin_ns = now
        elapsed_s = (now - self._origin_ns) / 1e9
        current = self._timeline[0]
        for moment in self._timeline:
            if moment.t_s > elapsed_s:
                break
            current = moment
        return current

    def _check(self, moment: _Moment) -> _Moment:
        if moment.error is not None:
            raise CardError(f"NVML (recorded): {moment.error}")
        return moment

    def info(self) -> CardInfo:
        return self._info

    def processes(self) -> list[GpuProcess]:
        return list(self._check(self._now()).processes)

    def memory_used_bytes(self) -> int:
        self.memory_calls += 1
        sample = self._check(self._now()).sample
        return 0 if sample is None or sample.memory_used_bytes is None else sample.memory_used_bytes

    def sample(self) -> Sample:
        self.sample_calls += 1
        moment = self._check(self._now())
        if self._clock is None:
            self._step += 1
        if moment.sample is None:
            raise CardError("NVML (recorded): no sample at this moment")
        return moment.sample


def fixture_from_samples(
    info: CardInfo,
    moments: Sequence[tuple[float, Sample | None, Sequence[GpuProcess]]],
) -> dict[str, Any]:
    """A fixture dict from readings, for recording a real card into tests/fixtures/nvml/."""
    return {
        "format": FIXTURE_SCHEMA,
        "schema_version": FIXTURE_VERSION,
        "info": info.to_dict(),
        "timeline": [
            {
                "t_s": t_s,
                "sample": None if sample is None else sample.to_dict(),
                "processes": [asdict(p) for p in procs],
            }
            for t_s, sample, procs in moments
        ],
    }


def record_fixture(card: Card, seconds: float, interval_s: float = 1.0) -> dict[str, Any]:
    """Record `seconds` of a card into a fixture (run by hand on a GPU machine)."""
    start = time.monotonic()
    moments: list[tuple[float, Sample | None, Sequence[GpuProcess]]] = []
    while (elapsed := time.monotonic() - start) < seconds:
        moments.append((round(elapsed, 3), card.sample(), card.processes()))
        time.sleep(interval_s)
    return fixture_from_samples(card.info(), moments)

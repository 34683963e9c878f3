"""kit.telemetry.nvml: the recorded card, the decoding of clock events, and the real card where one is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.errors import UserError
from kit.telemetry.nvml import (
    Card,
    CardError,
    CardInfo,
    GpuProcess,
    Sample,
    clock_event_names,
    open_card,
)
from kit.telemetry.recorded import FakeCard, fixture_from_samples

FIXTURES = Path(__file__).parents[2] / "fixtures" / "nvml"


def _real_card_error() -> str | None:
    """Why no real card can be opened here, or None where one can."""
    try:
        open_card().close()
    except UserError as error:
        return error.message
    return None


NO_CARD = _real_card_error()


def test_every_fixture_loads_and_is_a_card() -> None:
    paths = sorted(FIXTURES.glob("*.json"))
    assert len(paths) >= 5
    for path in paths:
        card = FakeCard.from_file(path)
        assert isinstance(card, Card)
        assert card.info().name == "NVIDIA GeForce RTX 4090"
        assert card.info().compute_capability == (8, 9)


def test_step_mode_replays_samples_in_order_and_keeps_the_last() -> None:
    card = FakeCard.from_file(FIXTURES / "throttle_run.json")
    clocks = [card.sample().sm_clock_mhz for _ in range(25)]
    assert clocks[:4] == [1110, 1510, 1910, 2730]
    assert clocks[6] == 2295 and clocks[7] == 2310
    assert clocks[19:] == [2730] * 6  # the last moment stays
    assert card.sample_calls == 25


def test_clock_mode_follows_elapsed_time() -> None:
    now = [1_000_000_000]
    card = FakeCard.from_file(FIXTURES / "foreign_process.json", clock=lambda: now[0])
    assert [p.pid for p in card.processes()] == [4242]
    now[0] += 2_900_000_000
    assert [p.pid for p in card.processes()] == [4242]
    now[0] += 200_000_000
    assert card.processes() == []


def test_throttling_episode_decodes_thermal_and_power_reasons() -> None:
    card = FakeCard.from_file(FIXTURES / "throttle_run.json")
    samples = [card.sample() for _ in range(20)]
    throttled = [s for s in samples if s.clock_event_reasons and s.clock_event_reasons & 0x20]
    assert len(throttled) == 12
    assert throttled[0].clock_events == ("sw_power_cap", "sw_thermal_slowdown")
    assert max(s.sm_clock_mhz or 0 for s in throttled) < 0.9 * 2730


def test_clock_event_names_decodes_every_bit_and_keeps_unknown_ones() -> None:
    assert clock_event_names(0) == ()
    assert clock_event_names(0x1) == ("gpu_idle",)
    assert clock_event_names(0x40 | 0x80) == ("hw_thermal_slowdown", "hw_power_brake_slowdown")
    assert clock_event_names(0x2000 | 0x4) == ("sw_power_cap", "unknown_0x2000")


def test_foreign_process_is_described_with_pid_name_and_memory() -> None:
    card = FakeCard.from_file(FIXTURES / "foreign_process.json")
    (proc,) = card.processes()
    assert proc.describe() == "pid 4242 (python3, compute, 2048 MiB)"
    unnamed = FakeCard.from_file(FIXTURES / "busy_unnamed.json").processes()
    assert [p.describe() for p in unnamed] == [
        "pid 98765 (name unknown, compute, memory unknown)",
        "pid 1201 (/usr/lib/xorg/Xorg, graphics, 180 MiB)",
    ]


def test_lost_gpu_raises_card_error_from_then_on() -> None:
    card = FakeCard.from_file(FIXTURES / "lost_midrun.json")
    for _ in range(3):
        card.sample()
    with pytest.raises(CardError, match="GPU is lost"):
        card.sample()
    with pytest.raises(CardError):
        card.memory_used_bytes()
    with pytest.raises(CardError):
        card.processes()


def test_fixture_round_trip(tmp_path: Path) -> None:
    info = CardInfo("NVIDIA L4", "GPU-1", (8, 9), "550.54.14", "12.4", 24 * 2**30, 0)
    sample = Sample(1500, 6251, 55, 70.5, 3 * 2**30, 97, 40, 0x4)
    proc = GpuProcess(7, "train", 2**30)
    path = tmp_path / "card.json"
    path.write_text(json.dumps(fixture_from_samples(info, [(0.0, sample, [proc])])))
    card = FakeCard.from_file(path)
    assert card.info() == info
    assert card.processes() == [proc]
    assert card.memory_used_bytes() == 3 * 2**30
    assert card.sample() == sample


def test_a_newer_fixture_is_refused() -> None:
    data = json.loads((FIXTURES / "idle.json").read_text())
    data["version"] = 99
    with pytest.raises(ValueError, match="newer"):
        FakeCard(data)


@pytest.mark.skipif(NO_CARD is None, reason="a real NVIDIA card is visible here")
def test_open_card_without_a_card_says_how_to_fix_it() -> None:
    with pytest.raises(UserError) as caught:
        open_card()
    assert caught.value.fix is not None
    assert "--gpus all" in caught.value.fix or "nvidia-ml-py" in caught.value.fix


@pytest.mark.skipif(NO_CARD is not None, reason=f"no NVIDIA card through NVML: {NO_CARD}")
def test_real_card_answers_every_reading() -> None:
    with open_card() as card:
        info = card.info()
        assert info.memory_total_bytes > 0 and info.uuid.startswith(("GPU-", "MIG-"))
        sample = card.sample()
        assert sample.memory_used_bytes is not None and sample.memory_used_bytes >= 0
        assert isinstance(card.processes(), list)
        assert card.memory_used_bytes() >= 0

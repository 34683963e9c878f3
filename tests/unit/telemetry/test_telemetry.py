"""kit.telemetry.sampler against recorded cards: §5's idle check, the sampler and the run flags."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest

from kit.errors import UserError
from kit.telemetry.recorded import FakeCard
from kit.telemetry.sampler import CardBusy, Sampler, wait_until_idle
from kit.telemetry.samples import flag_runs, read_samples, summarize_samples

FIXTURES = Path(__file__).parents[2] / "fixtures" / "nvml"
GiB = 2**30


class FakeTime:
    """A clock in nanoseconds that moves only when slept on."""

    def __init__(self) -> None:
        self.ns = 5_000_000_000

    def __call__(self) -> int:
        return self.ns

    def sleep(self, seconds: float) -> None:
        self.ns += int(seconds * 1e9)


# -- wait_until_idle ----------------------------------------------------------------------------


def test_idle_card_passes_at_once() -> None:
    fake = FakeTime()
    check = wait_until_idle(
        FakeCard.from_file(FIXTURES / "idle.json"), clock=fake, sleep=fake.sleep
    )
    assert check.polls == 1 and check.waited_s == 0.0
    assert check.memory_used_bytes == 512 * 2**20


def test_foreign_process_fails_after_the_wait_naming_it() -> None:
    fake = FakeTime()
    card = FakeCard.from_file(FIXTURES / "foreign_process.json", clock=fake)
    with pytest.raises(CardBusy) as caught:
        wait_until_idle(card, timeout_s=2.0, poll_s=0.5, clock=fake, sleep=fake.sleep)
    message = str(caught.value)
    assert "pid 4242 (python3, compute, 2048 MiB)" in message
    assert "after waiting 2 s" in message
    assert caught.value.fix and "nvidia-smi" in caught.value.fix
    assert [p.pid for p in caught.value.processes] == [4242]
    assert isinstance(caught.value, UserError)


def test_refuse_at_once_does_not_wait() -> None:
    fake = FakeTime()
    card = FakeCard.from_file(FIXTURES / "foreign_process.json", clock=fake)
    with pytest.raises(CardBusy, match="pid 4242"):
        wait_until_idle(card, timeout_s=60, refuse_at_once=True, clock=fake, sleep=fake.sleep)
    assert fake.ns == 5_000_000_000


def test_waits_until_the_foreign_process_leaves() -> None:
    fake = FakeTime()
    card = FakeCard.from_file(FIXTURES / "foreign_process.json", clock=fake)
    check = wait_until_idle(card, timeout_s=10, poll_s=1.0, clock=fake, sleep=fake.sleep)
    assert check.waited_s == pytest.approx(3.0)
    assert check.polls == 4


def test_unnamed_process_and_own_pid() -> None:
    card = FakeCard.from_file(FIXTURES / "busy_unnamed.json")
    with pytest.raises(CardBusy, match="pid 98765 \\(name unknown"):
        wait_until_idle(card, refuse_at_once=True)
    wait_until_idle(card, refuse_at_once=True, ignore_pids={98765, 1201})


def test_memory_threshold_catches_programs_nvml_cannot_list() -> None:
    card = FakeCard.from_file(FIXTURES / "busy_unnamed.json")
    with pytest.raises(CardBusy, match="unlisted"):
        wait_until_idle(
            card, refuse_at_once=True, ignore_pids={98765, 1201}, max_idle_memory_bytes=GiB
        )


def test_nvml_failing_before_a_run_is_a_user_error() -> None:
    card = FakeCard.from_file(FIXTURES / "lost_midrun.json")
    for _ in range(3):
        card.sample()
    with pytest.raises(UserError, match="GPU is lost"):
        wait_until_idle(card, refuse_at_once=True)


# -- Sampler --------------------------------------------------------------------------------------


def _sample_until(
    card: FakeCard, path: Path, samples: int, memory_reads: int = 0, **kwargs: object
) -> Sampler:
    """Sample until the card was read `samples` times in full and `memory_reads` times for its
    memory alone (a thread the machine holds up reads in full first: its memory reads come
    between the full ones), or for 10 s."""
    sampler = Sampler(card, path, interval_s=0.005, memory_interval_s=0.001, **kwargs)  # type: ignore[arg-type]
    with sampler:
        deadline = time.monotonic() + 10
        while (
            card.sample_calls < samples or card.memory_calls < memory_reads
        ) and time.monotonic() < deadline:
            time.sleep(0.002)
    return sampler


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sampler_writes_a_versioned_stamped_file(tmp_path: Path) -> None:
    path = tmp_path / "run" / "samples.jsonl"
    before = time.monotonic_ns()
    sampler = _sample_until(FakeCard.from_file(FIXTURES / "steady_run.json"), path, 20)
    after = time.monotonic_ns()
    records = _records(path)
    header, end = records[0], records[-1]
    assert header["kind"] == "header" and header["format"] == "micakit.samples"
    assert header["schema_version"] == 1 and header["card"]["name"] == "NVIDIA GeForce RTX 4090"  # type: ignore[index]
    assert end["kind"] == "end" and end["samples"] == sampler.samples >= 20
    stamps = [r["t_ns"] for r in records]
    assert stamps == sorted(stamps)
    assert before <= stamps[0] and stamps[-1] <= after  # the kit's line clock
    samples = [r for r in records if r["kind"] == "sample"]
    assert samples[0]["sm_clock_mhz"] == 1110 and samples[0]["clock_events"] == ["gpu_idle"]
    assert sampler.peak_memory_bytes == int(17.9 * GiB)
    assert sampler.errors == []


def test_memory_records_only_on_change(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    card = FakeCard.from_file(FIXTURES / "idle.json")
    sampler = _sample_until(card, path, 3, memory_reads=1)
    assert card.memory_calls > 0 and sampler.memory_reads == card.memory_calls
    # The idle card's memory never changes: the samples carry it, no memory record is needed.
    assert not [r for r in _records(path) if r["kind"] == "memory"]


def test_nvml_failing_mid_run_leaves_a_record_and_stops_sampling(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    card = FakeCard.from_file(FIXTURES / "lost_midrun.json")
    sampler = Sampler(card, path, interval_s=0.002, memory_interval_s=None)
    with sampler:
        deadline = time.monotonic() + 10
        while not sampler.errors or len(sampler.errors) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.002)
        time.sleep(0.02)
    errors = [r for r in _records(path) if r["kind"] == "error"]
    assert len(errors) == 3 and sampler.samples == 3
    assert "GPU is lost" in str(errors[0]["message"])
    assert [e["stopped"] for e in errors] == [False, False, True]
    summary = summarize_samples(path)
    assert summary.sampling_stopped and summary.complete
    assert summary.sample_count == 3 and len(summary.errors) == 3


def test_stop_is_idempotent_and_a_sampler_samples_once(tmp_path: Path) -> None:
    sampler = Sampler(FakeCard.from_file(FIXTURES / "idle.json"), tmp_path / "s.jsonl")
    sampler.start()
    sampler.stop()
    sampler.stop()
    with pytest.raises(RuntimeError):
        sampler.start()
    assert summarize_samples(tmp_path / "s.jsonl").sample_count == 1


# -- summarize_samples ----------------------------------------------------------------------------


def recorded_run(tmp_path: Path, fixture: str, seconds: int = 20, skip: int = 0) -> Path:
    """A samples file as the sampler leaves a run of `seconds`, stamped 1 s apart from t = 0,
    of the recorded card's samples after its first `skip`."""
    card = FakeCard.from_file(FIXTURES / fixture)
    for _ in range(skip):
        card.sample()
    records = [{"kind": "header", "schema": "micakit.samples", "version": 1, "t_ns": 0}]
    records += [
        {"kind": "sample", "t_ns": second * 10**9, **card.sample().to_dict()}
        for second in range(seconds)
    ]
    records.append({"kind": "end", "t_ns": seconds * 10**9})
    path = tmp_path / f"{Path(fixture).name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_summary_of_a_throttling_episode(tmp_path: Path) -> None:
    path = recorded_run(tmp_path, "throttle_run.json")
    whole = summarize_samples(path)
    assert whole.sample_count == 20
    assert whole.peak_memory_bytes == int(18.3 * GiB)
    assert whole.thermal_event_samples == 12 and whole.power_event_samples == 12
    assert whole.clock_events == {"gpu_idle": 1, "sw_power_cap": 12, "sw_thermal_slowdown": 12}
    # §5: the measured window (here seconds 3 to 19) leaves the warm-up's idle clocks out.
    window = summarize_samples(path, start_ns=3 * 10**9, end_ns=19 * 10**9)
    assert window.sample_count == 17
    assert window.sm_clock_median_mhz == 2310
    assert window.sm_clock_max_mhz == 2730 and window.temperature_max_c == 87
    assert window.peak_memory_bytes == whole.peak_memory_bytes  # the peak covers the whole run


def test_summary_of_a_steady_run(tmp_path: Path) -> None:
    summary = summarize_samples(recorded_run(tmp_path, "steady_run.json"), start_ns=3 * 10**9)
    assert summary.sm_clock_median_mhz == 2730
    assert summary.thermal_event_samples == summary.power_event_samples == 0
    assert summary.errors == () and not summary.sampling_stopped
    assert summary.to_dict()["peak_memory_bytes"] == int(17.9 * GiB)


def test_a_killed_run_keeps_its_samples(tmp_path: Path) -> None:
    path = recorded_run(tmp_path, "steady_run.json")
    lines = path.read_text().splitlines()[:-1]  # no end record
    path.write_text("\n".join(lines) + '\n{"kind":"sam')  # and a half-written line
    summary = summarize_samples(path)
    assert summary.sample_count == 20 and not summary.complete
    assert summary.errors == ("line 22 unreadable",)


def test_a_run_killed_before_its_first_sample(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"kind":"header","schema":"micakit.samples","version":1,"t_ns":5}\n')
    summary = summarize_samples(path, start_ns=10, end_ns=20)
    assert summary.sample_count == 0 and summary.sm_clock_median_mhz is None
    assert summary.peak_memory_bytes is None and not summary.complete


def test_a_newer_or_foreign_samples_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"kind":"header","schema":"micakit.samples","version":7}\n')
    with pytest.raises(UserError, match="version 7"):
        read_samples(path)
    path.write_text('{"hello": 1}\n')
    with pytest.raises(UserError, match="not a micakit samples file"):
        summarize_samples(path)


# -- flag_runs ------------------------------------------------------------------------------------


def test_throttling_run_is_flagged_among_steady_ones(tmp_path: Path) -> None:
    window = {"start_ns": 3 * 10**9, "end_ns": 19 * 10**9}
    steady = summarize_samples(recorded_run(tmp_path, "steady_run.json"), **window)
    throttled = summarize_samples(recorded_run(tmp_path, "throttle_run.json"), **window)
    rows = [steady] * 4 + [throttled]
    runs = pd.DataFrame(
        [
            {"configuration": "M1/float32/eager", "round": r, **s.to_dict()}
            for r, s in enumerate(rows)
        ]
    )
    flagged = flag_runs(runs)
    assert flagged["flagged"].tolist() == [False] * 4 + [True]
    assert flagged["flag_reasons"].iloc[4] == (
        "sm clock 15.4% below configuration median (2310 vs 2730 MHz); "
        "thermal clock event (12 samples); power clock event (12 samples)"
    )
    assert flagged["flag_reasons"].iloc[0] == ""
    assert (flagged["configuration_sm_clock_median_mhz"] == 2730).all()
    assert runs.columns.tolist() == flagged.columns.tolist()[: len(runs.columns)]


def test_flags_per_configuration() -> None:
    runs = pd.DataFrame(
        {
            "configuration": ["a"] * 5 + ["b"] * 5,
            "sm_clock_median_mhz": [2700, 2710, 2690, 2400, 2300, 1800, 1810, 1790, 1800, 1600],
            "thermal_event_samples": [0] * 10,
            "power_event_samples": [0] * 9 + [0],
            "hw_slowdown_event_samples": [0, 0, 0, 0, 2, 0, 0, 0, 0, 0],
            "sample_count": [9] * 10,
        }
    )
    out = flag_runs(runs)
    # a: median 2690; 2400 is 10.8% below, 2300 is 14.5% below. b: median 1800; 1600 is 11.1%.
    assert out["flagged"].tolist() == [False, False, False, True, True] + [False] * 4 + [True]
    assert out["flag_reasons"].iloc[3] == (
        "sm clock 10.8% below configuration median (2400 vs 2690 MHz)"
    )
    assert (
        out["flag_reasons"]
        .iloc[4]
        .endswith("; hw slowdown clock event, thermal or power (2 samples)")
    )
    assert out["flag_reasons"].iloc[9].startswith("sm clock 11.1% below")


def test_a_run_without_samples_is_flagged_and_missing_columns_are_a_bug() -> None:
    runs = pd.DataFrame(
        {
            "configuration": ["a", "a", "a"],
            "sm_clock_median_mhz": [2700.0, 2700.0, None],
            "thermal_event_samples": [0, 0, 0],
            "power_event_samples": [0, 0, 0],
        }
    )
    out = flag_runs(runs)
    assert out["flag_reasons"].tolist() == ["", "", "no clock samples"]
    with pytest.raises(ValueError, match="power_event_samples"):
        flag_runs(runs.drop(columns="power_event_samples"))

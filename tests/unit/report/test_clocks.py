"""kit.report.clocks against recorded cards: each run's clocks, the shares of its samples with
each clock-event reason, its step time in cycles, and what the clocks say beside a verdict."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from kit.report import clocks, sidetables
from kit.telemetry.samples import summarize_samples
from tests.unit.telemetry.test_telemetry import recorded_run

FIXTURES = Path(__file__).parents[2] / "fixtures" / "nvml"
WINDOW = {"start_ns": 0, "end_ns": 9 * 10**9}


def _samples(tmp_path: Path, fixture: str) -> Path:
    """A samples file as the sampler leaves a 10-second run, stamped 1 s apart from t = 0."""
    # steady_run.json's first three seconds are the warm-up, outside §5's window
    return recorded_run(tmp_path, fixture, 10, skip=3 if fixture == "steady_run.json" else 0)


def _runs(tmp_path: Path, fixtures: list[str], step_s: list[float]) -> pd.DataFrame:
    """The runs table's rows of timed runs replayed from recorded cards."""
    rows = []
    for run_id, (fixture, step) in enumerate(zip(fixtures, step_s)):
        summary = summarize_samples(_samples(tmp_path, fixture), **WINDOW).to_dict()
        rows.append(
            sidetables.conditions_row(run_id, summary)
            | {"step_s": step, "kind": "timed", "window_start_ns": 0, "window_end_ns": 9 * 10**9}
        )
    return clocks.per_run(pd.DataFrame(rows))


def test_steady_clocks(tmp_path: Path) -> None:
    run = _runs(tmp_path, ["steady_run.json"], [0.1]).iloc[0]
    assert run["clock_source"] == "sm" and run["clock_window"] == "§5 window"
    assert run["clock_mhz"] == 2730 and run["mem_clock_median_mhz"] == 10501
    assert run["step_cycles"] == pytest.approx(0.1 * 2730e6)
    for share in clocks.SHARES:
        assert run[share] == 0


def test_a_power_capped_card(tmp_path: Path) -> None:
    run = _runs(tmp_path, ["l4/power_capped_run.json"], [0.2]).iloc[0]
    assert run["clock_mhz"] == 1635 and run["mem_clock_median_mhz"] == 6251
    assert run["sw_power_cap_share"] == pytest.approx(0.8)
    assert run["throttled_share"] == pytest.approx(0.8) and run["thermal_share"] == 0
    assert run["step_cycles"] == pytest.approx(0.2 * 1635e6)


def test_a_thermally_throttled_run(tmp_path: Path) -> None:
    run = _runs(tmp_path, ["thermal_run.json"], [0.1]).iloc[0]
    # software and hardware thermal slowdown together: 4 of 10 samples, not 6
    assert run["thermal_share"] == pytest.approx(0.4)
    assert run["throttled_share"] == pytest.approx(0.4) and run["sw_power_cap_share"] == 0
    assert run["clock_mhz"] == 2730  # six of ten samples still at the full clock


def test_steady_sides_leave_the_verdict_alone(tmp_path: Path) -> None:
    runs = _runs(tmp_path, ["steady_run.json"] * 4, [0.10, 0.101, 0.12, 0.121])
    by_cycles, say = clocks.between(runs.iloc[:2], runs.iloc[2:], 0.05, 0.05)
    assert (by_cycles, say) == ("faster", "")


def test_a_power_capped_side_is_ambiguous(tmp_path: Path) -> None:
    runs = _runs(
        tmp_path, ["steady_run.json"] * 2 + ["l4/power_capped_run.json"] * 2, [0.1, 0.1, 0.2, 0.2]
    )
    by_cycles, say = clocks.between(runs.iloc[:2], runs.iloc[2:], 0.05, 0.05)
    assert by_cycles == "faster"
    assert say == (
        f"{clocks.AMBIGUOUS} (PyTorch's runs power-capped or throttled in 80% of their "
        "samples (above 5%))"
    )
    # below the protocol's threshold, the same share says nothing
    assert clocks.between(runs.iloc[:2], runs.iloc[2:], 0.05, 0.9)[1] == ""


def test_cycles_that_reverse_the_verdict_are_ambiguous(tmp_path: Path) -> None:
    # faster by time only because its card's clock ran higher: 2730 vs 1635 MHz, no throttling
    # counted on either side once the threshold allows the power cap
    runs = _runs(
        tmp_path, ["steady_run.json"] * 2 + ["l4/power_capped_run.json"] * 2, [0.1, 0.1, 0.12, 0.12]
    )
    by_cycles, say = clocks.between(runs.iloc[:2], runs.iloc[2:], 0.05, 0.9)
    assert by_cycles == "slower"
    assert say == f"{clocks.AMBIGUOUS} (by cycles slower, by time faster)"


def test_a_cpu_series_uses_the_cpu_clock_or_says_not_readable() -> None:
    base = {"kind": "timed", "window_start_ns": 1, "window_end_ns": 2, "sample_count": 0}
    runs = clocks.per_run(
        pd.DataFrame(
            [
                base | {"step_s": 0.01, "cpu_mhz_median": 3000.0},
                base | {"step_s": 0.01, "cpu_mhz_median": None, "window_end_ns": None},
            ]
        )
    )
    assert runs["clock_source"].tolist() == ["cpu", clocks.NOT_READABLE]
    assert runs["step_cycles"].iloc[0] == pytest.approx(3e7)
    assert runs["clock_window"].tolist() == ["§5 window", "whole run"]
    assert runs["throttled_share"].isna().all()  # a CPU has no clock-event reasons
    by_cycles, say = clocks.between(runs.iloc[:1], runs.iloc[1:], 0.05, 0.05)
    assert by_cycles == "" and say == f"clocks {clocks.NOT_READABLE}: no verdict by cycles"

"""A/A runs (kit/report/aa.py): this card's own noise, from fixtures of known spread, beside the
resolution of a verdict and `micakit compare`'s classes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kit.report import aa, compare_gate, comparison, resolution, verdict
from kit.results.documents import Plan
from kit.results.planned import AA, AA_TWIN, Config, PlannedRun

ROUNDS = 5
CARD, MODEL, PRECISION = "cpu", "M1", "float32"
TORCH = Config(CARD, MODEL, PRECISION, "pytorch", "default")
MICA = Config(CARD, MODEL, PRECISION, "contender", "mica")
THRESHOLD = 0.01  # the protocol's [diagnostics] threshold


def _noisy(base_s: float, noise: float, rng: np.random.Generator) -> np.ndarray:
    return base_s * (1 + noise * rng.standard_normal(ROUNDS))


def _runs(times: dict[tuple[Config, str], np.ndarray]) -> pd.DataFrame:
    """A runs table (tables.runs_table's columns that matter here): per configuration and kind,
    one ok run a round."""
    rows = []
    for (c, kind), steps in times.items():
        for i, step_s in enumerate(steps):
            rows.append(
                {
                    "run_id": len(rows),
                    "config": c.id,
                    "card": c.card,
                    "model": c.model,
                    "precision": c.precision,
                    "side": c.side,
                    "variant": c.variant,
                    "round": i + 1,
                    "kind": kind,
                    "status": "ok",
                    "step_s": float(step_s),
                }
            )
    return pd.DataFrame(rows)


def _plan(runs: pd.DataFrame) -> Plan:
    order = tuple(
        PlannedRun(int(r["run_id"]), r["config"], int(r["round"]), r["kind"])
        for _, r in runs.iterrows()
    )
    return Plan(order=order, configurations=(TORCH, MICA))


def _series(apart: float, noise: float, seed: int = 11, twin_bias: float = 0.0) -> pd.DataFrame:
    """PyTorch's default mode at 100 ms and the contender `apart` faster, timed rounds and A/A
    rounds of both, every run with `noise` relative sd; the twins `twin_bias` slower."""
    rng = np.random.default_rng(seed)
    times = {}
    for c, base in ((TORCH, 0.100), (MICA, 0.100 * (1 - apart))):
        times[(c, "timed")] = _noisy(base, noise, rng)
        times[(c, AA)] = _noisy(base, noise, rng)
        times[(c, AA_TWIN)] = _noisy(base * (1 + twin_bias), noise, rng)
    return _runs(times)


def _comparison_row(runs: pd.DataFrame) -> pd.Series:
    timed = runs[runs["kind"] == "timed"]
    median = timed.groupby("config")["step_s"].median()
    return pd.Series(
        {
            "card": CARD,
            "model": MODEL,
            "precision": PRECISION,
            "contender_build": MICA.variant,
            "pytorch_fastest_mode": TORCH.variant,
            "contender_median_step_s": median[MICA.id],
            "pytorch_median_step_s": median[TORCH.id],
        }
    )


def _resolved(runs: pd.DataFrame) -> resolution.Resolution:
    table = aa.table(runs, _plan(runs), THRESHOLD)
    found = resolution.of_row(runs, _comparison_row(runs), table)
    assert found is not None
    return found


def test_three_percent_apart_with_small_noise_reads_faster_with_a_clear_interval():
    runs = _series(apart=0.03, noise=0.003)
    table = aa.table(runs, _plan(runs), THRESHOLD)
    assert table is not None and not table["flagged"].any()
    assert (table["aa_spread"] < 0.01).all()  # 0.3% noise: the A/A runs are level
    found = _resolved(runs)
    # the protocol's direction, PyTorch over contender: above 1, the contender faster
    assert found.told_apart and 1 < found.interval_low <= found.ratio <= found.interval_high
    assert found.aa_spread == pytest.approx(table["aa_spread"].max())
    assert f"; this card's A/A spread {found.aa_spread:.1%}; 95% interval of the ratio " in (
        found.words
    )
    assert found.ratio == pytest.approx(1 / 0.97, abs=0.005)
    assert found.words.startswith(
        f"ratio P/M {found.ratio:.3f}, difference {abs(found.ratio - 1) * 100:.1f}%; this card's A/A"
    )
    # and as an earlier kit published it: contender over PyTorch
    table = aa.table(runs, _plan(runs), THRESHOLD)
    earlier = resolution.of_row(runs, _comparison_row(runs), table, pm=False)
    assert earlier is not None and earlier.interval_high is not None and earlier.interval_high < 1
    # D1's words stay the protocol's: the contender reads faster, from its ranges alone
    timed = runs[runs["kind"] == "timed"]
    steps = {c: list(g["step_s"]) for c, g in timed.groupby("config")}
    assert verdict.by_times(steps[MICA.id], steps[TORCH.id], 0.0) == "faster"


def test_close_sides_within_the_a_a_spread_cannot_be_told_apart():
    runs = _series(apart=0.003, noise=0.01)
    found = _resolved(runs)
    assert found.aa_spread is not None and found.aa_spread > abs(found.ratio - 1)
    assert not found.told_apart
    assert found.words.startswith(
        f"ratio P/M {found.ratio:.3f}, difference {abs(found.ratio - 1) * 100:.1f}%, within this "
        "card's A/A spread: these runs cannot tell the two apart; "
    )


def test_a_twin_two_percent_slower_flags_the_series():
    runs = _series(apart=0.03, noise=0.001, twin_bias=0.02)
    table = aa.table(runs, _plan(runs), THRESHOLD)
    assert table is not None and table["flagged"].all()
    row = table.set_index("config").loc[TORCH.id]
    assert row["twin"] == "M1/float32/pytorch/default~aa"
    assert row["ratio"] == pytest.approx(1.02, abs=0.005)
    assert row["ratio_min"] > 1.01 and row["aa_runs"] == 2 * ROUNDS
    label = aa.title_label(table)
    assert label.startswith(f"A/A not level on this card: {TORCH.id}, ratio 1.02")
    assert "further from 1 than 1.0%" in label


def test_the_second_run_of_a_round_two_percent_slower_flags_the_series():
    """A position bias: the twin goes first in odd rounds, the configuration in even ones."""
    second = np.array([1.02 if r % 2 else 1.0 for r in range(1, ROUNDS + 1)])
    own, twin = 0.1 * second, 0.1 * (2.02 - second)  # the one that runs second is 2% slower
    runs = _runs({(TORCH, AA): own, (TORCH, AA_TWIN): twin, (TORCH, "timed"): own})
    (row,) = aa.table(runs, _plan(runs), THRESHOLD).to_dict("records")  # type: ignore[union-attr]
    assert row["flagged"] and row["ratio"] == pytest.approx(1 / 1.02, abs=0.002)
    assert row["round_to_round_max"] == pytest.approx(1.02 - 1 / 1.02, abs=0.002)
    assert row["aa_spread"] == pytest.approx(0.02, abs=0.002)


def test_a_a_runs_apart_from_the_timed_runs_flag_the_series():
    rng = np.random.default_rng(3)
    timed, own, twin = _noisy(0.1, 0.001, rng), _noisy(0.11, 0.001, rng), _noisy(0.11, 0.001, rng)
    runs = _runs({(TORCH, "timed"): timed, (TORCH, AA): own, (TORCH, AA_TWIN): twin})
    (row,) = aa.table(runs, _plan(runs), THRESHOLD).to_dict("records")  # type: ignore[union-attr]
    assert abs(row["ratio"] - 1) < THRESHOLD  # level with its twin ...
    assert row["flagged"]  # ... but not with its own timed runs
    assert "its A/A runs and its timed runs do not overlap" in row["flag_reasons"]
    assert row["timed_spread"] == pytest.approx((timed.max() - timed.min()) / np.median(timed) / 2)


def test_a_series_without_a_a_runs_has_no_table_and_no_spread():
    rng = np.random.default_rng(5)
    runs = _runs(
        {(TORCH, "timed"): _noisy(0.1, 0.01, rng), (MICA, "timed"): _noisy(0.09, 0.01, rng)}
    )
    assert aa.table(runs, _plan(runs), THRESHOLD) is None
    assert aa.title_label(None) == "" and aa.lines(None, THRESHOLD, [], "") == []
    found = resolution.of_row(runs, _comparison_row(runs), None)
    assert found is not None and found.aa_spread is None and "A/A" not in found.words


def test_a_failed_a_a_run_leaves_its_configuration_without_a_ratio():
    runs = _series(apart=0.03, noise=0.003)
    runs.loc[(runs["config"] == TORCH.id) & (runs["kind"] == AA), "status"] = "failed"
    table = aa.table(runs, _plan(runs), THRESHOLD)
    assert table is not None
    row = table.set_index("config").loc[TORCH.id]
    assert math.isnan(row["ratio"]) and math.isnan(row["aa_spread"]) and not row["flagged"]
    assert row["aa_runs"] == ROUNDS  # the twin's five


def _side(runs: pd.DataFrame, root: str) -> comparison.Side:
    timed = runs[runs["kind"] == "timed"]
    step_s = {str(c): tuple(g["step_s"]) for c, g in timed.groupby("config")}
    configs = pd.DataFrame(
        [
            {
                **vars(c),
                "config": c.id,
                "state": "complete",
                "median_step_s": float(np.median(step_s[c.id])),
                "min_step_s": min(step_s[c.id]),
                "max_step_s": max(step_s[c.id]),
            }
            for c in (TORCH, MICA)
        ]
    )
    table = aa.table(runs, _plan(runs), THRESHOLD)
    return comparison.Side(Path(root), "0" * 64, configs, step_s, THRESHOLD, aa.spreads(table))


def test_compare_reads_close_noisy_sides_same_within_their_a_a_spreads():
    a = _side(_series(apart=0.0, noise=0.01, seed=1), "a")
    b = _side(_series(apart=0.0, noise=0.01, seed=2), "b")
    result = comparison.compare(a, b)
    assert [e["verdict"] for e in result["both"]] == ["same", "same"]
    for e in result["both"]:
        assert e["aa_spread_a"] is not None and e["aa_spread_b"] is not None
        assert "within the two sides' A/A spreads" in e["reason"], e["reason"]


def test_compare_reads_three_percent_slower_with_small_noise_as_slower():
    a = _side(_series(apart=0.03, noise=0.003, seed=1), "a")
    b_runs = _series(apart=0.03, noise=0.003, seed=2)
    b_runs["step_s"] *= 1.03
    result = comparison.compare(a, _side(b_runs, "b"))
    assert [e["verdict"] for e in result["both"]] == ["slower", "slower"]
    assert len(compare_gate.gate(result, 0.02).slower) == 2


def test_one_a_a_round_gives_a_ratio_without_an_interval():
    """A one-round series (the device check's): no bootstrap of one run a side."""
    runs = _runs({(TORCH, "timed"): [0.1], (TORCH, AA): [0.1], (TORCH, AA_TWIN): [0.1005]})
    (row,) = aa.table(runs, _plan(runs), THRESHOLD).to_dict("records")  # type: ignore[union-attr]
    assert row["ratio"] == pytest.approx(1.005) and row["aa_spread"] == pytest.approx(0.005)
    assert math.isnan(row["ratio_interval_low"]) and math.isnan(row["round_to_round_max"])
    assert not row["flagged"]

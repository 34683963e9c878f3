"""The resolution beside a verdict, with fixtures of known spread drawn from a seeded generator."""

import numpy as np
import pytest

from kit.report import intervals

ROUNDS = 5


def _sides(apart: float, noise: float, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """Contender and baseline step times (s), `apart` relative difference, `noise` relative sd."""
    rng = np.random.default_rng(seed)
    baseline = 0.100 * (1 + noise * rng.standard_normal(ROUNDS))
    contender = 0.100 * (1 + apart) * (1 + noise * rng.standard_normal(ROUNDS))
    return contender, baseline


def test_three_percent_apart_with_small_noise_gives_an_interval_clear_of_one():
    contender, baseline = _sides(0.03, 0.003)
    iv = intervals.ratio_interval(contender, baseline)
    assert 1.0 < iv.low <= iv.ratio <= iv.high < 1.06
    assert intervals.can_tell(iv)
    assert (iv.level, iv.resamples) == (0.95, 9999)


def test_close_sides_with_large_noise_cannot_be_told_apart():
    contender, baseline = _sides(0.003, 0.01)
    iv = intervals.ratio_interval(contender, baseline)
    assert iv.contains(1.0)
    text = intervals.words(contender, baseline)
    assert "cannot tell the two apart" in text
    assert "p =" not in text and "significant" not in text


def test_the_interval_is_the_same_every_time_it_is_computed():
    contender, baseline = _sides(0.03, 0.003)
    assert intervals.ratio_interval(contender, baseline) == intervals.ratio_interval(
        contender, baseline
    )


def test_paired_rounds_count_the_rounds_favouring_each_side():
    p = intervals.paired([1.0, 1.1, 0.9, 1.2, 1.05], [1.0, 1.0, 1.0, 1.0, 1.0])
    assert p.median == pytest.approx(1.05)
    assert (p.low, p.high) == (pytest.approx(0.9), pytest.approx(1.2))
    assert (p.favour_contender, p.favour_pytorch) == (1, 3)  # one round level
    assert p.interval is not None and p.interval.low <= p.median <= p.interval.high


def test_paired_rounds_need_one_time_per_side_per_round():
    with pytest.raises(ValueError, match="one time per side per round"):
        intervals.paired([1.0, 1.1], [1.0])


def test_the_smallest_reachable_p_values():
    assert intervals.floor_paired_p(5) == pytest.approx(0.0625)
    assert intervals.floor_paired_p(6) == pytest.approx(0.03125)
    assert intervals.floor_unpaired_p(5, 5) == pytest.approx(2 / 252)


def test_five_rounds_say_in_words_that_no_test_can_reach_significance():
    contender, baseline = _sides(-0.03, 0.003)
    text = intervals.words(contender, baseline)
    assert text.startswith("difference 3.")
    assert "5 of 5 favour the contender" in text
    assert "with 5 rounds no test can reach p < 0.0625" in text

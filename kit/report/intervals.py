"""How far a comparison of step times can be trusted: the kit's own diagnostic, outside §10.

D1's verdicts (verdict.py) stay exactly as the protocol defines them; this module states beside
them what the runs can resolve. Every figure comes from scipy.stats, never from hand-written
statistics:

- the bootstrap confidence interval of the ratio of two sides' medians (`ratio_interval`);
- the paired ratios of rounds: each round runs every configuration once, so a round gives the
  contender's step time over PyTorch's in that round (`paired`), their median, range, how many
  rounds favour each side, and a bootstrap interval of their median;
- the smallest two-sided p-value any sign or signed-rank test could reach with n paired rounds,
  and any rank test with n against m unpaired runs (`floor_paired_p`, `floor_unpaired_p`): five
  rounds cannot reach p < 0.0625, whatever the data, and the words say so instead of printing a
  p-value the run count cannot support.

The bootstrap resamples with a fixed seed (`SEED`), so `verify`, which renders the report again
from the raw logs, recomputes the same digits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

LEVEL = 0.95  # the intervals' confidence level
RESAMPLES = 9999  # bootstrap resamples per interval
SEED = 20260101  # fixed, so a report rendered again reads the same digits
# a test's usual bar: a run count whose best possible p-value is above it cannot show a difference
ALPHA = 0.05
# percentile intervals: BCa's acceleration is undefined for the few (often tied) runs of a series
METHOD = "percentile"
# the fewest runs a side for which the interval is given: with fewer, the kit's 95% interval
# held the true ratio in 68-69% (2 runs) and 90% (3 runs) of trials on synthetic data of a
# known ratio, from 5 in 95-97% (benchmarks/kit/coverage.py; docs/benchmarks.md)
MIN_RUNS = 5

Times = Sequence[float] | npt.NDArray[np.floating]


@dataclass(frozen=True)
class Interval:
    """A bootstrap interval of a ratio: its estimate, bounds, level and resamples."""

    ratio: float
    low: float
    high: float
    level: float = LEVEL
    resamples: int = RESAMPLES

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Paired:
    """The paired ratios of rounds, round by round: PyTorch over the contender (the protocol's
    direction, above 1: the contender faster), or with `pm=False` the contender over PyTorch
    (a directory an earlier kit published)."""

    ratios: tuple[float, ...]
    median: float
    low: float  # the smallest round's ratio
    high: float  # the largest round's ratio
    favour_contender: int  # rounds where the contender's step was shorter
    favour_pytorch: int  # rounds where PyTorch's was shorter
    interval: Interval | None  # of the median ratio; None with a single round


def _bootstrap(
    samples: tuple[npt.NDArray[np.floating], ...],
    statistic: Callable[..., npt.NDArray[np.floating]],
    estimate: float,
) -> Interval:
    """The interval of `statistic` over `samples`: the same resamples, level, method and seed
    for every interval the report gives."""
    from scipy import stats  # lazy: scipy.stats takes a second to import; a report with no
    # comparison (a contender-only series) needs none

    ci = stats.bootstrap(
        samples,
        statistic,
        n_resamples=RESAMPLES,
        confidence_level=LEVEL,
        method=METHOD,
        vectorized=True,
        rng=np.random.default_rng(SEED),
    ).confidence_interval
    low, high = float(ci.low), float(ci.high)
    if np.isnan(low) or np.isnan(high):  # every resample alike: the interval is the point
        low = high = estimate
    return Interval(estimate, low, high)


def _median_ratio(
    a: npt.NDArray[np.floating], b: npt.NDArray[np.floating], axis: int = -1
) -> npt.NDArray[np.floating]:
    return np.median(a, axis=axis) / np.median(b, axis=axis)


def ratio_interval(contender_s: Times, baseline_s: Times) -> Interval:
    """The bootstrap interval of median(contender) / median(baseline), two unpaired samples."""
    a, b = np.asarray(contender_s, float), np.asarray(baseline_s, float)
    if not len(a) or not len(b):
        raise ValueError("both sides need step times")
    return _bootstrap((a, b), _median_ratio, float(np.median(a) / np.median(b)))


def paired(contender_s: Times, baseline_s: Times, *, pm: bool = False) -> Paired:
    """Round by round ratios: `contender_s[i]` and `baseline_s[i]` ran in the same round;
    `pm`: baseline over contender (the protocol's P/M), else contender over baseline."""
    a, b = np.asarray(contender_s, float), np.asarray(baseline_s, float)
    if len(a) != len(b) or not len(a):
        raise ValueError(f"paired rounds need one time per side per round ({len(a)} and {len(b)})")
    ratios = b / a if pm else a / b
    median = float(np.median(ratios))
    interval = _bootstrap((ratios,), np.median, median) if len(ratios) > 1 else None
    return Paired(
        ratios=tuple(float(r) for r in ratios),
        median=median,
        low=float(ratios.min()),
        high=float(ratios.max()),
        favour_contender=int((a < b).sum()),
        favour_pytorch=int((a > b).sum()),
        interval=interval,
    )


def floor_paired_p(rounds: int) -> float:
    """The smallest two-sided p-value a sign test can reach with `rounds` pairs: every round on
    one side (the signed-rank test's exact floor is the same, 2 / 2**n)."""
    if rounds < 1:
        return 1.0
    from scipy import stats  # lazy, as in _bootstrap

    return float(stats.binomtest(rounds, rounds, 0.5).pvalue)


def floor_unpaired_p(n: int, m: int) -> float:
    """The smallest two-sided p-value of Mann-Whitney's exact test, n runs against m: the two
    samples fully apart."""
    if n < 1 or m < 1:
        return 1.0
    from scipy import stats  # lazy, as in _bootstrap

    apart = stats.mannwhitneyu(np.arange(n), np.arange(n, n + m), method="exact")
    return float(apart.pvalue)


def no_interval(runs: int) -> str:
    """What stands where the runs are too few for an interval (MIN_RUNS)."""
    return f"{runs} runs a side: no interval"


def carries(contender_s: Times, baseline_s: Times) -> bool:
    """Whether both sides have the MIN_RUNS runs an interval needs."""
    return min(len(contender_s), len(baseline_s)) >= MIN_RUNS


def percent(ratio: float) -> str:
    return f"{abs(ratio - 1) * 100:.1f}%"


def can_tell(interval: Interval) -> bool:
    """Whether the interval of the ratio lies clear of 1 (the two sides told apart)."""
    return not interval.contains(1.0)


def rounds_words(rounds: int) -> str:
    """What a test could show with this many paired rounds, in words, never an unsupported p."""
    floor = floor_paired_p(rounds)
    if floor >= ALPHA:
        return f"with {rounds} rounds no test can reach p < {floor:.4g}"
    return f"with {rounds} rounds a sign test could reach p = {floor:.2g} at best"


def digits(low: float, high: float) -> int:
    """Decimals enough to tell an interval's ends apart, and never fewer than three: 0.000431
    and 0.000452 read "0.000431–0.000452", not "0.000–0.000"."""
    lowest = min(abs(low), abs(high))
    if lowest == 0 or not np.isfinite(lowest):
        return 3
    return max(3, int(-np.floor(np.log10(lowest))) + 2)


def shown(iv: Interval, what: str = "interval") -> str:
    """ "95% interval 1.025–1.132", to enough digits."""
    d = digits(iv.low, iv.high)
    return f"{iv.level:.0%} {what} {iv.low:.{d}f}–{iv.high:.{d}f}"


def words(
    contender_s: Times,
    baseline_s: Times,
    *,
    rounds_paired: bool = True,
    aa_spread: float | None = None,
    pm: bool = False,
) -> str:
    """The resolution beside a verdict: the difference, this card's A/A spread where the series
    measured one (kit.report.aa), the interval of the ratio (from MIN_RUNS runs a side), the
    paired rounds where the runs pair up, and what the run count can support. `pm`: the ratio
    PyTorch over contender (the protocol's), else contender over PyTorch (an earlier kit's)."""
    if pm and not carries(contender_s, baseline_s):
        ratio = float(np.median(baseline_s) / np.median(contender_s))
        spread = "" if aa_spread is None else f"; this card's A/A spread {aa_spread:.1%}"
        runs = no_interval(min(len(contender_s), len(baseline_s)))
        return f"ratio P/M {ratio:.3f}, difference {percent(ratio)}{spread}; {runs}"
    iv = ratio_interval(baseline_s, contender_s) if pm else ratio_interval(contender_s, baseline_s)
    shown_iv = shown(iv, "interval of the ratio")
    if not pm:  # as an earlier kit published it: three decimals
        shown_iv = f"{iv.level:.0%} interval of the ratio {iv.low:.3f}–{iv.high:.3f}"
    spread = "" if aa_spread is None else f"this card's A/A spread {aa_spread:.1%}"
    if aa_spread is not None and within(iv.ratio, aa_spread):
        named = f"ratio P/M {iv.ratio:.3f}, " if pm else ""
        return (
            f"{named}difference {percent(iv.ratio)}, within this card's A/A spread: these runs "
            f"cannot tell the two apart; {spread}; {shown_iv}"
        )
    head = f"difference {percent(iv.ratio)}" + (f"; {spread}" if spread else "")
    if pm:  # the ratio the interval bounds, named before it
        head = f"ratio P/M {iv.ratio:.3f}, {head}"
    if not can_tell(iv):
        return f"{head}; {shown_iv} holds 1: these runs cannot tell the two apart"
    parts = [head, shown_iv]
    if rounds_paired and len(contender_s) == len(baseline_s):
        p = paired(contender_s, baseline_s, pm=pm)
        n = len(p.ratios)
        d = digits(p.low, p.high) if pm else 3
        parts.append(
            f"paired rounds: median {p.median:.{d}f} ({p.low:.{d}f}–{p.high:.{d}f}), "
            f"{p.favour_contender} of {n} favour the contender, {p.favour_pytorch} PyTorch"
        )
        parts.append(rounds_words(n))
    return "; ".join(parts)


def within(ratio: float, aa_spread: float) -> bool:
    """Whether a ratio's distance from 1 lies within an A/A spread: two identical runs on this
    card differ as much, so the runs cannot tell the two sides apart."""
    return abs(ratio - 1) <= aa_spread

"""Benchmark: how often the kit's bootstrap interval of a ratio of medians holds the true ratio,
with n runs a side: the run count below which the kit prints no interval.

Each trial draws n step times a side from a distribution whose median is known, contender's
median `--ratio` times the baseline's, and asks the kit's own `intervals.ratio_interval` (scipy's
percentile bootstrap, 9999 resamples, 95%) for the interval of the ratio; the coverage is the
share of trials whose interval holds the true ratio. A 95% interval that holds it far less
often than 95% of the time says more than the runs can carry.

Two shapes of noise, both multiplicative as step times are:
- lognormal: every run's time the median times exp(N(0, sigma));
- outliers: the same, and one run in ten slower by 10% (a busy neighbour, a late clock).

    python benchmarks/kit/coverage.py [--trials 1000] [--n 2 3 5 10] [--sigma 0.02]

It prints one row per shape and n: the coverage, its binomial 95% interval (scipy), and the
median width of the intervals relative to the ratio.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kit.report import intervals  # noqa: E402

SHAPES = ("lognormal", "outliers")


def draw(rng: np.random.Generator, shape: str, n: int, median: float, sigma: float) -> np.ndarray:
    """n step times whose population median is `median` (lognormal: exp(N(0, s)) has median 1;
    with outliers the median shifts, so the caller takes it from `true_median`)."""
    x = median * np.exp(rng.normal(0.0, sigma, n))
    if shape == "outliers":
        x = np.where(rng.random(n) < 0.1, x * 1.10, x)
    return x


def true_median(shape: str, sigma: float) -> float:
    """The population median of one draw at median 1: 1 for lognormal; for the mixture, the
    point where 0.9·Φ(ln m/σ) + 0.1·Φ(ln(m/1.1)/σ) = 0.5, solved by scipy."""
    if shape == "lognormal":
        return 1.0

    def cdf(m: float) -> float:
        return float(
            0.9 * stats.norm.cdf(np.log(m) / sigma)
            + 0.1 * stats.norm.cdf(np.log(m / 1.1) / sigma)
            - 0.5
        )

    from scipy.optimize import brentq  # only the mixture needs it

    return float(brentq(cdf, 0.5, 2.0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--n", type=int, nargs="+", default=[2, 3, 5, 10])
    ap.add_argument("--sigma", type=float, default=0.02, help="the runs' spread (log scale)")
    ap.add_argument("--ratio", type=float, default=0.5, help="contender's median over baseline's")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(
        f"{args.trials} trials a row; true ratio {args.ratio}; sigma {args.sigma}; "
        f"the kit's interval: {intervals.LEVEL:.0%}, {intervals.RESAMPLES} resamples, "
        f"{intervals.METHOD}"
    )
    print(f"{'shape':<10} {'n':>3} {'coverage':>9} {'(95% of it)':>16} {'median width':>13}")
    for shape in SHAPES:
        scale = true_median(shape, args.sigma)
        for n in args.n:
            held, widths = 0, []
            for _ in range(args.trials):
                baseline = draw(rng, shape, n, 1.0 / scale, args.sigma)
                contender = draw(rng, shape, n, args.ratio / scale, args.sigma)
                iv = intervals.ratio_interval(contender, baseline)
                held += iv.contains(args.ratio)
                widths.append((iv.high - iv.low) / args.ratio)
            ci = stats.binomtest(held, args.trials).proportion_ci(0.95)
            print(
                f"{shape:<10} {n:>3} {held / args.trials:>9.3f} "
                f"{ci.low:>7.3f}–{ci.high:<7.3f} {float(np.median(widths)):>13.4f}",
                flush=True,
            )


if __name__ == "__main__":
    main()

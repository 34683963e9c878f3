"""The clocks beside the verdicts: a diagnostic of the kit's, outside §10 (D1's words stand).

Per run, from the samples the series already took (a card's samples.jsonl, a CPU series'
machine.jsonl): the median SM (or CPU) and memory clock over §5's window (the whole run where
the run has no window), the share of the samples with each clock-event reason, and the step
time in cycles (step time x median clock). Between the sides: where D1's rule on cycles gives
another verdict than on time, or a side spent more than the protocol's `throttle_share` of its
samples power-capped or throttled, the times alone cannot tell the programs from the clocks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kit.report import verdict

AMBIGUOUS = "ambiguous: the clocks differed between the sides"
NOT_READABLE = "not readable"
# the shares published per run: the column of counted samples each divides by the samples
SHARES = {
    "sw_power_cap_share": ("sw_power_cap_samples",),
    "thermal_share": ("thermal_event_samples",),  # software and hardware thermal slowdown
    "hw_slowdown_share": ("hw_slowdown_samples",),
    "sync_boost_share": ("sync_boost_samples",),
    "throttled_share": ("throttled_samples",),
}
COLUMNS = ["clock_source", "clock_mhz", "clock_window", "step_cycles", *SHARES]


def per_run(runs: pd.DataFrame) -> pd.DataFrame:
    """`runs` with the clock columns added: `clock_source` (sm, cpu, or not readable),
    `clock_mhz`, `clock_window` (§5 window or whole run), `step_cycles` and the shares."""
    out = runs.copy()
    sm = _numeric(out, "sm_clock_median_mhz")
    cpu = _numeric(out, "cpu_mhz_median")
    out["clock_mhz"] = sm.where(sm.notna(), cpu)
    out["clock_source"] = np.where(sm.notna(), "sm", np.where(cpu.notna(), "cpu", NOT_READABLE))
    windowed = out["window_start_ns"].notna() & out["window_end_ns"].notna()
    out["clock_window"] = np.where(windowed, "§5 window", "whole run")
    # cycles: seconds x MHz x 1e6
    out["step_cycles"] = _numeric(out, "step_s") * out["clock_mhz"] * 1e6
    samples = _numeric(out, "sample_count")
    has_samples = sm.notna() & (samples > 0)
    for share, (count,) in SHARES.items():
        out[share] = (_numeric(out, count) / samples).where(has_samples)
    return out


def _numeric(frame: pd.DataFrame, name: str) -> pd.Series:
    if name not in frame:
        return pd.Series(np.nan, index=frame.index, dtype="float64")
    return pd.to_numeric(frame[name], errors="coerce").astype("float64")


def side_throttled_share(runs: pd.DataFrame) -> float:
    """The share of a side's samples (all its timed runs together) power-capped or throttled;
    NaN where its runs have no card samples."""
    samples = _numeric(runs, "sample_count").where(runs["clock_source"] == "sm").sum()
    if not samples:
        return float("nan")
    return float(_numeric(runs, "throttled_samples").sum() / samples)


def between(
    mica: pd.DataFrame, pytorch: pd.DataFrame, margin: float, throttle_share: float
) -> tuple[str, str]:
    """D1's rule on cycles between a contender's timed runs and PyTorch's fastest mode's
    (verdict.by_times, the same rule as on time), and what the clocks say beside the verdict:
    "" where they agree, AMBIGUOUS with the reasons where they do not, or that the clocks were
    not readable. Returns (verdict by cycles, what the clocks say)."""
    mc, pc = _numeric(mica, "step_cycles"), _numeric(pytorch, "step_cycles")
    if mica.empty or pytorch.empty or mc.isna().any() or pc.isna().any():
        return "", f"clocks {NOT_READABLE}: no verdict by cycles"
    by_time = verdict.by_times(
        _numeric(mica, "step_s").to_numpy(), _numeric(pytorch, "step_s").to_numpy(), margin
    )
    by_cycles = verdict.by_times(mc.to_numpy(), pc.to_numpy(), margin)
    reasons = []
    if by_cycles != by_time:
        reasons.append(f"by cycles {by_cycles}, by time {by_time}")
    for side, rows in (("Mica", mica), ("PyTorch", pytorch)):
        share = side_throttled_share(rows)
        if share > throttle_share:
            reasons.append(
                f"{side}'s runs power-capped or throttled in {share:.0%} of their samples "
                f"(above {throttle_share:.0%})"
            )
    return by_cycles, f"{AMBIGUOUS} ({'; '.join(reasons)})" if reasons else ""

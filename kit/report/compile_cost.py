"""What compiling costs: each mode's warm-up, and the run length at which it pays for itself.

§5 never measures steps 0 to 99: they hold Inductor's compilation, autotuning and the capture of
CUDA graphs. Their cost is still in the stamps, and it is the first question asked of a compiled
mode. Per timed run, warm-up = stamp of the first step line − the program's start: a time the
clock read, never an extrapolation, so no noise can make it negative. (The step time times 100
steps, taken away from the time to step 100, was one: a step time measured on a busy machine
made warm-ups of −10 s.) Per mode, its median and range over the timed runs.

Against eager on the same card, model and precision, a mode's compile cost is the difference of
the two median warm-ups, and its break-even run length the steps after which it has saved it:
    (warm-up(mode) − warm-up(eager)) / (step(eager) − step(mode)).
Each is given only where the runs tell the two modes apart: where the ranges of their warm-ups
(for the cost) and of their warm-ups and their step times (for the break-even) do not overlap.
Elsewhere the figure is withheld and `break_even_why` says which ranges overlap. Only
configurations whose timed runs were all ok (a complete configuration, §5) are given; every
figure comes from the stamps alone.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from kit.measure import timing
from kit.protocol.load import Grammar
from kit.results.store import ResultsDir

COLUMNS = [
    "config", "card", "model", "precision", "side", "variant", "runs", "median_warmup_s",
    "min_warmup_s", "max_warmup_s", "median_step_s", "min_step_s", "max_step_s",
    "extra_warmup_vs_eager_s", "break_even_steps_vs_eager", "break_even_why",
]  # fmt: skip
EAGER = "eager"
REFERENCE = "eager is the reference"
NO_EAGER = "no complete eager mode"
WARMUPS_OVERLAP = "its warm-ups and eager's overlap: its compile cost is not told from noise"
STEPS_OVERLAP = "its step times and eager's overlap: which steps are quicker is not told"
NEVER = "eager's steps are quicker: it never pays for its dearer start"
CHEAPER_SLOWER = "it starts before eager, whose steps are quicker: eager catches up"


def warmups(rd: ResultsDir, runs: pd.DataFrame, grammar: Grammar) -> pd.Series:
    """Per timed, ok PyTorch run (indexed by run_id): its warm-up in seconds, the stamp of its
    first step line less its start, both on the kit's clock."""
    started = {r.run_id: r.start_ns for r in rd.runs()}
    ok = runs[(runs["kind"] == "timed") & (runs["status"] == timing.OK)]
    ok = ok[ok["side"] == "pytorch"]
    out = {}
    for run_id, log_dir in zip(ok["run_id"], ok["log_dir"]):
        start_ns = started.get(int(run_id))
        if start_ns is None:
            continue
        steps = timing.losses(rd.root / log_dir / "stdout.log", grammar)
        if steps:
            out[int(run_id)] = (steps[0].stamp_ns - int(start_ns)) / 1e9
    return pd.Series(out, dtype=float)


def compile_costs(rd: ResultsDir, runs: pd.DataFrame, grammar: Grammar) -> pd.DataFrame:
    """Per complete PyTorch mode: warm-up and step time, median and range, and against eager
    its extra warm-up and break-even, where the runs separate them (else why not)."""
    w = warmups(rd, runs, grammar)
    timed = runs[(runs["kind"] == "timed") & (runs["side"] == "pytorch")]
    rows = []
    for cid, group in timed.groupby("config", sort=False):
        if not (group["status"] == timing.OK).all():
            continue  # only a complete configuration has a time (§5, amendments 5.2 and 8)
        mine = w.reindex(group["run_id"].astype(int)).dropna().to_numpy()
        if not len(mine):
            continue
        steps = group["step_s"].astype(float).to_numpy()
        first = group.iloc[0]
        rows.append(
            {
                "config": cid,
                **{k: first[k] for k in ("card", "model", "precision", "side", "variant")},
                "runs": len(mine),
                "median_warmup_s": float(np.median(mine)),
                "min_warmup_s": float(mine.min()),
                "max_warmup_s": float(mine.max()),
                "median_step_s": float(np.median(steps)),
                "min_step_s": float(steps.min()),
                "max_step_s": float(steps.max()),
            }
        )
    frame = pd.DataFrame(rows, columns=COLUMNS[:-3])
    against = [_against_eager(frame, row) for _, row in frame.iterrows()]
    frame["extra_warmup_vs_eager_s"] = [a[0] for a in against]
    frame["break_even_steps_vs_eager"] = [a[1] for a in against]
    frame["break_even_why"] = [a[2] for a in against]
    return frame[COLUMNS]


def _apart(lo: float, hi: float, other_lo: float, other_hi: float) -> int:
    """+1 where the range [lo, hi] lies wholly above the other, -1 wholly below, 0 overlapping."""
    if lo > other_hi:
        return 1
    if hi < other_lo:
        return -1
    return 0


def _against_eager(frame: pd.DataFrame, row: pd.Series) -> tuple[float, float, str]:
    """(extra warm-up in s, break-even in steps, why none): NaN where the runs do not say."""
    if row["variant"] == EAGER:
        return math.nan, math.nan, REFERENCE
    same = frame[
        (frame["card"] == row["card"])
        & (frame["model"] == row["model"])
        & (frame["precision"] == row["precision"])
        & (frame["variant"] == EAGER)
    ]
    if same.empty:
        return math.nan, math.nan, NO_EAGER
    eager = same.iloc[0]
    start = _apart(row["min_warmup_s"], row["max_warmup_s"], eager["min_warmup_s"],
                   eager["max_warmup_s"])  # fmt: skip
    if start == 0:
        return math.nan, math.nan, WARMUPS_OVERLAP
    extra = float(row["median_warmup_s"] - eager["median_warmup_s"])
    step = _apart(row["min_step_s"], row["max_step_s"], eager["min_step_s"], eager["max_step_s"])
    if step == 0:
        return extra, math.nan, STEPS_OVERLAP
    if start < 0:
        # no dearer to start than eager: with quicker steps it pays from the first one
        return extra, (0.0 if step < 0 else math.nan), ("" if step < 0 else CHEAPER_SLOWER)
    if step > 0:
        return extra, math.inf, NEVER
    saved_per_step = float(eager["median_step_s"] - row["median_step_s"])
    return extra, float(math.ceil(extra / saved_per_step)), ""

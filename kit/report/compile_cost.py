"""What compiling costs: each mode's warm-up, and the run length at which it pays for itself.

§5 never measures steps 0 to 99: they hold Inductor's compilation, autotuning and the capture of
CUDA graphs. Their cost is still in the stamps, and it is the first question asked of a compiled
mode: per timed run, warm-up = (stamp of step 100's line − the program's start) − 100 steps at
the run's own measured step time. Per mode, its median and range over the timed runs; against
eager on the same card, model and precision, the break-even run length is the number of steps
after which the mode has saved its extra warm-up:
    (warm-up(mode) − warm-up(eager)) / (step(eager) − step(mode)),
none where the mode's steps are not faster. Only configurations whose timed runs were all ok
(a complete configuration, §5) are given; every figure comes from the stamps alone.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from kit.engine.store import ResultsDir
from kit.measure import timing

COLUMNS = [
    "config", "card", "model", "precision", "side", "variant", "runs", "median_warmup_s",
    "min_warmup_s", "max_warmup_s", "median_step_s", "break_even_steps_vs_eager",
]  # fmt: skip
EAGER = "eager"


def warmups(rd: ResultsDir, runs: pd.DataFrame, window_start_step: int) -> pd.Series:
    """Per timed, ok run (indexed by run_id): its warm-up in seconds, from its stamps."""
    started = {r.run_id: r.start_ns for r in rd.runs()}
    ok = runs[(runs["kind"] == "timed") & (runs["status"] == timing.OK)]
    out = {}
    for run_id, window_ns, step_s in zip(ok["run_id"], ok["window_start_ns"], ok["step_s"]):
        start_ns = started.get(run_id)
        if start_ns is None or pd.isna(window_ns):
            continue
        to_step = (int(window_ns) - int(start_ns)) / 1e9
        out[int(run_id)] = to_step - window_start_step * float(step_s)
    return pd.Series(out, dtype=float)


def compile_costs(rd: ResultsDir, runs: pd.DataFrame, window_start_step: int) -> pd.DataFrame:
    """Per complete PyTorch mode: warm-up median and range, and the break-even against eager."""
    w = warmups(rd, runs, window_start_step)
    timed = runs[(runs["kind"] == "timed") & (runs["side"] == "pytorch")]
    rows = []
    for cid, group in timed.groupby("config", sort=False):
        if not (group["status"] == timing.OK).all():
            continue  # only a complete configuration has a time (§5, amendments 5.2 and 8)
        mine = w.reindex(group["run_id"].astype(int)).dropna().to_numpy()
        if not len(mine):
            continue
        first = group.iloc[0]
        rows.append(
            {
                "config": cid,
                **{k: first[k] for k in ("card", "model", "precision", "side", "variant")},
                "runs": len(mine),
                "median_warmup_s": float(np.median(mine)),
                "min_warmup_s": float(mine.min()),
                "max_warmup_s": float(mine.max()),
                "median_step_s": float(np.median(group["step_s"].astype(float))),
            }
        )
    frame = pd.DataFrame(rows, columns=COLUMNS[:-1])
    frame["break_even_steps_vs_eager"] = [_break_even(frame, row) for _, row in frame.iterrows()]
    return frame[COLUMNS]


def _break_even(frame: pd.DataFrame, row: pd.Series) -> float:
    same = frame[
        (frame["card"] == row["card"])
        & (frame["model"] == row["model"])
        & (frame["precision"] == row["precision"])
        & (frame["variant"] == EAGER)
    ]
    if row["variant"] == EAGER or same.empty:
        return math.nan
    eager = same.iloc[0]
    saved_per_step = eager["median_step_s"] - row["median_step_s"]
    extra = row["median_warmup_s"] - eager["median_warmup_s"]
    if extra <= 0:
        return 0.0  # no dearer to start than eager: it pays from the first step
    if saved_per_step <= 0:
        return math.inf  # slower steps never pay back a dearer start
    return math.ceil(extra / saved_per_step)

"""The resolution beside every verdict: how far the runs behind it can tell the two sides apart.

The kit's own diagnostic, outside §10: D1's verdict (verdict.py) stays as the protocol words it;
this states beside it the difference, the bootstrap interval of the ratio of medians, the paired
ratios of rounds and what the run count can support (intervals.py, from scipy.stats). Every
figure comes from the timed runs' step times the tables recompute from the raw logs, so `verify`
recomputes it with the rest of the report.

A directory published before the resolution existed keeps its report without it
(`published_with`): `verify` renders what that publication made, so it stays clean.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

import pandas as pd

from kit.measure import timing
from kit.report import aa, intervals
from kit.report.tables import Tables
from kit.results.planned import CONTENDER, PYTORCH
from kit.results.store import ResultsDir

LABEL = "the kit's diagnostic, outside §10"
FIRST_SCHEMA = 2  # summary.json's schema from which a publication carries the resolution


@dataclass(frozen=True)
class Resolution:
    """One comparison's resolution: contender over PyTorch's fastest mode (below 1: the
    contender is faster). `paired_*` from the rounds where both ran; None where fewer than two."""

    ratio: float
    interval_low: float
    interval_high: float
    level: float
    resamples: int
    told_apart: bool
    paired_rounds: int
    paired_median: float | None
    paired_min: float | None
    paired_max: float | None
    paired_interval_low: float | None
    paired_interval_high: float | None
    rounds_favour_contender: int
    rounds_favour_pytorch: int
    smallest_paired_p: float
    smallest_unpaired_p: float
    aa_spread: float | None  # this card's A/A spread beside the comparison (kit.report.aa)
    words: str

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def _timed(runs: pd.DataFrame, row: pd.Series, side: str, variant: str) -> pd.Series:
    """A side's ok timed runs' step times, indexed by round (§4: each round runs it once)."""
    mine = runs[
        (runs["card"] == row["card"])
        & (runs["model"] == row["model"])
        & (runs["precision"] == row["precision"])
        & (runs["side"] == side)
        & (runs["variant"] == variant)
        & (runs["kind"] == "timed")
        & (runs["status"] == timing.OK)
    ]
    return mine.set_index("round")["step_s"].astype(float)


def of_row(
    runs: pd.DataFrame, row: pd.Series, aa_table: pd.DataFrame | None = None
) -> Resolution | None:
    """The resolution of one row of the comparison table; None where a side shows no time.
    `aa_table`: the series' A/A table, whose spread stands beside the difference."""
    if math.isnan(row["contender_median_step_s"]) or math.isnan(row["pytorch_median_step_s"]):
        return None
    m = _timed(runs, row, CONTENDER, row["contender_build"])
    p = _timed(runs, row, PYTORCH, row["pytorch_fastest_mode"])
    iv = intervals.ratio_interval(m.to_numpy(), p.to_numpy())
    rounds = sorted(set(m.index) & set(p.index))
    pair = intervals.paired(m[rounds].to_numpy(), p[rounds].to_numpy()) if rounds else None
    paired_iv = pair.interval if pair else None
    contender_id = f"{row['model']}/{row['precision']}/{CONTENDER}/{row['contender_build']}"
    pytorch_id = f"{row['model']}/{row['precision']}/{PYTORCH}/{row['pytorch_fastest_mode']}"
    spread = aa.spread_beside(aa_table, [contender_id, pytorch_id])
    text = (
        intervals.words(m[rounds].to_numpy(), p[rounds].to_numpy(), aa_spread=spread)
        if rounds
        else ""
    )
    return Resolution(
        ratio=iv.ratio,
        interval_low=iv.low,
        interval_high=iv.high,
        level=iv.level,
        resamples=iv.resamples,
        # told apart: the interval clear of 1, and the difference beyond this card's A/A spread
        told_apart=intervals.can_tell(iv)
        and (spread is None or not intervals.within(iv.ratio, spread)),
        paired_rounds=len(rounds),
        paired_median=pair.median if pair else None,
        paired_min=pair.low if pair else None,
        paired_max=pair.high if pair else None,
        paired_interval_low=paired_iv.low if paired_iv else None,
        paired_interval_high=paired_iv.high if paired_iv else None,
        rounds_favour_contender=pair.favour_contender if pair else 0,
        rounds_favour_pytorch=pair.favour_pytorch if pair else 0,
        smallest_paired_p=intervals.floor_paired_p(len(rounds)),
        smallest_unpaired_p=intervals.floor_unpaired_p(len(m), len(p)),
        aa_spread=spread,
        words=text
        or intervals.words(m.to_numpy(), p.to_numpy(), rounds_paired=False, aa_spread=spread),
    )


def of_comparisons(t: Tables) -> list[Resolution | None]:
    """Each row of the comparison table's resolution, in its order."""
    return [of_row(t.runs, r, t.aa) for _, r in t.comparison.iterrows()]


def line(row: pd.Series, found: Resolution) -> str:
    """The resolution as a note under the comparison table."""
    return f"- Resolution of {row['contender_build']} ({LABEL}): {found.words}."


def published_with(rd: ResultsDir) -> bool:
    """Whether this directory's publication carries the resolution: it does unless its
    summary.json was written before summary.json's schema 2 (a directory published by an
    earlier kit, whose report `verify` must render as it was made)."""
    path = rd.root / "summary.json"
    if not path.is_file():
        return True
    try:
        published = json.loads(path.read_text("utf-8"))
        # the version key: "schema_version" since summary.json's schema 3, "schema" before
        schema = published.get("schema_version", published.get("schema"))
    except (ValueError, AttributeError, OSError):
        return True  # unreadable: verify names the file as differing
    return not isinstance(schema, int) or schema >= FIRST_SCHEMA

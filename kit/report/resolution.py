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

import math
from dataclasses import asdict, dataclass

import pandas as pd

from kit.measure import timing
from kit.report import aa, intervals, published
from kit.report.tables import Tables
from kit.results.planned import CONTENDER, PYTORCH
from kit.results.store import ResultsDir

LABEL = "the kit's diagnostic, outside §10"
FIRST_SCHEMA = 2  # summary.json's schema from which a publication carries the resolution
# summary.json's schema from which the resolution is PyTorch over contender (the protocol's P/M,
# the direction of the ratio beside it), with no interval below intervals.MIN_RUNS runs a side
PM_SCHEMA = 4


@dataclass(frozen=True)
class Resolution:
    """One comparison's resolution: PyTorch's fastest mode over the contender (the protocol's
    P/M, above 1: the contender is faster; an earlier kit's publication, contender over
    PyTorch). `paired_*` from the rounds where both ran; None where fewer than two. No interval
    below intervals.MIN_RUNS runs a side."""

    ratio: float
    interval_low: float | None
    interval_high: float | None
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
    runs: pd.DataFrame, row: pd.Series, aa_table: pd.DataFrame | None = None, pm: bool = True
) -> Resolution | None:
    """The resolution of one row of the comparison table; None where a side shows no time.
    `aa_table`: the series' A/A table, whose spread stands beside the difference; `pm`: in the
    protocol's direction, PyTorch over contender (False: as an earlier kit published it)."""
    if math.isnan(row["contender_median_step_s"]) or math.isnan(row["pytorch_median_step_s"]):
        return None
    m = _timed(runs, row, CONTENDER, row["contender_build"])
    p = _timed(runs, row, PYTORCH, row["pytorch_fastest_mode"])
    iv = intervals.ratio_interval(*((p, m) if pm else (m, p)))
    carried = not pm or intervals.carries(m, p)
    rounds = sorted(set(m.index) & set(p.index))
    pair = intervals.paired(m[rounds].to_numpy(), p[rounds].to_numpy(), pm=pm) if rounds else None
    paired_iv = pair.interval if pair else None
    contender_id = f"{row['model']}/{row['precision']}/{CONTENDER}/{row['contender_build']}"
    pytorch_id = f"{row['model']}/{row['precision']}/{PYTORCH}/{row['pytorch_fastest_mode']}"
    spread = aa.spread_beside(aa_table, [contender_id, pytorch_id])
    text = (
        intervals.words(m[rounds].to_numpy(), p[rounds].to_numpy(), aa_spread=spread, pm=pm)
        if rounds
        else ""
    )
    # told apart: the interval clear of 1 (without one, the ranges apart), and the difference
    # beyond this card's A/A spread
    apart = intervals.can_tell(iv) if carried else m.max() < p.min() or p.max() < m.min()
    return Resolution(
        ratio=iv.ratio,
        interval_low=iv.low if carried else None,
        interval_high=iv.high if carried else None,
        level=iv.level,
        resamples=iv.resamples,
        told_apart=bool(apart) and (spread is None or not intervals.within(iv.ratio, spread)),
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
        or intervals.words(
            m.to_numpy(), p.to_numpy(), rounds_paired=False, aa_spread=spread, pm=pm
        ),
    )


def of_comparisons(t: Tables, pm: bool = True) -> list[Resolution | None]:
    """Each row of the comparison table's resolution, in its order."""
    return [of_row(t.runs, r, t.aa, pm) for _, r in t.comparison.iterrows()]


def line(row: pd.Series, found: Resolution) -> str:
    """The resolution as a note under the comparison table: in the protocol's direction, the
    ratio P/M it bounds named first."""
    return f"- Resolution of {row['contender_build']} ({LABEL}): {found.words}."


def _published_schema(rd: ResultsDir) -> int | None:
    """The schema of the directory's summary.json; None where there is none or it does not read
    (verify then names the file as differing)."""
    # read once while the file is the same (kit.report.published): a report asks it of every
    # comparison
    found = published.document(rd.root / "summary.json")
    if not isinstance(found, dict):
        return None
    schema = found.get("schema_version", found.get("schema"))
    return schema if isinstance(schema, int) else None


def in_pm(rd: ResultsDir) -> bool:
    """Whether this directory's resolution is PyTorch over contender: it is unless an earlier
    kit published it (summary.json below PM_SCHEMA), whose report `verify` renders as made."""
    return _at_least(rd, PM_SCHEMA)


def published_with(rd: ResultsDir) -> bool:
    """Whether this directory's publication carries the resolution: it does unless its
    summary.json was written before summary.json's schema 2 (a directory published by an
    earlier kit, whose report `verify` must render as it was made)."""
    return _at_least(rd, FIRST_SCHEMA)


def _at_least(rd: ResultsDir, schema: int) -> bool:
    """Whether the directory's summary.json is of `schema` or later, or is none or does not
    read (verify then names the file as differing). A file that declares such a schema as
    its only one is either, whatever the rest holds: it is not parsed (`report` of a large
    series reads no 12 MB it does not need)."""
    declared = published.declared_schema(rd.root / "summary.json")
    if declared is not None and declared >= schema:
        return True
    found = _published_schema(rd)
    return found is None or found >= schema

"""Two results directories side by side: the same card before and after an upgrade, two cards,
two contender releases.

Every number is recomputed from each directory's raw files (as `verify` does), never read from
its published tables. A configuration is matched by model, precision, side and variant (its card
may differ); only a configuration whose every planned timed run was ok has a time (§5), so any
other is shown by its state. This compares two directories; it is not a verdict of §10. Rule 6
holds here too: a time whose correctness check has not passed is withheld unless asked for with
`--preview`, and the output then says it is preparation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import NotRequired, TypedDict

import numpy as np
import pandas as pd

from kit.errors import UserError
from kit.measure import timing
from kit.protocol.shipped import Shipped, ShippedJson, against_shipped, shipped_sha256
from kit.report import aa, flags, intervals, next_steps, tables
from kit.report.states import Publication
from kit.results import audit
from kit.results.store import PROTOCOL, ResultsDir, load_protocol

# 2: each configuration's class, the interval of B / A and the reason; 3: its key "schema_version",
# and each side's A/A spread (kit.report.aa) where its series measured one; 4: each directory's
# protocol against the one the kit ships (kit.protocol.shipped), one ratio, B / A
# (ratio_a_over_b gone), each side's run count, flagged runs and A/A flag, no interval below
# intervals.MIN_RUNS runs a side, and "gate" where --fail-slower was given
SCHEMA = 4
KEY = ["model", "precision", "side", "variant"]
SAME, FASTER, SLOWER, AMBIGUOUS = "same", "faster", "slower", "ambiguous"
CLASSES = (SAME, FASTER, SLOWER, AMBIGUOUS)  # compare.schema.json's enum of them
SCHEMA_FILE = "compare.schema.json"  # `compare --json`'s JSON Schema, shipped in the package


def schema() -> dict:
    """The JSON Schema of `compare --json`, as shipped in the package."""
    return json.loads((resources.files("kit") / "files" / SCHEMA_FILE).read_text("utf-8"))


class Timed(TypedDict):
    """A configuration's step times in seconds (§5): median, fastest and slowest run."""

    median: float
    min: float
    max: float


class OnlyIn(TypedDict):
    """A configuration one directory holds and the other does not."""

    model: str
    precision: str
    side: str
    variant: str
    card: str
    has_time: bool  # whether it has a time there (§5), shown or withheld by rule 6


class Compared(TypedDict):
    """A configuration both directories hold; times None where a side has none to show."""

    model: str
    precision: str
    side: str
    variant: str
    card_a: str
    card_b: str
    state_a: str
    state_b: str
    # whether each side has a time (§5: every planned timed run ok), shown or withheld by rule 6
    has_time_a: bool
    has_time_b: bool
    a_s: Timed | None
    b_s: Timed | None
    ranges_overlap: bool | None
    # whether B reproduces A (the kit's diagnostic, in nvbench's manner): same, faster, slower,
    # ambiguous; None where a side has no time. The ratio and its interval are B's median over
    # A's (above 1: B slower); no interval below intervals.MIN_RUNS runs a side.
    runs_a: int
    runs_b: int
    ratio_b_over_a: float | None
    interval_b_over_a: tuple[float, float] | None
    interval_level: float | None
    verdict: str | None
    reason: str
    # each side's A/A spread of this configuration (the largest distance of an A/A round's
    # ratio from 1); None where its series ran no A/A runs of it, and its range stands instead
    aa_spread_a: float | None
    aa_spread_b: float | None
    # §5's flags on this configuration's timed runs, in words (kit.report.flags); None where none
    flagged_a: str | None
    flagged_b: str | None
    # why each side's series' A/A is not level (kit.report.aa's title label); None where level
    aa_not_level_a: str | None
    aa_not_level_b: str | None


class Comparison(TypedDict):
    """What `micakit compare --json` prints."""

    schema_version: int
    a: str
    b: str
    protocol_changed: bool
    # §3 rule 1: each directory's protocol file against the one this kit ships, key by key
    protocol_a: ShippedJson
    protocol_b: ShippedJson
    preview: bool
    both: list[Compared]
    only_in_a: list[OnlyIn]
    only_in_b: list[OnlyIn]
    threshold: float
    # rule 6's way out where a time is withheld: `--preview`, the checks and the gating commands
    way_out: list[str]
    # `--fail-slower`'s gate (kit.report.compare_gate), where it was given
    gate: NotRequired[dict[str, object]]


@dataclass(frozen=True)
class Side:
    """One directory as the comparison reads it."""

    root: Path
    protocol_sha256: str
    configurations: pd.DataFrame
    step_s: dict[str, tuple[float, ...]]  # each configuration's ok timed runs' step times (§5)
    threshold: float  # its protocol's [diagnostics] threshold
    aa_spread: dict[str, float]  # each configuration's A/A spread, where the series has one
    preview: bool = False  # its times shown labelled preparation (a smoke series always is)
    way_out: tuple[str, ...] = ()  # the commands that make the checks rule 6 waits for
    shipped: Shipped | None = None  # its protocol file against the one the kit ships
    flagged: Mapping[str, str] = field(default_factory=dict)  # kit.report.flags.by_config
    aa_not_level: str = ""  # why its series' A/A is not level, "" where level or none ran


def read(root: Path, *, preview: bool = False) -> Side:
    """A directory's configurations; rule 6 withholds unchecked times unless `preview`."""
    rd = ResultsDir.open(root)
    # D6: numbers only from what a series wrote; a smoke series is the preview it is, as in
    # `report` (kit.report.tables.is_preview)
    t = tables.tables(rd, preview=True if preview else None, listing=audit.refuse_if_altered(rd))
    runs = t.runs[(t.runs["kind"] == "timed") & (t.runs["status"] == timing.OK)]
    step_s = {str(c): tuple(g["step_s"].astype(float)) for c, g in runs.groupby("config")}
    protocol = load_protocol(rd)
    way_out: tuple[str, ...] = ()
    if any(Publication.of(p) is Publication.WITHHELD for p in t.configurations["publication"]):
        c = next_steps.context(rd, protocol, str(root))
        waits = next_steps.waiting(t, c, protocol)
        checks = next_steps.commands(waits)
        way_out = (*checks, next_steps.publish_command(c, waits)) if checks else ()
    threshold = protocol.diagnostics.threshold
    sha256 = rd.manifest().protocol_sha256
    spreads = aa.spreads(t.aa)
    found = against_shipped(rd.root / PROTOCOL)
    return Side(
        root, sha256, t.configurations, step_s, threshold, spreads, t.preview, way_out, found,
        flagged=flags.by_config(t.runs), aa_not_level=flags.aa_words(t.aa),
    )  # fmt: skip


def _state(row: pd.Series) -> str:
    """The configuration's state: the tables' own where they give one, else from its runs."""
    state = row.get("state")
    if isinstance(state, str) and state:
        return state
    if row.get("out_of_memory"):
        return "out of memory"
    return "complete" if not math.isnan(float(row["median_step_s"])) else "no time"


def _shown(row: pd.Series) -> str:
    """The state, or why rule 6 withholds a complete configuration's time."""
    publication = row.get("publication")
    if _state(row) == "complete" and isinstance(publication, str):
        if Publication.of(publication) is Publication.WITHHELD:
            return publication
    return _state(row)


def _timed(row: pd.Series | None) -> Timed | None:
    if row is None or _state(row) != "complete" or math.isnan(float(row["median_step_s"])):
        return None  # no time (§5), or one rule 6 withholds
    return Timed(
        median=float(row["median_step_s"]),
        min=float(row["min_step_s"]),
        max=float(row["max_step_s"]),
    )


def aa_or_range_spread(t: Timed, aa_spread: float | None = None) -> float:
    """How far one side's runs of a configuration spread, relative to its median: its A/A
    spread (the largest difference between a configuration and its identical twin in one A/A
    round, kit.report.aa) where the series measured one, else half its timed runs' range."""
    if aa_spread is not None:
        return aa_spread
    return (t["max"] - t["min"]) / t["median"] / 2


def _spread_words(aa_a: float | None, aa_b: float | None) -> str:
    """What the combined spread is made of: A/A spreads, ranges, or one of each."""
    if aa_a is None and aa_b is None:
        return "the runs' ranges"
    if aa_a is not None and aa_b is not None:
        return "the two sides' A/A spreads"
    return "one side's A/A spread and the other's range"


def _bounds(
    a_s: Sequence[float], b_s: Sequence[float], ta: Timed, tb: Timed
) -> tuple[intervals.Interval | None, float, float, str]:
    """The ratio B / A's bounds and how they are said: the bootstrap interval from
    intervals.MIN_RUNS runs a side (docs/benchmarks.md: below it the interval holds the true
    ratio far less often than it claims), else the ranges' bounds, B's fastest over A's slowest
    and B's slowest over A's fastest."""
    runs = min(len(a_s), len(b_s))
    if runs >= intervals.MIN_RUNS:
        iv = intervals.ratio_interval(b_s, a_s)
        return iv, iv.low, iv.high, f"{iv.level:.0%} interval {iv.low:.3f}–{iv.high:.3f}"
    low, high = tb["min"] / ta["max"], tb["max"] / ta["min"]
    return None, low, high, f"{intervals.no_interval(runs)}; the ranges give {low:.3f}–{high:.3f}"


def classify(
    a_s: Sequence[float],
    b_s: Sequence[float],
    ta: Timed,
    tb: Timed,
    threshold: float,
    aa_spreads: tuple[float | None, float | None] = (None, None),
    conditions: Sequence[str] = (),
) -> tuple[str, intervals.Interval | None, str]:
    """Whether B reproduces A: `faster` or `slower` when the bounds of B / A (the interval, or
    below intervals.MIN_RUNS runs a side the ranges) lie clear of 1 by more than the threshold
    and the difference beyond the two sides' spreads, `same` when the difference lies within the
    two sides' combined spreads (their A/A spreads where measured, else their ranges; or under
    the threshold), `ambiguous` when neither, or whatever the numbers say when `conditions`
    (flagged runs, an A/A not level) name why they cannot be taken at their word."""
    ratio = float(np.median(b_s) / np.median(a_s))
    iv, low, high, shown = _bounds(a_s, b_s, ta, tb)
    spread = aa_or_range_spread(ta, aa_spreads[0]) + aa_or_range_spread(tb, aa_spreads[1])
    spread_words = _spread_words(*aa_spreads)
    difference = abs(ratio - 1)
    beyond = iv is not None or difference > spread  # without an interval the spreads decide too
    if low > 1 + threshold and beyond:
        verdict = SLOWER
        reason = f"B slower by {intervals.percent(ratio)}; {shown}, above 1 + {threshold:.1%}"
    elif high < 1 - threshold and beyond:
        verdict = FASTER
        reason = f"B faster by {intervals.percent(ratio)}; {shown}, below 1 − {threshold:.1%}"
    elif difference <= max(spread, threshold):
        within = spread_words if difference <= spread else f"the threshold {threshold:.1%}"
        verdict, reason = SAME, f"difference {intervals.percent(ratio)}, within {within}"
    else:
        verdict = AMBIGUOUS
        reason = (
            f"difference {intervals.percent(ratio)} beyond {spread_words} ({spread:.1%}), "
            f"but {shown}, not clear of 1 ± {threshold:.1%}"
        )
    if conditions:  # §5's flags: the numbers may be the machine's, whatever they read
        reason = f"{'; '.join(conditions)}; the numbers alone read {verdict}: {reason}"
        verdict = AMBIGUOUS
    return verdict, iv, reason


def _conditions(e: Compared) -> list[str]:
    """Why a configuration's numbers cannot be taken at their word: its flagged runs on either
    side, either side's A/A not level."""
    said = [
        f"{name}: {text}"
        for name, text in (
            ("A", e["flagged_a"]),
            ("B", e["flagged_b"]),
            ("A's series", e["aa_not_level_a"]),
            ("B's series", e["aa_not_level_b"]),
        )
        if text
    ]
    return said


def _no_time(ta: Timed | None, tb: Timed | None, state_a: str, state_b: str) -> str:
    if ta is None and tb is None:
        return f"no time on either side (A: {state_a}; B: {state_b})"
    return f"no time in A: {state_a}" if ta is None else f"no time in B: {state_b}"


def _compared(
    key: tuple, ra: pd.Series, rb: pd.Series, a: Side, b: Side, threshold: float
) -> Compared:
    """One configuration both directories ran: both states and times, their ratio, whether
    their ranges overlap, and the class."""
    model, precision, side, variant = key  # KEY's order
    ta, tb = _timed(ra), _timed(rb)
    ca, cb = str(ra["config"]), str(rb["config"])
    entry = Compared(
        model=model,
        precision=precision,
        side=side,
        variant=variant,
        card_a=ra["card"],
        card_b=rb["card"],
        state_a=_shown(ra),
        state_b=_shown(rb),
        has_time_a=has_time(ra),
        has_time_b=has_time(rb),
        a_s=ta,
        b_s=tb,
        ranges_overlap=None,
        runs_a=len(a.step_s.get(ca, ())) if ta else 0,
        runs_b=len(b.step_s.get(cb, ())) if tb else 0,
        ratio_b_over_a=None,
        interval_b_over_a=None,
        interval_level=None,
        verdict=None,
        reason="",
        aa_spread_a=a.aa_spread.get(ca),
        aa_spread_b=b.aa_spread.get(cb),
        flagged_a=a.flagged.get(ca) or None,
        flagged_b=b.flagged.get(cb) or None,
        aa_not_level_a=a.aa_not_level or None,
        aa_not_level_b=b.aa_not_level or None,
    )
    if not (ta and tb):
        entry["reason"] = _no_time(ta, tb, entry["state_a"], entry["state_b"])
        return entry
    entry["ranges_overlap"] = ta["min"] <= tb["max"] and tb["min"] <= ta["max"]
    verdict, iv, reason = classify(
        a.step_s[ca],
        b.step_s[cb],
        ta,
        tb,
        threshold,
        (entry["aa_spread_a"], entry["aa_spread_b"]),
        _conditions(entry),
    )
    entry["ratio_b_over_a"] = float(np.median(b.step_s[cb]) / np.median(a.step_s[ca]))
    if iv is not None:
        entry["interval_b_over_a"] = (iv.low, iv.high)
        entry["interval_level"] = iv.level
    entry["verdict"] = verdict
    entry["reason"] = reason
    return entry


def has_time(row: pd.Series) -> bool:
    """Whether a configuration has a time (§5: every planned timed run ok), shown or withheld."""
    return _state(row) == "complete"


def compare(
    a: Side,
    b: Side,
    *,
    allow_protocol_change: bool = False,
    preview: bool = False,
    threshold: float | None = None,
) -> Comparison:
    """Per configuration in both: both medians and ranges, their ratio, whether ranges overlap,
    and whether B reproduces A (`threshold`: the smallest difference worth a word; by default
    A's protocol's [diagnostics] threshold)."""
    threshold = a.threshold if threshold is None else threshold
    changed = a.protocol_sha256 != b.protocol_sha256
    if changed and not allow_protocol_change:
        raise UserError(
            f"{a.root} and {b.root} ran under different protocols "
            f"({a.protocol_sha256[:12]}… and {b.protocol_sha256[:12]}…)",
            "compare directories of one protocol, or pass --allow-protocol-change to compare "
            "them anyway (the comparison then says so)",
        )
    rows_a = {tuple(r[k] for k in KEY): r for _, r in a.configurations.iterrows()}
    rows_b = {tuple(r[k] for k in KEY): r for _, r in b.configurations.iterrows()}
    both: list[Compared] = []
    only_a: list[OnlyIn] = []
    only_b: list[OnlyIn] = []
    for key in sorted(set(rows_a) | set(rows_b)):
        ra, rb = rows_a.get(key), rows_b.get(key)
        model, precision, side, variant = key  # KEY's order
        if ra is None or rb is None:
            present = ra if ra is not None else rb
            assert present is not None  # the key came from one of the two
            (only_a if rb is None else only_b).append(
                OnlyIn(
                    model=model,
                    precision=precision,
                    side=side,
                    variant=variant,
                    card=present["card"],
                    has_time=has_time(present),
                )
            )
            continue
        both.append(_compared(key, ra, rb, a, b, threshold))
    return Comparison(
        schema_version=SCHEMA,
        a=str(a.root),
        b=str(b.root),
        protocol_changed=changed,
        protocol_a=_shipped_json(a),
        protocol_b=_shipped_json(b),
        preview=preview or a.preview or b.preview,
        both=both,
        only_in_a=only_a,
        only_in_b=only_b,
        threshold=threshold,
        way_out=list(dict.fromkeys([*a.way_out, *b.way_out])),
    )


def _shipped_json(side: Side) -> ShippedJson:
    """A side's protocol against the shipped one; by its hash alone where the side was read
    without its protocol file (no key is named then)."""
    found = side.shipped or Shipped(side.protocol_sha256, shipped_sha256(), ())
    return found.to_json()

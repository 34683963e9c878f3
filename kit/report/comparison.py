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
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TypedDict

import pandas as pd

from kit.errors import UserError
from kit.measure import timing
from kit.protocol.shipped import Changed, Shipped, ShippedJson, against_shipped, shipped_sha256
from kit.report import aa, intervals, next_steps, tables
from kit.report.states import Publication
from kit.results import audit
from kit.results.store import PROTOCOL, ResultsDir, load_protocol

# 2: each configuration's class, the interval of B / A and the reason; 3: its key "schema_version",
# and each side's A/A spread (kit.report.aa) where its series measured one; 4: each directory's
# protocol against the one the kit ships (kit.protocol.shipped)
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
    a_s: Timed | None
    b_s: Timed | None
    ratio_a_over_b: float | None
    ranges_overlap: bool | None
    # whether B reproduces A (the kit's diagnostic, in nvbench's manner): same, faster, slower,
    # ambiguous; None where a side has no time. The interval is of B's median over A's.
    ratio_b_over_a: float | None
    interval_b_over_a: tuple[float, float] | None
    interval_level: float | None
    verdict: str | None
    reason: str
    # each side's A/A spread of this configuration (the largest distance of an A/A round's
    # ratio from 1); None where its series ran no A/A runs of it, and its range stands instead
    aa_spread_a: float | None
    aa_spread_b: float | None


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
        root, sha256, t.configurations, step_s, threshold, spreads, t.preview, way_out, found
    )


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


def classify(
    a_s: Sequence[float],
    b_s: Sequence[float],
    ta: Timed,
    tb: Timed,
    threshold: float,
    aa_spreads: tuple[float | None, float | None] = (None, None),
) -> tuple[str, intervals.Interval, str]:
    """Whether B reproduces A: `faster` or `slower` when the interval of B / A lies clear of 1
    by more than the threshold, `same` when the difference lies within the two sides' combined
    spreads (their A/A spreads where measured, else their ranges; or under the threshold),
    `ambiguous` when neither."""
    iv = intervals.ratio_interval(b_s, a_s)
    spread = aa_or_range_spread(ta, aa_spreads[0]) + aa_or_range_spread(tb, aa_spreads[1])
    spread_words = _spread_words(*aa_spreads)
    shown = f"{iv.level:.0%} interval {iv.low:.3f}–{iv.high:.3f}"
    if iv.high < 1 - threshold:
        return (
            FASTER,
            iv,
            f"B faster by {intervals.percent(iv.ratio)}; {shown} below 1 − {threshold:.1%}",
        )
    if iv.low > 1 + threshold:
        return (
            SLOWER,
            iv,
            f"B slower by {intervals.percent(iv.ratio)}; {shown} above 1 + {threshold:.1%}",
        )
    difference = abs(iv.ratio - 1)
    if difference <= max(spread, threshold):
        within = spread_words if difference <= spread else f"the threshold {threshold:.1%}"
        return SAME, iv, f"difference {intervals.percent(iv.ratio)}, within {within}"
    return (
        AMBIGUOUS,
        iv,
        (
            f"difference {intervals.percent(iv.ratio)} beyond {spread_words} ({spread:.1%}), "
            f"but the {shown} is not clear of 1 ± {threshold:.1%}"
        ),
    )


def _compared(
    key: tuple, ra: pd.Series, rb: pd.Series, a: Side, b: Side, threshold: float
) -> Compared:
    """One configuration both directories ran: both states and times, their ratio, and whether
    their ranges overlap."""
    model, precision, side, variant = key  # KEY's order
    ta, tb = _timed(ra), _timed(rb)
    entry = Compared(
        model=model,
        precision=precision,
        side=side,
        variant=variant,
        card_a=ra["card"],
        card_b=rb["card"],
        state_a=_shown(ra),
        state_b=_shown(rb),
        a_s=ta,
        b_s=tb,
        ratio_a_over_b=None,
        ranges_overlap=None,
        ratio_b_over_a=None,
        interval_b_over_a=None,
        interval_level=None,
        verdict=None,
        reason="no time on one side" if not (ta and tb) else "",
        aa_spread_a=a.aa_spread.get(str(ra["config"])),
        aa_spread_b=b.aa_spread.get(str(rb["config"])),
    )
    if ta and tb:
        entry["ratio_a_over_b"] = ta["median"] / tb["median"]
        entry["ranges_overlap"] = ta["min"] <= tb["max"] and tb["min"] <= ta["max"]
        verdict, iv, reason = classify(
            a.step_s[str(ra["config"])],
            b.step_s[str(rb["config"])],
            ta,
            tb,
            threshold,
            (entry["aa_spread_a"], entry["aa_spread_b"]),
        )
        entry["ratio_b_over_a"] = iv.ratio
        entry["interval_b_over_a"] = (iv.low, iv.high)
        entry["interval_level"] = iv.level
        entry["verdict"] = verdict
        entry["reason"] = reason
    return entry


def slower_than(result: Comparison, fail_slower: float) -> list[Compared]:
    """The configurations where B is slower than A by more than `fail_slower` (0.02 is 2%),
    its interval of B / A clear of 1 + fail_slower: `--fail-slower`'s gate."""
    return [
        e
        for e in result["both"]
        if e["interval_b_over_a"] is not None and e["interval_b_over_a"][0] > 1 + fail_slower
    ]


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


def _shipped_lines(result: Comparison) -> list[str]:
    """Where a directory's protocol is not the one the kit ships: said first, key by key."""
    lines = []
    for name, found in (("A", result["protocol_a"]), ("B", result["protocol_b"])):
        if found["shipped"]:
            continue
        lines.append(
            f"**{name} ran under a protocol the kit does not ship** (SHA-256 "
            f"{found['sha256'][:12]}…, the shipped one's {found['shipped_sha256'][:12]}…):"
        )
        lines.append("")
        lines += [
            f"- {Changed(c['key'], c['shipped'], c['here']).line()}" for c in found["differences"]
        ] or ["- its text differs from the shipped file's (comments or layout); no key does"]
        lines.append("")
    return lines


def _ms(t: Timed | None, state: str) -> str:
    if t is None:
        return state
    return f"{t['median'] * 1e3:.3f} ms ({t['min'] * 1e3:.3f}–{t['max'] * 1e3:.3f})"


def _interval(e: Compared) -> str:
    if e["ratio_b_over_a"] is None or e["interval_b_over_a"] is None:
        return "—"
    low, high = e["interval_b_over_a"]
    return f"{e['ratio_b_over_a']:.3f} ({low:.3f}–{high:.3f})"


def markdown(result: Comparison) -> str:
    """The comparison as a Markdown table, with what is in one directory only."""
    title = f"# {result['a']} (A) against {result['b']} (B)"
    if not (result["protocol_a"]["shipped"] and result["protocol_b"]["shipped"]):
        title += " — not the protocol the kit ships"
    if result.get("preview"):
        title += " — preparation: not a protocol result"
    lines = [title, "", *_shipped_lines(result)]
    if result["protocol_changed"]:
        lines += [
            "**The two directories ran under different protocols** (--allow-protocol-change).",
            "",
        ]
    lines += [
        "Step time per configuration: median (range, fastest to slowest), recomputed from each "
        "directory's raw logs. A configuration without a time shows its state.",
        "",
        "B against A, the kit's diagnostic (outside §10): `same` where the difference lies "
        "within the two sides' A/A spreads (their ranges where a series ran no A/A runs), "
        "`faster` or `slower` where the bootstrap interval of B / A "
        f"lies clear of 1 by more than {result['threshold']:.1%}, `ambiguous` otherwise.",
        "",
        "| model | precision | side | variant | card A | card B | A | B | A / B | ranges overlap "
        "| B | B / A (interval) | why |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for e in result["both"]:
        ratio = f"{e['ratio_a_over_b']:.3f}" if e["ratio_a_over_b"] is not None else "—"
        overlap = {True: "yes", False: "no", None: "—"}[e["ranges_overlap"]]
        lines.append(
            f"| {e['model']} | {e['precision']} | {e['side']} | {e['variant']} | {e['card_a']} "
            f"| {e['card_b']} | {_ms(e['a_s'], e['state_a'])} | {_ms(e['b_s'], e['state_b'])} "
            f"| {ratio} | {overlap} | {e['verdict'] or '—'} | {_interval(e)} | {e['reason']} |"
        )
    lines += _withheld_lines(result)
    for name, only in (("A", result["only_in_a"]), ("B", result["only_in_b"])):
        if only:
            lines += ["", f"Only in {name}:", ""]
            lines += [
                f"- {o['model']} · {o['precision']} · {o['side']} · {o['variant']} ({o['card']})"
                for o in only
            ]
    return "\n".join(lines) + "\n"


def _withheld_lines(result: Comparison) -> list[str]:
    """Rule 6's way out, where it withholds a time: `--preview`, or the checks that give it."""
    states = [x for e in result["both"] for x in (e["state_a"], e["state_b"])]
    if not any(Publication.of(x) is Publication.WITHHELD for x in states):
        return []
    lines = [
        "",
        "Rule 6 withholds the times of configurations whose correctness check has not passed. "
        f"`micakit compare {result['a']} {result['b']} --preview` shows them, labelled "
        "preparation: not a protocol result.",
    ]
    if result.get("way_out"):
        lines += ["", "The checks that give them a verdict, then the verdicts gated by them:", ""]
        lines += [f"    {x}" for x in result["way_out"]]
    return lines

"""§5's flags said where the numbers are: which timed runs were measured under conditions that
can move a step time (a busy machine, a throttled card, clocks that differed), in a few words.

The flags themselves are the tables' (kit.report.sidetables.flags, recomputed from each run's
raw samples); this module only counts and words them, for the terminal's result block,
report.md's summary, report.html's first screen, the step-time plot, summary.json's
`conditions` and `micakit compare`.
"""

from __future__ import annotations

import functools
import re

import pandas as pd

from kit.report import aa

# a flag reason's details (its figures, in brackets or after a colon) left out of its kind
_DETAIL = re.compile(r"\s*[:(].*$")


@functools.lru_cache(maxsize=4096)  # a busy series' 15,000 reasons are a few hundred texts
def _kind(reason: str) -> str:
    """A flag reason's kind: "measured on a busy machine", "thermal clock event", ..."""
    kind = _DETAIL.sub("", reason.strip())
    if kind.startswith("sm clock") and "below" in kind:
        return "sm clock below the configuration's median"
    return kind


def kinds(reasons: pd.Series) -> list[str]:
    """The kinds of flag among `reasons` (each "; "-joined), once each, in order."""
    found = [_kind(part) for r in reasons for part in str(r).split("; ") if part.strip()]
    return list(dict.fromkeys(found))


def _others_share(runs: pd.DataFrame) -> float | None:
    """The largest share of the CPUs other processes took before or during these runs."""
    shares = [
        pd.to_numeric(runs[c], errors="coerce")
        for c in ("others_cpu_share_before", "others_cpu_share")
        if c in runs
    ]
    if not shares:
        return None
    top = pd.concat(shares).max()
    return None if pd.isna(top) else float(top)


def timed(runs: pd.DataFrame) -> pd.DataFrame:
    """The timed runs, with their flags (the tables' `flagged` and `flag_reasons`)."""
    return runs[runs["kind"] == "timed"]


def words(runs: pd.DataFrame) -> str:
    """ "3 of 4 timed runs flagged: measured on a busy machine (others used up to 99% of the
    CPUs)" for these runs; "" where none is flagged."""
    t = timed(runs)
    flagged = t[t["flagged"]] if "flagged" in t else t.iloc[0:0]
    if flagged.empty:
        return ""
    said = "; ".join(kinds(flagged["flag_reasons"]))
    share = _others_share(flagged)
    if share is not None and "busy machine" in said:
        said += f" (others used up to {share:.0%} of the CPUs)"
    return f"{len(flagged)} of {len(t)} timed runs flagged: {said}"


def by_config(runs: pd.DataFrame) -> dict[str, str]:
    """Each configuration's flag words, where one of its timed runs is flagged."""
    found = {str(c): words(g) for c, g in timed(runs).groupby("config")}
    return {c: w for c, w in found.items() if w}


def flagged_runs(runs: pd.DataFrame) -> list[dict[str, object]]:
    """summary.json's conditions.flagged_runs: each flagged timed run, its configuration and
    the reason."""
    t = timed(runs)
    if "flagged" not in t:
        return []
    f = t[t["flagged"]]
    # by column, not `iterrows` (a Series made per row: seconds for a busy 15,000-run series)
    return [
        {"run_id": int(i), "config": str(c), "reason": str(r)}
        for i, c, r in zip(f["run_id"], f["config"], f["flag_reasons"])
    ]


def aa_words(aa_table: pd.DataFrame | None) -> str:
    """Why the series' A/A is not level ("" where it is, or where it ran none)."""
    return aa.title_label(aa_table)


def headline(runs: pd.DataFrame, aa_table: pd.DataFrame | None = None) -> str:
    """One line for the first thing a reader sees: the flagged runs and the A/A, and what that
    means for the numbers beside it; "" where nothing is flagged."""
    said = [x for x in (words(runs), aa_words(aa_table)) if x]
    if not said:
        return ""
    return (
        "Conditions: " + "; ".join(said) + ": a difference may be the machine's, not the program's"
    )

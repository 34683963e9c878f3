"""A/A: how far two runs of one program differ on this card, the kit's diagnostic outside §10.

After the protocol's rounds, a series run with `--aa` runs each chosen configuration again
beside its identical twin (`<config>~aa`), in as many A/A rounds as timed rounds, the twin first
in odd rounds and the configuration first in even ones (kit.engine's plan). Nothing here enters
D1's tables, verdicts or `merge`: every other table reads only the timed runs.

Per chosen configuration, from the runs the tables judge again from the raw logs:
- the ratio of the twin's median to the configuration's A/A median, with its bootstrap interval
  (intervals.py, scipy.stats), and the round ratios (twin over configuration in each round):
  their range and the largest change from one round to the next (a run's position in its
  round shows there, the rounds alternating who goes first);
- the A/A spread, the largest |round ratio − 1|, beside the spread of the configuration's timed
  rounds, half their range over their median (as `micakit compare` reads a side without A/A);
- a flag where the ratio is further from 1 than the protocol's `[diagnostics]` threshold, or
  where the A/A runs' range and the timed runs' range do not overlap: the report's title then
  says "A/A not level on this card".

Only relative figures reach the report (rule 6 withholds an unchecked configuration's time; a
ratio of a program to itself says nothing of its speed); `tables/aa.csv` carries every digit,
as `tables/runs.csv` does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from kit.measure import timing
from kit.report import intervals
from kit.results.documents import Plan
from kit.results.planned import AA, AA_KINDS, AA_TWIN, TIMED, twin_name

TITLE = "A/A not level on this card"
NAME = "aa"  # tables/aa.csv
COLUMNS = [
    "config", "twin", "card", "model", "precision", "side", "variant", "aa_runs",
    "config_median_step_s", "twin_median_step_s", "ratio", "ratio_interval_low",
    "ratio_interval_high", "ratio_min", "ratio_max", "round_to_round_max", "aa_spread",
    "timed_spread", "aa_min_step_s", "aa_max_step_s", "timed_min_step_s", "timed_max_step_s",
    "flagged", "flag_reasons",
]  # fmt: skip


def chosen(plan: Plan) -> list[str]:
    """The configurations the plan runs A/A (plan.json's `aa`), else those of its A/A runs."""
    return list(plan.aa) or list(dict.fromkeys(r.config for r in plan.order if r.kind in AA_KINDS))


def _ok(runs: pd.DataFrame, config: str, kind: str) -> pd.Series:
    """A configuration's ok runs of one kind: step times indexed by round."""
    mine = runs[(runs["config"] == config) & (runs["kind"] == kind)]
    mine = mine[mine["status"] == timing.OK]
    return mine.set_index("round")["step_s"].astype(float)


def _spread(s: np.ndarray) -> float:
    """Half the range over the median: how `micakit compare` reads a side without A/A."""
    return float((s.max() - s.min()) / np.median(s) / 2) if len(s) else math.nan


def _reasons(row: Mapping[str, Any], threshold: float) -> list[str]:
    """Why a configuration's A/A is not level: its ratio, or its runs apart from the timed."""
    out = []
    ratio = row["ratio"]
    if not math.isnan(ratio) and abs(ratio - 1) > threshold:
        out.append(f"ratio {ratio:.3f}, further from 1 than {threshold:.1%}")
    aa_lo, aa_hi = row["aa_min_step_s"], row["aa_max_step_s"]
    t_lo, t_hi = row["timed_min_step_s"], row["timed_max_step_s"]
    if not any(math.isnan(x) for x in (aa_lo, aa_hi, t_lo, t_hi)):
        if aa_hi < t_lo or t_hi < aa_lo:
            middle = ((aa_lo + aa_hi) / 2) / ((t_lo + t_hi) / 2)
            out.append(
                f"its A/A runs and its timed runs do not overlap (the A/A range's middle "
                f"{middle:.3f}× the timed range's)"
            )
    return out


def of_config(runs: pd.DataFrame, config: str, threshold: float) -> dict[str, Any]:
    """One configuration's A/A row: the twin over the configuration, round by round and by
    medians, and the spreads beside its timed rounds'."""
    own, twin = _ok(runs, config, AA), _ok(runs, config, AA_TWIN)
    timed = _ok(runs, config, TIMED).to_numpy()
    rounds = sorted(set(own.index) & set(twin.index))
    ratios = twin[rounds].to_numpy() / own[rounds].to_numpy()
    both = np.concatenate([own.to_numpy(), twin.to_numpy()])
    # a bootstrap needs two runs a side; with one (a one-round check) the ratio stands alone
    resampled = len(own) > 1 and len(twin) > 1
    iv = intervals.ratio_interval(twin.to_numpy(), own.to_numpy()) if resampled else None
    nan = math.nan
    row: dict[str, Any] = {
        "config": config,
        "twin": twin_name(config),
        "aa_runs": len(both),
        "config_median_step_s": float(np.median(own)) if len(own) else nan,
        "twin_median_step_s": float(np.median(twin)) if len(twin) else nan,
        "ratio": float(np.median(twin) / np.median(own)) if len(own) and len(twin) else nan,
        "ratio_interval_low": iv.low if iv else nan,
        "ratio_interval_high": iv.high if iv else nan,
        "ratio_min": float(ratios.min()) if len(ratios) else nan,
        "ratio_max": float(ratios.max()) if len(ratios) else nan,
        "round_to_round_max": float(np.abs(np.diff(ratios)).max()) if len(ratios) > 1 else nan,
        "aa_spread": float(np.abs(ratios - 1).max()) if len(ratios) else nan,
        "timed_spread": _spread(timed),
        "aa_min_step_s": float(both.min()) if len(both) else nan,
        "aa_max_step_s": float(both.max()) if len(both) else nan,
        "timed_min_step_s": float(timed.min()) if len(timed) else nan,
        "timed_max_step_s": float(timed.max()) if len(timed) else nan,
    }
    reasons = _reasons(row, threshold)
    return row | {"flagged": bool(reasons), "flag_reasons": "; ".join(reasons)}


def table(runs: pd.DataFrame, plan: Plan, threshold: float) -> pd.DataFrame | None:
    """tables/aa.csv: one row per chosen configuration; None for a series without A/A runs
    (no file is made, so a directory of an earlier kit is never asked for one)."""
    ids = chosen(plan)
    if not ids:
        return None
    by_id = plan.by_id
    rows = []
    for config in ids:
        row = of_config(runs, config, threshold)
        c = by_id.get(config)
        names = (c.card, c.model, c.precision, c.side, c.variant) if c else ("",) * 5
        rows.append(row | dict(zip(("card", "model", "precision", "side", "variant"), names)))
    return pd.DataFrame(rows, columns=COLUMNS)


def spreads(aa: pd.DataFrame | None) -> dict[str, float]:
    """Each configuration's A/A spread, where it has one."""
    if aa is None:
        return {}
    return {str(c): float(s) for c, s in zip(aa["config"], aa["aa_spread"]) if not math.isnan(s)}


def spread_beside(aa: pd.DataFrame | None, sides: Sequence[str]) -> float | None:
    """This card's A/A spread beside a comparison of `sides` (configuration ids): the larger of
    the two sides' own where measured; else the largest of their model and precision's chosen
    configurations (PyTorch's A/A runs its default mode, the fastest may be another); None
    where the series measured none."""
    found = spreads(aa)
    own = [found[s] for s in sides if s in found]
    if own:
        return max(own)
    prefixes = {"/".join(s.split("/")[:2]) + "/" for s in sides}
    near = [v for c, v in found.items() if any(c.startswith(p) for p in prefixes)]
    return max(near) if near else None


def title_label(aa: pd.DataFrame | None) -> str:
    """What every report's title says where a configuration's A/A is not level; "" if none."""
    if aa is None:
        return ""
    flagged = aa[aa["flagged"]]
    if flagged.empty:
        return ""
    said = "; ".join(f"{r['config']}, {r['flag_reasons']}" for _, r in flagged.iterrows())
    return f"{TITLE}: {said}"


def _ratio(x: float, digits: int = 3) -> str:
    return "—" if math.isnan(x) else f"{x:.{digits}f}"


def _share(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.1%}"


def lines(aa: pd.DataFrame | None, threshold: float, named: list[str], caption: str) -> list[str]:
    """report.md's A/A section; nothing for a series without A/A runs. `named`: each row's
    configuration as §9 names it; `caption`: the table's caption with the series' labels."""
    if aa is None:
        return []
    rows = [
        {
            "configuration": r["config"],
            "named (§9)": name,
            "twin": r["twin"],
            "A/A runs": r["aa_runs"],
            "twin / configuration (95% interval)": f"{_ratio(r['ratio'])} "
            f"({_ratio(r['ratio_interval_low'])}–{_ratio(r['ratio_interval_high'])})",
            "round by round": f"{_ratio(r['ratio_min'])}–{_ratio(r['ratio_max'])}",
            "largest round-to-round change": _ratio(r["round_to_round_max"]),
            "A/A spread": _share(r["aa_spread"]),
            "timed rounds' spread": _share(r["timed_spread"]),
            "flagged": f"yes: {r['flag_reasons']}" if r["flagged"] else "no",
        }
        for name, (_, r) in zip(named, aa.iterrows())
    ]
    flagged = int(aa["flagged"].sum())
    return [
        "## A/A: this card's own noise (the kit's diagnostic, outside §10)",
        "",
        f"**{flagged} of {len(aa)} A/A configurations flagged** (the title names them)."
        if flagged
        else f"None of the {len(aa)} A/A configurations is flagged.",
        "",
        "After the timed rounds each chosen configuration ran again beside its identical twin "
        "(the same command, named `<config>~aa`), as many A/A rounds as timed rounds, the twin "
        "first in odd rounds and the configuration first in even ones. The ratio is the twin's "
        "median over the configuration's A/A median; round by round, the twin over the "
        "configuration in each round. The A/A spread (the largest distance of a round's ratio "
        "from 1) is set beside the spread of the configuration's timed rounds (half their range "
        "over their median). A configuration is flagged where its ratio is further from 1 than "
        f"the protocol's [diagnostics] threshold ({threshold:.1%}), or where its A/A runs and "
        "its timed runs do not overlap. A/A runs enter no verdict (D1). Every digit is in "
        "`tables/aa.csv`.",
        "",
        caption,
        "",
        pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True),
        "",
    ]


RUN_FIELDS = ["run_id", "round", "kind", "status", "step_s"]  # summary.json's aa[].runs


def runs_of(runs: pd.DataFrame, config: str) -> pd.DataFrame:
    """A configuration's A/A runs, the twin's and its own, in the plan's order."""
    return runs[(runs["config"] == config) & runs["kind"].isin(AA_KINDS)][RUN_FIELDS]

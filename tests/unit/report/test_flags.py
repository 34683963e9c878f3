"""§5's flags, read by column (kit.report.flags.flagged_runs, the configurations' notes in
kit.report.tables): the same values, of the same Python types, as a row at a time gave, for
a series whose every timed run is flagged as for one with none."""

from __future__ import annotations

import json

import pandas as pd

from kit.report import flags

BUSY = "measured on a busy machine: others used 48% of the CPUs"


def _runs(flagged: list[bool]) -> pd.DataFrame:
    n = len(flagged)
    return pd.DataFrame(
        {
            "run_id": list(range(3, 3 + n)),
            "config": ["m/float32/contender/mica"] * n,
            "kind": ["timed"] * n,
            "flagged": flagged,
            "flag_reasons": [BUSY if f else "" for f in flagged],
            "step_s": [0.001 * (i + 1) for i in range(n)],  # a float column beside them
        }
    )


def _row_by_row(runs: pd.DataFrame) -> list[dict[str, object]]:
    t = runs[runs["kind"] == "timed"]
    return [
        {"run_id": int(r["run_id"]), "config": str(r["config"]), "reason": str(r["flag_reasons"])}
        for _, r in t[t["flagged"]].iterrows()
    ]


def test_each_flagged_timed_run_is_listed_as_a_row_at_a_time_listed_it():
    runs = _runs([True, False, True, True])
    runs.loc[len(runs)] = [9, "m/float32/contender/mica", "discarded", True, BUSY, 0.5]
    found = flags.flagged_runs(runs)
    assert found == _row_by_row(runs)
    assert [f["run_id"] for f in found] == [3, 5, 6]  # the discarded run is no timed run
    assert all(type(f["run_id"]) is int for f in found)  # JSON's, not numpy's
    json.dumps(found, allow_nan=False)  # summary.json holds them


def test_a_series_without_flags_lists_none():
    assert flags.flagged_runs(_runs([False, False])) == []
    assert flags.flagged_runs(_runs([True]).drop(columns="flagged")) == []

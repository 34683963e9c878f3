"""The clock columns through a series: published in runs.csv and summary.json, recomputed by
`verify`, which stays clean on a directory an older kit wrote (without them)."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd

from kit.report import clocks, publish, summary, tables
from kit.results import audit
from kit.results.store import ResultsDir
from kit.results.tablefile import TABLE_SCHEMA_COLUMN
from tests.conftest import contender_args, write_protocol

ADDED = {
    "runs": [
        *clocks.COLUMNS, "mem_clock_median_mhz", "throttled_samples", "sw_power_cap_samples",
        "sw_thermal_slowdown_samples", "hw_thermal_slowdown_samples", "hw_slowdown_samples",
        "sync_boost_samples",
    ],
    "comparison": ["verdict_by_cycles", "clocks_say"],
}  # fmt: skip


def _as_an_older_kit_wrote_it(out, schema: int) -> None:
    for name, added in ADDED.items():
        path = out / "tables" / f"{name}.csv"
        table = pd.read_csv(path, keep_default_na=False, na_values=[""])
        table = table.drop(columns=added, errors="ignore")
        table[TABLE_SCHEMA_COLUMN] = schema
        table.to_csv(path, index=False, float_format="%.17g")
    path = out / "summary.json"
    document = json.loads(path.read_text())
    # the version under "schema", no kinds beside the prose (summary.json's schema 3)
    document = {"schema": 1, **{k: v for k, v in document.items() if k != "schema_version"}}
    document.pop("clocks", None)
    conditions = document.get("conditions")
    if isinstance(conditions, dict):  # before schema 4: a count of the flagged runs, unsaid
        conditions["flagged_runs"] = len(conditions.get("flagged_runs") or [])
        conditions.pop("said", None)
    for row in document["comparisons"]:  # an older kit wrote neither the clocks nor the resolution
        for key in ("verdict_by_cycles", "clocks_say", "resolution", *summary.TYPED):
            row.pop(key, None)
    for row in document["configurations"]:
        for key in summary.TYPED:
            row.pop(key, None)
    path.write_text(json.dumps(document, indent=2) + "\n")
    # its report, page and plots as that kit made them
    rd = ResultsDir.open(out)
    t = tables.tables(rd, listing=audit.refuse_if_altered(rd))
    t = dataclasses.replace(t, notes={})  # an older kit's notes name every flagged run
    # twice: the report's own words follow the report beside it (kit.report.resolution.in_pm
    # reads it), and the first rendering still found this kit's
    for _ in range(2):
        made = publish.render(rd, t, resolved=False, earlier=True, labelled=False)
        for rel, data in made.items():
            if rel != "summary.json":
                (out / rel).write_bytes(data)


def test_clock_columns_and_verify_of_an_older_directory(tmp_path, cli, fake_env):
    fake_env()
    out = tmp_path / "r"
    protocol = write_protocol(tmp_path / "protocol.toml")
    assert cli(*contender_args(out, protocol, "--precision", "float32")).exit_code == 0
    runs = pd.read_csv(out / "tables" / "runs.csv")
    timed = runs[runs["kind"] == "timed"]
    # a CPU series: the CPU's clock where the machine's samples read it, else not readable
    readable = timed["cpu_mhz_median"].notna()
    assert (timed.loc[readable, "clock_source"] == "cpu").all()
    assert (timed.loc[~readable, "clock_source"] == clocks.NOT_READABLE).all()
    assert timed["clock_window"].eq("§5 window").all()
    published = json.loads((out / "summary.json").read_text())
    assert [r["run_id"] for r in published["clocks"]] == timed["run_id"].tolist()
    assert cli("verify", out).exit_code == 0

    _as_an_older_kit_wrote_it(out, schema=1)
    result = cli("verify", out)
    assert result.exit_code == 0, result.output

    # a table that claims this kit's schema and lacks the columns is named
    _as_an_older_kit_wrote_it(out, schema=2)
    result = cli("verify", out)
    assert result.exit_code != 0 and "tables/runs.csv: columns" in result.output

"""What a series' A/A runs publish (kit/report/aa.py): tables/aa.csv, summary.json's `aa`, the
report's section and the flag in its title, recomputed by `verify`; and what they never touch:
D1's tables, `merge`, and a directory without them."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import jsonschema
import pandas as pd
import pytest

from kit.errors import ExitCode
from kit.report import publish, summary, tables
from kit.results import audit
from kit.results.store import ResultsDir
from tests.conftest import contender_args, write_protocol

pytestmark = pytest.mark.slow  # whole series

MICA = "shakespeare-char/float32/contender/mica"
F32 = ("--precision", "float32")


def _series(tmp_path, cli, fake_env, name: str, *extra: str, **fake) -> os.PathLike:
    fake_env(state=str(tmp_path / f"state-{name}"), **fake)
    out = tmp_path / name
    res = cli(*contender_args(out, write_protocol(tmp_path / "p.toml"), *F32, *extra))
    assert res.exit_code == 0, res.output
    return out


def test_a_series_with_aa_runs_publishes_their_table_and_verifies(tmp_path, cli, fake_env):
    out = _series(tmp_path, cli, fake_env, "r", "--aa", step_ms={"*": 2.0})
    aa = pd.read_csv(out / "tables" / "aa.csv")
    (row,) = aa.to_dict("records")
    assert (row["config"], row["twin"], row["aa_runs"]) == (MICA, f"{MICA}~aa", 10)
    assert row["ratio_min"] <= row["ratio"] <= row["ratio_max"]
    assert row["aa_spread"] == pytest.approx(
        max(abs(row["ratio_min"] - 1), abs(row["ratio_max"] - 1))
    )
    data = json.loads((out / summary.SUMMARY).read_text())
    jsonschema.validate(data, summary.schema())
    assert data["schema_version"] == summary.SCHEMA and "tables/aa.csv" in data["files"]["tables"]
    (entry,) = data["aa"]
    assert entry["config"] == MICA and entry["ratio"] == pytest.approx(row["ratio"])
    assert sorted((r["round"], r["kind"]) for r in entry["runs"]) == sorted(
        (n, k) for n in range(1, 6) for k in ("aa", "aa-twin")
    )
    assert all(r["step_s"] > 0 for r in entry["runs"])
    report = (out / "report.md").read_text()
    assert "## A/A: this card's own noise (the kit's diagnostic, outside §10)" in report
    assert f"| {MICA} " in report and f"{MICA}~aa" in report
    # 2 ms a step reads level on a quiet machine; a loaded one may flag it, and the title says so
    assert ("A/A not level on this card" in report.splitlines()[0]) == bool(row["flagged"])
    assert "A/A: this card's own noise" in (out / "report.html").read_text()
    assert cli("verify", out).exit_code == 0

    # the A/A table is recomputed like every table: a changed digit is named
    os.chmod(out / "tables" / "aa.csv", 0o644)
    aa.loc[0, "ratio"] = 0.5
    aa.to_csv(out / "tables" / "aa.csv", index=False)
    res = cli("verify", out)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH
    assert "tables/aa.csv" in res.output and "ratio" in res.output


def test_a_twin_run_slower_flags_every_title_and_stays_out_of_d1(tmp_path, cli, fake_env):
    # mica's starts: 1 discarded, 2-6 timed, then the A/A rounds, the twin first in odd rounds:
    # 7 twin, 8 own; 9 own, 10 twin; 11 twin, 12 own; ... three of the twin's five 20× slower
    slow = {f"mica#{n}": "slow" for n in (7, 10, 11)}
    out = _series(tmp_path, cli, fake_env, "r", "--aa", step_ms={"*": 2.0}, events=slow)
    title = (out / "report.md").read_text().splitlines()[0]
    assert f"A/A not level on this card: {MICA}, ratio " in title
    assert "further from 1 than 1.0%" in title
    html = (out / "report.html").read_text()
    assert f"<title>{title.lstrip('# ')}</title>".replace("&", "&amp;") in html
    (row,) = json.loads((out / summary.SUMMARY).read_text())["aa"]
    assert row["flagged"] and row["ratio"] > 10
    # D1's tables and merge read the timed runs alone: five of 2 ms a step, not the 40 ms ones (rule 6
    # withholds a time no check has passed, unless previewed)
    assert cli("publish", out, "--preview").exit_code == 0
    (conf,) = pd.read_csv(out / "tables" / "configurations.csv").to_dict("records")
    assert conf["runs"] == 5 and conf["max_step_s"] < 0.01 and not conf["out_of_memory"]
    timed = pd.read_csv(out / "tables" / "runs.csv").query("kind == 'timed'")
    assert conf["median_step_s"] == pytest.approx(timed["step_s"].median())
    assert cli("verify", out).exit_code == 0
    merged = cli("merge", out, "--out", tmp_path / "release")
    assert merged.exit_code == 0, merged.output
    assert "~aa" not in "".join(p.read_text() for p in (tmp_path / "release").rglob("*.csv"))
    assert "A/A" not in "".join(p.read_text() for p in (tmp_path / "release").rglob("*.md"))


def test_a_series_without_aa_runs_has_no_table_and_an_older_summary_verifies(
    tmp_path, cli, fake_env
):
    out = _series(tmp_path, cli, fake_env, "r", step_ms={"*": 2.0})
    assert not (out / "tables" / "aa.csv").exists()
    data = json.loads((out / summary.SUMMARY).read_text())
    assert data["aa"] == [] and "A/A" not in (out / "report.md").read_text()
    # summary.json as the kit before the A/A runs wrote it: schema 2, no `aa`
    # (its version under "schema", no enums beside the prose, no A/A spread in a resolution)
    older = {"schema": 2} | {k: v for k, v in data.items() if k not in ("aa", summary.VERSION_KEY)}
    for part in ("configurations", "comparisons"):
        older[part] = [{k: v for k, v in r.items() if k not in summary.TYPED} for r in older[part]]
    for row in older["comparisons"]:
        if row.get("resolution"):
            row["resolution"] = {k: v for k, v in row["resolution"].items() if k != "aa_spread"}
    # its conditions a count; its resolution contender over PyTorch, as that kit gave them
    older["conditions"] = {"flagged_runs": len(data["conditions"]["flagged_runs"])}
    os.chmod(out / summary.SUMMARY, 0o644)
    (out / summary.SUMMARY).write_text(json.dumps(older, indent=2) + "\n")
    rd = ResultsDir.open(out)
    t = tables.tables(rd, listing=audit.refuse_if_altered(rd))
    for row, then in zip(older["comparisons"], summary.build(rd, t)["comparisons"]):
        if then.get("resolution"):
            row["resolution"] = {k: v for k, v in then["resolution"].items() if k != "aa_spread"}
    (out / summary.SUMMARY).write_text(json.dumps(older, indent=2) + "\n")
    # its report, page and plots as that kit made them (its notes name every flagged run)
    older_t = dataclasses.replace(t, notes={})
    for rel, made in publish.render(rd, older_t, earlier=True, labelled=False).items():
        if rel != summary.SUMMARY:
            os.chmod(out / rel, 0o644)
            (out / rel).write_bytes(made)
    res = cli("verify", out)
    assert res.exit_code == 0, res.output


def test_compare_of_two_copies_with_aa_runs_reads_same_and_passes_the_gate(tmp_path, cli, fake_env):
    a = _series(tmp_path, cli, fake_env, "a", "--aa", step_ms={"*": 2.0})
    b = tmp_path / "copy"
    shutil.copytree(a, b)
    res = cli("compare", a, b, "--json", "--preview", "--fail-slower", "1")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["schema_version"] == 4 and data["both"]
    table = pd.read_csv(a / "tables" / "aa.csv")
    spread = table["aa_spread"].iloc[0]
    for e in data["both"]:
        assert e["aa_spread_a"] == e["aa_spread_b"] == pytest.approx(spread)
        if table["flagged"].any():  # a loaded machine: an A/A not level decides the class
            assert e["verdict"] == "ambiguous" and e["aa_not_level_a"], e["reason"]
            assert data["gate"]["undecided"]
            continue
        assert e["verdict"] == "same", e["reason"]
        assert "within the two sides' A/A spreads" in e["reason"]

"""The resolution beside every verdict (kit/report/resolution.py): in report.md and summary.json,
recomputed by `verify`, and absent from a directory published before it without troubling
`verify`."""

from __future__ import annotations

import dataclasses
import json
import os
import re

import jsonschema
import pytest

from kit.report import publish, summary, tables
from kit.results import audit
from kit.results.store import ResultsDir
from tests.conftest import (
    CONTENDER,
    edit_protocol,
    fake_nanogpt_protocol,
    pytorch_args,
    steady_series,
)

pytestmark = pytest.mark.slow  # runs a series of both sides: seconds


def test_every_verdict_has_its_resolution_and_an_older_publication_verifies(
    tmp_path, cli, fake_env
):
    protocol = fake_nanogpt_protocol(tmp_path / "p.toml")
    # one PyTorch mode: a resolution is of the fastest mode against the contender, whichever
    # mode that is (tests/cli/test_verdicts.py chooses among four)
    edit_protocol(protocol, {"pytorch.modes": ["default"], "pytorch.patched_modes": []})
    fake_env(
        step_ms={
            "default": 5.0,
            # twice as fast: its interval lies above 1 also where a loaded machine (CI's, the
            # suites at once) delays a window's first or last stamp by some milliseconds
            "mica": 2.5,
        }  # fmt: skip
    )
    out = tmp_path / "r"

    def make():
        assert cli(*pytorch_args(out, protocol, "--contender", CONTENDER)).exit_code == 0
        return out

    # made again where a loaded machine held a run up: on CI's runner one such run took the
    # interval's low end to 0.62
    steady_series(make)
    assert cli("publish", out, "--preview").exit_code == 0
    report = (out / "report.md").read_text()
    (line,) = [x for x in report.splitlines() if x.startswith("- Resolution of mica")]
    assert "(the kit's diagnostic, outside §10): ratio P/M " in line
    assert "95% interval of the ratio" in line
    # one direction: the ratio P/M the summary gives, its interval beside it around it
    data = json.loads((out / summary.SUMMARY).read_text())
    (compared,) = data["comparisons"]
    found = compared["resolution"]
    assert found["ratio"] == pytest.approx(compared["ratio"])  # P/M, above 1: contender faster
    assert 1 < found["interval_low"] <= found["ratio"] <= found["interval_high"]
    low, high = re.search(r"95% interval of the ratio ([\d.]+)–([\d.]+)", line).groups()
    assert f"ratio P/M {found['ratio']:.3f}" in line
    # as printed, three decimals each: the ratio lies within its printed interval
    shown = float(f"{found['ratio']:.3f}")
    assert float(low) <= shown <= float(high) and float(low) > 1
    cmp = json.loads(cli("compare", out, out, "--json", "--preview").stdout)
    for e in cmp["both"]:
        b_low, b_high = e["interval_b_over_a"]
        assert b_low <= e["ratio_b_over_a"] <= b_high  # B / A, its interval around it
    assert "5 of 5 favour the contender" in line
    assert "with 5 rounds no test can reach p < 0.0625" in line and "significant" not in line
    data = json.loads((out / summary.SUMMARY).read_text())
    jsonschema.validate(data, summary.schema())
    assert data["schema_version"] == summary.SCHEMA
    (found,) = [c["resolution"] for c in data["comparisons"]]
    assert found["interval_low"] > 1 and found["told_apart"] and found["paired_rounds"] == 5
    assert found["smallest_paired_p"] == pytest.approx(0.0625)
    assert (found["level"], found["resamples"]) == (0.95, 9999)
    assert cli("verify", out).exit_code == 0  # the same digits again, from the raw logs

    # a directory published before the resolution: its report and summary.json without it
    rd = ResultsDir.open(out)
    t = tables.tables(rd, preview=True, listing=audit.refuse_if_altered(rd))
    t = dataclasses.replace(t, notes={})  # an older kit's notes name every flagged run
    # twice: the report's own words follow the report beside it (kit.report.resolution.in_pm
    # reads it), and the first rendering still found this kit's
    for _ in range(2):
        made = publish.render(rd, t, resolved=False, earlier=True, labelled=False)
        for rel, data_bytes in made.items():
            os.chmod(out / rel, 0o644)
            (out / rel).write_bytes(data_bytes)
    older = json.loads((out / summary.SUMMARY).read_text())
    assert older["schema"] == 1 and "resolution" not in older["comparisons"][0]
    assert "schema_version" not in older and "verdict_kind" not in older["comparisons"][0]
    assert "- Resolution of" not in (out / "report.md").read_text()
    result = cli("verify", out)
    assert result.exit_code == 0, result.output

"""A per-run field declared once (kit.results.fields) reaches every place a run's fields are:
its record's "judged", tables/runs.csv, summary.json's runs[], and verify's comparison."""

from __future__ import annotations

import json

import jsonschema
import pandas as pd
import pytest

from kit.report import summary
from tests.conftest import contender_args, raw_records

pytestmark = pytest.mark.slow  # runs a whole series


def test_the_kept_stderr_size_is_recorded_published_and_verified(
    tmp_path, fast_protocol, fake_env, cli
):
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    assert cli(*contender_args(out, fast_protocol, "--precision", "float32")).exit_code == 0
    recs = raw_records(out)
    sizes = {}  # each run's latest record: the one the tables read
    for r in recs:
        stderr = out / r["log_dir"] / "stderr.log"
        size = stderr.stat().st_size if stderr.exists() else None
        assert r["judged"]["stderr_bytes"] == size, r
        sizes[r["run_id"]] = size
    assert any(s is not None for s in sizes.values())

    header = (out / "tables" / "runs.csv").read_text().splitlines()[0].split(",")
    assert header.index("stderr_bytes") == header.index("final_loss") + 1
    runs = pd.read_csv(out / "tables" / "runs.csv", dtype={"stderr_bytes": "Int64"})
    published = {
        int(i): (None if pd.isna(s) else int(s)) for i, s in zip(runs.run_id, runs.stderr_bytes)
    }
    assert published == sizes

    document = json.loads((out / summary.SUMMARY).read_text())
    jsonschema.validate(document, summary.schema())
    assert {r["run_id"]: r["stderr_bytes"] for r in document["runs"]} == sizes

    assert cli("verify", out).exit_code == 0
    i, edited = next((i, r) for i, r in enumerate(recs) if r["judged"]["stderr_bytes"] is not None)
    edited["judged"]["stderr_bytes"] += 1
    (out / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    res = cli("verify", out)
    assert res.exit_code == 4, res.output
    assert f"runs.jsonl line {i + 1}: run {edited['run_id']}'s stderr_bytes is" in res.output


def test_a_directory_written_before_the_field_verifies_clean(
    tmp_path, fast_protocol, fake_env, cli
):
    """As a kit before stderr_bytes wrote it: no such key in the records, no such column in
    runs.csv, and (before any per-run field) no runs[] in summary.json."""
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    assert cli(*contender_args(out, fast_protocol, "--precision", "float32")).exit_code == 0
    recs = raw_records(out)
    for r in recs:
        del r["judged"]["stderr_bytes"]
    (out / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    path = out / "tables" / "runs.csv"
    table = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype=str)
    path.chmod(0o644)
    table.drop(columns=["stderr_bytes"]).to_csv(path, index=False)
    path = out / summary.SUMMARY
    document = json.loads(path.read_text())
    for row in document["runs"]:
        del row["stderr_bytes"]
    path.chmod(0o644)
    path.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
    res = cli("verify", out)
    assert res.exit_code == 0, res.output
    del document["runs"]
    path.write_text(json.dumps(document, indent=2, allow_nan=False) + "\n")
    res = cli("verify", out)
    assert res.exit_code == 0, res.output

"""One version key, `schema_version`, in every JSON and CSV file the kit writes, and summary.json
and compare --json valid against the schemas the package ships (other tools read them alone)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from kit.report import comparison, summary
from tests.conftest import contender_args


def _versionless(root) -> list[str]:
    """The kit's JSON, JSON-lines and CSV files under `root` without `schema_version`: in a
    JSON object's keys, a JSON-lines file's first record, a CSV's first column."""
    missing = []
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.suffix == ".json":
            first = json.loads(path.read_text())
        elif path.suffix == ".jsonl":
            first = json.loads(path.read_text().splitlines()[0])
        elif path.suffix == ".csv":
            first = dict.fromkeys(path.read_text().split("\n", 1)[0].split(","))
        else:
            continue
        if not isinstance(first, dict) or "schema_version" not in first or "schema" in first:
            missing.append(rel)
    return missing


@pytest.mark.slow  # runs a whole series: more than a few seconds
def test_every_file_the_kit_writes_carries_schema_version(tmp_path, fast_protocol, fake_env, cli):
    fake_env(step_ms={"*": 2.0}, events={"mica-half-intermediates#3": "oom"})
    out = tmp_path / "r"
    res = cli(
        *contender_args(out, fast_protocol, "--precision", "float32", "--precision", "float16")
    )
    assert res.exit_code == 0, res.output
    assert cli("publish", out, "--preview").exit_code == 0
    written = {p.suffix for p in out.rglob("*")}
    assert {".json", ".jsonl", ".csv"} <= written
    assert _versionless(out) == []
    jsonschema.validate(json.loads((out / summary.SUMMARY).read_text()), summary.schema())
    verified = json.loads(cli("verify", out, "--json").output)
    assert verified["schema_version"] == 1 and verified["clean"] is True
    compared = json.loads(cli("compare", out, out, "--json", "--preview").output)
    jsonschema.validate(compared, comparison.schema())
    assert compared["schema_version"] == comparison.SCHEMA and "schema" not in compared
    assert {c["verdict"] for c in compared["both"]} <= {comparison.SAME, None}  # None: no time


def test_every_class_compare_gives_has_its_enum():
    """A class added to `compare` without its enum in compare.schema.json fails here."""
    both = comparison.schema()["properties"]["both"]["items"]["properties"]
    assert set(both["verdict"]["enum"]) == {*comparison.CLASSES, None}
    assert comparison.schema()["properties"]["schema_version"]["enum"] == [comparison.SCHEMA]

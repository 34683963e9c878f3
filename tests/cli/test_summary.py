"""summary.json: written with every report, valid against the schema the package ships."""

from __future__ import annotations

import json

import jsonschema
import pytest

from kit.report import summary
from tests.conftest import contender_args, records


def _strict(text: str):
    """JSON as other tools read it: NaN and Infinity are not JSON."""

    def refuse(constant: str):
        raise ValueError(f"{constant} in summary.json")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_summary_holds_states_times_and_links_and_follows_its_schema(
    tmp_path, fast_protocol, fake_env, cli
):
    fake_env(step_ms={"*": 2.0}, events={"mica-half-intermediates#3": "oom"})
    out = tmp_path / "r"
    res = cli(
        *contender_args(out, fast_protocol, "--precision", "float32", "--precision", "float16")
    )
    assert res.exit_code == 0, res.output
    data = _strict((out / summary.SUMMARY).read_text())
    jsonschema.validate(data, summary.schema())
    by_variant = {c["variant"]: c for c in data["configurations"] if c["precision"] == "float16"}
    oom = by_variant["mica-half-intermediates"]
    assert oom["state"] == "out of memory" and oom["median_step_s"] is None
    (m1,) = [c for c in data["configurations"] if c["precision"] == "float32"]
    assert m1["state"] == "complete" and m1["runs"] == 5
    # rule 6: no correctness check passed, so the time is withheld unless previewed
    assert m1["publication"].startswith("withheld") and m1["median_step_s"] is None
    assert cli("publish", out, "--preview").exit_code == 0
    data = _strict((out / summary.SUMMARY).read_text())
    jsonschema.validate(data, summary.schema())
    (m1,) = [c for c in data["configurations"] if c["precision"] == "float32"]
    steps = sorted(
        r["step_s"] for r in records(out) if r["config"] == m1["config"] and r["kind"] == "timed"
    )
    assert m1["median_step_s"] == pytest.approx(steps[2]) and m1["min_step_s"] == steps[0]
    # every link is relative and names a file or folder that exists
    for rel in [*m1["raw"], *data["files"]["tables"], data["files"]["runs"]]:
        assert not rel.startswith("/") and (out / rel).exists(), rel


def test_the_schema_refuses_a_summary_without_states():
    broken = {"schema": 1, "configurations": [{"config": "x"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, summary.schema())

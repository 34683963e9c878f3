"""summary.json: written with every report, valid against the schema the package ships."""

from __future__ import annotations

import json

import jsonschema
import pytest

from kit.report import publish, summary, tables
from kit.results import audit
from kit.results.store import ResultsDir
from tests.conftest import contender_args, copied, records, series_once, write_protocol


def _strict(text: str):
    """JSON as other tools read it: NaN and Infinity are not JSON."""

    def refuse(constant: str):
        raise ValueError(f"{constant} in summary.json")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def series_with_an_oom(tmp_path_factory):
    """A contender series of both precisions whose mica-half-intermediates runs out of memory
    in its third run, made once for the module; each test copies it (`with_an_oom`)."""
    root = tmp_path_factory.mktemp("oom")
    protocol = write_protocol(root / "protocol.toml")
    args = contender_args(root / "r", protocol, "--precision", "float32", "--precision", "float16")
    return series_once(root, args, step_ms={"*": 2.0}, events={"mica-half-intermediates#3": "oom"})


@pytest.fixture
def with_an_oom(series_with_an_oom, tmp_path):
    return copied(series_with_an_oom, tmp_path)


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_summary_holds_states_times_and_links_and_follows_its_schema(with_an_oom, cli):
    out = with_an_oom
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
    broken = {"schema_version": 3, "configurations": [{"config": "x"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, summary.schema())


def _described(schema: dict, document: object, where: str = "") -> list[str]:
    """The fields of `document` that `schema` does not describe (type and description)."""
    missing = []
    if isinstance(document, dict) and "properties" in schema:
        for key, value in document.items():
            field = schema["properties"].get(key)
            if field is None or "description" not in field:
                missing.append(f"{where}/{key}")
            elif key not in ("series", "versions"):  # the manifest's and versions.json's own
                missing += _described(field, value, f"{where}/{key}")
    elif isinstance(document, list) and "items" in schema:
        for item in document:
            missing += _described(schema["items"], item, f"{where}[]")
    return sorted(set(missing))


@pytest.mark.slow  # runs a whole series: more than a few seconds
def test_every_field_is_described_and_typed_and_prose_has_its_enum_beside_it(with_an_oom, cli):
    out = with_an_oom
    for preview in (False, True):
        if preview:
            assert cli("publish", out, "--preview").exit_code == 0
        data = _strict((out / summary.SUMMARY).read_text())
        jsonschema.validate(data, summary.schema())
        assert data["schema_version"] == summary.SCHEMA and "schema" not in data
        assert _described(summary.schema(), data) == []
        oom = next(c for c in data["configurations"] if c["state"] == "out of memory")
        assert oom["state_reason"] == "in run 8"
        for c in data["comparisons"]:
            assert c["verdict_kind"] == "no verdict" and c["verdict_reason"]
            assert c["verdict"] == f"no verdict: {c['verdict_reason']}"
            assert c["correctness_kind"] == "not checked"
        kinds = {c["publication_kind"] for c in data["configurations"]}
        assert kinds == ({"preview"} if preview else {"withheld"})
        if not preview:
            c = data["configurations"][0]
            assert c["publication"] == f"withheld: {c['publication_reason']}"
        half = next(
            c for c in data["comparisons"] if c["contender_build"] == "mica-half-intermediates"
        )
        assert (half["contender_state_kind"], half["contender_state_reason"]) == (
            "out of memory",
            "in run 8",
        )


def _enum(*path: str) -> set:
    node = summary.schema()
    for key in path:
        node = node["properties"][key] if key != "[]" else node["items"]
    return set(node["enum"])


def test_every_state_verdict_publication_and_class_the_kit_knows_has_its_enum():
    """A state, verdict, publication or check outcome added to the kit without its enum in
    summary.schema.json fails here."""
    from kit.report import states, verdict
    from kit.results.planned import CONTENDER, PYTORCH

    assert _enum("configurations", "[]", "state") == {s.value for s in states.State}
    assert _enum("comparisons", "[]", "contender_state_kind") == {s.value for s in states.State}
    publications = {p.name.lower() for p in states.Publication}
    assert _enum("configurations", "[]", "publication_kind") == publications
    assert _enum("comparisons", "[]", "publication_kind") == publications
    assert _enum("comparisons", "[]", "verdict_kind") == set(verdict.VERDICTS)
    d1 = set(verdict.VERDICTS) - {verdict.NO_VERDICT}
    assert _enum("comparisons", "[]", "times_alone_say") == d1 | {""}
    assert _enum("comparisons", "[]", "verdict_by_cycles") == d1 | {""}
    assert _enum("comparisons", "[]", "correctness_kind") == {o.value for o in states.CheckOutcome}
    assert _enum("configurations", "[]", "side") == {PYTORCH, CONTENDER}
    assert _enum("schema_version") == {summary.SCHEMA}


@pytest.mark.slow  # runs a whole series: more than a few seconds
def test_a_summary_an_earlier_kit_wrote_under_schema_still_verifies_and_a_changed_kind_does_not(
    tmp_path, fast_protocol, fake_env, cli
):
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    assert cli(*contender_args(out, fast_protocol, "--precision", "float32")).exit_code == 0
    path = out / summary.SUMMARY
    new = json.loads(path.read_text())
    # as the kit before schema 3 wrote it: the version under "schema", no kinds or reasons
    older = {
        "schema": 2,
        **{k: v for k, v in new.items() if k not in ("schema_version", "protocol")},
    }
    # its conditions: a count of the flagged runs (schema 4 gives each with its reason)
    older["conditions"] = {"flagged_runs": len(new["conditions"]["flagged_runs"])}
    for part in ("configurations", "comparisons"):
        older[part] = [{k: v for k, v in r.items() if k not in summary.TYPED} for r in older[part]]
    path.chmod(0o644)
    path.write_text(json.dumps(older, indent=2, allow_nan=False) + "\n")
    # its report, page and plots as that kit made them
    rd = ResultsDir.open(out)
    t = tables.tables(rd, listing=audit.refuse_if_altered(rd))
    for rel, data in publish.render(rd, t, earlier=True, labelled=False).items():
        if rel != summary.SUMMARY:
            (out / rel).chmod(0o644)
            (out / rel).write_bytes(data)
    res = cli("verify", out)
    assert res.exit_code == 0, res.output
    changed = json.loads(json.dumps(new))
    changed["comparisons"][0]["verdict_kind"] = "faster"
    path.write_text(json.dumps(changed, indent=2, allow_nan=False) + "\n")
    res = cli("verify", out)
    assert res.exit_code == 4 and "summary.json" in res.output, res.output

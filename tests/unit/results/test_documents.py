"""A results directory's manifest, plan and versions are typed: each read back exactly as the
kit wrote it, an older schema upgraded, a newer one or an unknown key refused with a clear
error, and readers ask them by attribute."""

from __future__ import annotations

import hashlib
import json

import pytest

from kit.errors import UserError
from kit.report import summary, tables
from kit.results.documents import SCHEMA, Manifest, NotMeasured, Plan, Versions
from kit.results.planned import PlannedRun
from kit.results.store import ResultsDir
from tests.conftest import contender_args


@pytest.fixture
def series(tmp_path, fast_protocol, fake_env, cli):
    fake_env(step_ms={"mica": 2.0})
    out = tmp_path / "r"
    res = cli(*contender_args(out, fast_protocol, "--precision", "float32"))
    assert res.exit_code == 0, res.output
    return out


def _json(path):
    return json.loads(path.read_text())


def test_a_series_documents_read_back_exactly_as_written(series):
    rd = ResultsDir.open(series)
    for name, typed in (
        ("manifest.json", rd.manifest()),
        ("plan.json", rd.plan()),
        ("versions.json", rd.versions()),
    ):
        written = _json(series / name)
        written.pop("schema_version") if name == "versions.json" else None  # the store stamps it
        assert typed.to_json() == written, name
        assert list(typed.to_json()) == list(written), name  # key for key, in order


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_readers_ask_by_attribute(series):
    rd = ResultsDir.open(series)
    m, plan, found = rd.manifest(), rd.plan(), rd.versions()
    assert m.card == "cpu" and m.device == "cpu" and not m.is_check
    assert m.protocol_sha256 == hashlib.sha256((series / "protocol.toml").read_bytes()).hexdigest()
    assert m.command and all(isinstance(a, str) for a in m.command) and m.executor == "local"
    assert [c.id for c in plan.configurations] == ["shakespeare-char/float32/contender/mica"]
    assert [r.kind for r in plan.order[:2]] == ["discarded", "timed"]
    assert len(plan.timed("shakespeare-char/float32/contender/mica")) == 5
    assert found.kit["version"] and found.side("contender")["program_sha256"]
    assert found.side("pytorch") == {}  # a side the series did not run


def test_summary_dates_the_series_from_the_manifest(series):
    rd = ResultsDir.open(series)
    doc = summary.build(rd, tables.tables(rd, preview=True))
    assert doc["date"] == rd.manifest().date_utc and doc["date"].startswith("20")


MANIFEST_0 = {  # before schemas were kept: no "schema", no executor versions
    "kit_version": "0.0.9",
    "kit_commit": "abc",
    "protocol_sha256": "f" * 64,
    "command": ["series", "--smoke"],
    "date_utc": "2026-01-01T00:00:00Z",
    "host": "h",
    "series": {"card": "cpu", "device": "cpu", "smoke": True, "models": ["m"]},
    "options": {},
}


def test_an_older_manifest_is_upgraded():
    m = Manifest.from_json(MANIFEST_0)
    assert m.schema == 0 and m.executor_versions == {} and m.executor == ""
    assert m.smoke and m.card == "cpu" and m.command == ("series", "--smoke")
    assert m.to_json()["series"] == MANIFEST_0["series"]


@pytest.mark.parametrize(
    ("document", "data"),
    [
        (Manifest, {**MANIFEST_0, "schema": SCHEMA + 1}),
        (Plan, {"schema": SCHEMA + 1, "order": []}),
        (Versions, {"schema": SCHEMA + 1}),
        (Plan, {"schema_version": SCHEMA + 1, "order": []}),
    ],
)
def test_a_newer_schema_is_refused_naming_it(document, data):
    with pytest.raises(UserError, match=f"schema {SCHEMA + 1}; this kit reads schema {SCHEMA}"):
        document.from_json(data)


def test_an_unknown_manifest_key_is_refused():
    with pytest.raises(UserError, match="keys this kit does not know: colour"):
        Manifest.from_json({**MANIFEST_0, "colour": "blue"})


def test_a_malformed_plan_is_a_clear_error_not_a_traceback():
    with pytest.raises(UserError, match=r"plan.json is not as the kit writes it \(KeyError"):
        Plan.from_json({"schema": 1, "order": [{"run_id": 0}]})


def test_an_older_plan_says_its_runs_kinds_by_discarded_alone():
    old = {
        "configurations": [
            {
                "card": "cpu",
                "model": "m",
                "precision": "float32",
                "side": "contender",
                "variant": "mica",
                "id": "m/float32/contender/mica",
            }  # fmt: skip
        ],
        "order": [
            {"run_id": 0, "config": "m/float32/contender/mica", "round": 0, "discarded": True},
            {"run_id": 1, "config": "m/float32/contender/mica", "round": 1, "discarded": False},
        ],
    }
    plan = Plan.from_json(old)
    assert [r.kind for r in plan.order] == ["discarded", "timed"]
    assert plan.primary is None and plan.not_measured is None


def test_a_check_plan_keeps_its_runs_sides_and_seeds():
    order = [
        {"run_id": 0, "kind": "shared-start", "side": "pytorch", "seed": 1337},
        {"run_id": 1, "kind": "training", "side": "contender", "seed": 1337},
    ]
    plan = Plan.of(order)
    assert plan.to_json() == {"schema_version": SCHEMA, "order": order}
    assert plan.order[1] == PlannedRun(1, kind="training", side="contender", seed=1337)


def test_not_measured_is_typed():
    plan = Plan.of([], configurations=[], primary={}, not_measured=[
        {"model": "m", "precision": "bfloat16", "why": "emulated"}])  # fmt: skip
    assert plan.not_measured == (NotMeasured("m", "bfloat16", "emulated"),)


def test_versions_keep_each_sides_probe_answer_as_given():
    d = {
        "kit": {"version": "0.1.0", "commit": "c"},
        "card": {"name": "NVIDIA L4", "driver_version": "550.90.07"},
        "executor": {"name": "docker", "docker_engine": "27.3.1"},
        "pytorch": {"torch": "2.13.0", "sdpa_backends": "unreadable: no probe"},
        "images": {"pytorch": {"image_id": "sha256:" + "1" * 64}},
    }
    found = Versions.from_json(d)
    assert found.side("pytorch")["torch"] == "2.13.0" and found.images is not None
    assert found.to_json() == d and list(found.to_json()) == list(d)


def test_an_earlier_kits_document_keeps_the_key_it_was_written_with():
    old = Manifest.from_json({"schema": 1, **MANIFEST_0})
    assert list(old.to_json())[0] == "schema" and old.to_json()["schema"] == 1
    plan = Plan.of([{"run_id": 0, "kind": "training", "side": "contender", "seed": 1}])
    assert list(plan.to_json())[0] == "schema_version"
    assert Plan.from_json({"schema": 1, "order": plan.order_json()}).to_json()["schema"] == 1

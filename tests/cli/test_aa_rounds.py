"""A/A rounds (`series --aa`): after the protocol's plan, each chosen configuration against its
identical twin, recorded and resumed like any run, and never part of D1's tables."""

from __future__ import annotations

import json

import pytest

from kit.engine.scheduler import plan
from kit.errors import ExitCode
from kit.results.planned import Config
from tests.conftest import contender_args, records, steady_series

pytestmark = pytest.mark.slow  # whole series

TWO_PRECISIONS = ("--precision", "float32", "--precision", "float16")


def _aa(out) -> list[dict]:
    return [r for r in records(out) if r["kind"] in ("aa", "aa-twin")]


def test_aa_runs_every_primary_build_against_its_twin_after_the_timed_rounds(
    tmp_path, fast_protocol, fake_env, cli
):
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"

    def make():
        res = cli(*contender_args(out, fast_protocol, *TWO_PRECISIONS, "--aa"))
        assert res.exit_code == 0, res.output
        return out

    steady_series(make)  # made again where the machine's late stamps voided a run
    p = json.loads((out / "plan.json").read_text())
    # the contender's primary builds (mica-strict is float16's, as the protocol file says)
    primary = [c for c, yes in p["primary"].items() if yes]
    assert p["aa"] == primary and len(primary) == 2
    # the protocol's plan stays exactly as it was: its runs keep their places and ids
    configs = [Config.from_json(c) for c in p["configurations"]]
    protocol_plan = plan(configs, 5, 1)
    assert [(r["run_id"], r["config"], r["round"], r["kind"]) for r in p["order"][:18]] == [
        (r.run_id, r.config, r.round, r.kind) for r in protocol_plan
    ]
    aa = _aa(out)
    assert len(aa) == 2 * 2 * 5 and {r["status"] for r in aa} == {"ok"}
    assert min(r["run_id"] for r in aa) == 18  # straight after the timed rounds
    assert max(r["run_id"] for r in aa) < min(
        r["run_id"] for r in records(out) if r["kind"] == "profile"
    )
    for r in aa:
        assert r["step_s"] and (out / r["log_dir"] / "stdout.log").exists()
    # D1's tables hold the timed runs alone: each configuration's five
    conf = (out / "tables" / "configurations.csv").read_text()
    assert "aa" not in {x.split(",")[0] for x in conf.splitlines()}
    runs = (out / "tables" / "runs.csv").read_text()
    assert runs.count(",aa-twin,") == 10 and runs.count(",aa,") == 10
    assert cli("verify", out).exit_code == 0


def test_aa_names_configurations_and_refuses_an_unknown_one(tmp_path, fast_protocol, fake_env, cli):
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    res = cli(*contender_args(out, fast_protocol, "--aa", "shakespeare-char/float32/nope/x"))
    assert res.exit_code == ExitCode.USER_ERROR, res.output
    assert "shakespeare-char/float32/nope/x" in res.output
    assert "shakespeare-char/float32/contender/mica" in res.output
    one = "shakespeare-char/float16/contender/mica-half-intermediates"
    res = cli(*contender_args(tmp_path / "s", fast_protocol, *TWO_PRECISIONS, "--aa", one))
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "s" / "plan.json").read_text())["aa"] == [one]
    assert {r["config"] for r in _aa(tmp_path / "s")} == {one}


def test_a_series_stopped_in_its_aa_rounds_resumes_them(tmp_path, fast_protocol, fake_env, cli):
    # mica's starts: 1 discarded, 2-6 timed, 7-8 the first A/A round (twin first), 9 the second
    fake_env(step_ms={"*": 2.0}, events={"mica#9": "crash"})
    out = tmp_path / "r"
    res = cli(*contender_args(out, fast_protocol, "--precision", "float32", "--aa"))
    assert res.exit_code == ExitCode.SERIES_FAILED, res.output
    failed = [r for r in records(out) if r["status"] == "failed"]
    assert [(r["kind"], r["round"]) for r in failed] == [("aa", 2)]
    res = cli("series", "--resume", out)
    assert res.exit_code == 0, res.output
    # finished: ok, or void where a loaded machine stamped a line late (a run is judged once
    # and never run again; one CI run voided the resumed A/A run so)
    finished = [r for r in records(out) if r["status"] in ("ok", "void")]
    ids = [r["run_id"] for r in finished]
    assert len(ids) == len(set(ids)), "a finished run ran twice"
    aa = [r for r in _aa(out) if r["status"] in ("ok", "void")]
    assert sorted((r["round"], r["kind"]) for r in aa) == sorted(
        (n, k) for n in range(1, 6) for k in ("aa", "aa-twin")
    ), [(r["round"], r["kind"], r["status"], r.get("reason")) for r in _aa(out)]
    assert cli("verify", out).exit_code == 0

"""`micakit cloud run` on a fleet as SkyPilot behaves: launches that return on submission,
machines whose series end in any order on the fake's clock (tests/fakes/skypilot_sdk/sky/
_world.py: a fake minute is 0.5 s), preemption mid-series, autodown, SkyPilot's own output.

Each test is a row of docs/reproduce.md's "what can go wrong on a rented fleet" table.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli.main import main
from kit.cloud import plan, skypilot

# ruff: noqa: F811 - the fixtures, shared with test_cloud.py
from tests.cli.test_cloud import Sky, _all, _cloud, _digests, _run, series, sky  # noqa: F401
from tests.conftest import contender_args, write_protocol

M1, M2, M3 = "micakit-t1-1", "micakit-t1-2", "micakit-t1-3"


def _order(sky: Sky, fn: str) -> list[str]:
    return [c["cluster_name"] for c in sky.calls(fn)]


def _fleet(out: Path) -> dict[str, dict]:
    return {m["cluster"]: m for m in json.loads((out / "fleet.json").read_text())["machines"]}


def _made(factory: pytest.TempPathFactory, precision: str) -> Path:
    """A real series of the fake contender (5 ms steps: a step long beside a busy machine's
    jitter, so that no run is void and `merge` takes it)."""
    root = factory.mktemp(f"series-{precision}")
    out = root / "made"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MICAKIT_FAKE", json.dumps({"step_ms": {"*": 5.0}, "state": str(root / "s")}))
        mp.setenv("MICAKIT_CACHE", str(root / "cache"))
        args = contender_args(
            out, write_protocol(root / "p.toml", runs=2), "--precision", precision
        )
        res = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two series as two machines of a fleet measure them (float32 and float16), which
    `merge` takes together (one series of each card, model and precision)."""
    return _made(tmp_path_factory, "float32"), _made(tmp_path_factory, "float16")


def _row(i: int, state: str, pulled: str) -> re.Pattern[str]:
    return re.compile(rf"^micakit-t1-{i} +L4 +{state} +{pulled} +\$0\.\d+ *$", re.M)


def test_three_machines_end_out_of_order_one_preempted_the_others_pulled_and_merged(
    sky: Sky, two: tuple[Path, Path], tmp_path: Path
) -> None:
    sky.script(
        results=str(two[0]),
        machines={
            M1: {"job_minutes": 14},
            M2: {"job_minutes": 4, "results": str(two[1])},
            M3: {"job_minutes": 9, "preempt_at": 6},  # gone 6 minutes into its series
        },
    )
    res, out = _run(tmp_path, machines=3)
    assert res.exit_code == 8, res.output  # ExitCode.FLEET_INCOMPLETE
    # each pulled as its series ended: machine 2 first, then 1; 3 vanished and said so
    assert _order(sky, "ssh_add_cluster") == [M2, M1]
    assert _order(sky, "preempted") == [M3]
    assert _order(sky, "autodown") == []
    assert sky.clusters() == {}  # nothing left up
    record = _fleet(out)
    assert record[M1]["state"] == record[M2]["state"] == "delivered"
    assert record[M3]["state"].startswith(f"failed: {M3} no longer exists (preempted")
    assert record[M3]["skypilot_said"].startswith("ClusterDoesNotExist: Cluster")
    assert record[M3]["fix"].startswith("what it had not handed back is gone")
    assert record[M3]["pulled"] is False and record[M1]["usd"] > 0
    assert _row(1, "delivered", "machine-1: verified").search(res.stdout), res.stdout
    assert _row(2, "delivered", "machine-2: verified").search(res.stdout), res.stdout
    assert re.search(rf"^{M3} +L4 +failed: {M3} no longer exists", res.stdout, re.M)
    errors = [line for line in res.stderr.splitlines() if "error:" in line]
    assert errors == [
        f"micakit: error: 1 of 3 machines did not bring back a verified series: {M3} "
        f"({record[M3]['state']})"
    ]
    merged = f"micakit merge {out / 'machine-1'} {out / 'machine-2'} --out {out / 'release'}"
    assert f"next: {merged}" in res.stdout
    done = CliRunner().invoke(main, merged.split()[1:])
    assert done.exit_code == 0, done.output
    assert (out / "release" / "release.csv").is_file()


def test_a_machine_that_ends_while_another_runs_is_pulled_before_its_autodown(
    sky: Sky, series: Path, tmp_path: Path
) -> None:
    """Machine 2 ends at minute 2 and would delete itself at minute 10; machine 1 runs to
    minute 13. Followed one after the other, machine 2 would be gone before its turn. (A fake
    minute is 1 s here: the 8 idle minutes leave the pull 8 s on a busy machine.)"""
    sky.script(
        results=str(series),
        minute_s=1.0,
        provision_minutes=1,
        machines={M1: {"job_minutes": 12}, M2: {"job_minutes": 1}},
    )
    res, out = _run(tmp_path, "--idle-minutes", 8)
    assert res.exit_code == 0, res.output
    assert [c["idle_minutes_to_autostop"] for c in sky.calls("launch")] == [8, 8]
    assert _order(sky, "ssh_add_cluster") == [M2, M1]
    assert _order(sky, "autodown") == []  # the kit pulled and tore down first
    assert all(m["state"] == "delivered" for m in _fleet(out).values())


def test_a_launch_that_fails_is_torn_down_at_once_and_the_others_go_on(
    sky: Sky, series: Path, tmp_path: Path
) -> None:
    """SkyPilot leaves a cluster whose provisioning failed up, without autodown: the kit
    tears it down the moment it hears, not at the end of the fleet."""
    sky.script(
        results=str(series), machines={M1: {"launch_error": "capacity"}, M2: {"job_minutes": 8}}
    )
    res, out = _run(tmp_path)
    assert res.exit_code == 8, res.output
    calls = [(fn, a.get("cluster_name")) for fn, a in sky.read()["calls"]]
    assert calls.index(("down", M1)) < calls.index(("ssh_add_cluster", M2))
    record = _fleet(out)
    assert record[M1]["error"].startswith("no machine could be launched, no capacity")
    assert record[M1]["fix"].startswith("name another zone or region with --infra")
    assert record[M2]["state"] == "delivered" and sky.clusters() == {}


def test_skypilots_output_stays_off_stdout_and_the_api_server_is_said(
    sky: Sky, series: Path, tmp_path: Path
) -> None:
    sky.script(results=str(series), api_start_s=0.5)
    res, out = _run(tmp_path, machines=1)
    assert res.exit_code == 0, res.output
    assert "<sky-payload" not in _all(res)
    assert "Starting a local server" not in res.stdout and "Launching" not in res.stdout
    err = res.stderr
    assert err.index(skypilot.API_SERVER_NOTE) < err.index("Starting a local server")
    assert f"SkyPilot's local API server is still running: {skypilot.API_STOP}" in err
    log = (out / "logs" / "machine-1.log").read_text()
    assert f"Launching a new cluster '{M1}'" in log  # the launch's own log, named
    assert _fleet(out)[M1]["log"] == "logs/machine-1.log"


def test_dry_run_prints_the_task_and_the_plan_and_asks_nothing(sky: Sky, tmp_path: Path) -> None:
    res = _cloud(
        "run", "--machines", 2, "--digests", _digests(tmp_path), "--series-id", "t1",
        "--instance-type", "g2-standard-8", "--also", "g2-standard-12", "--dry-run",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert f"# {M1}: SkyPilot's task YAML" in out and f"# {M2}: SkyPilot's task YAML" in out
    assert (
        "  any_of:\n    - instance_type: g2-standard-8\n    - instance_type: g2-standard-12\n"
        in out
    )
    assert "  autostop:\n    idle_minutes: 15\n    down: true\n" in out
    assert f"  {M1}: 1 x L4, g2-standard-8, on-demand, gcp: $0.75/hour" in out
    assert "  fallback: SkyPilot takes the cheapest free of g2-standard-8, g2-standard-12" in out
    assert "dry run: nothing was rented, SkyPilot was not asked" in out
    assert not sky.calls("launch") and not sky.calls("api_start")
    assert not (tmp_path / "results").exists()


def test_also_is_skypilots_any_of(sky: Sky, series: Path, tmp_path: Path) -> None:
    sky.script(results=str(series))
    res, _ = _run(tmp_path, "--instance-type", "g2-standard-8", "--also", "g2-standard-12",
                  machines=1)  # fmt: skip
    assert res.exit_code == 0, res.output
    (launch,) = sky.calls("launch")
    assert [r["instance_type"] for r in launch["any_of"]] == ["g2-standard-12", "g2-standard-8"]


# a machine SkyPilot cannot rent: what the kit says where it reads the catalog (refused before
# renting; None where the catalog cannot know), and where it cannot (the API server's answer)
BAD_MACHINES = [
    ("--card", "Q9", "--card Q9: SkyPilot's catalog lists no gcp machine with it",
     "SkyPilot knows no machine with a Q9 on gcp: No launchable resource"),
    ("--instance-type", "g9-huge", "--instance-type g9-huge: SkyPilot's catalog lists no",
     "SkyPilot refused the machine: Invalid instance type"),
    ("--infra", "gcp/mars-1", "--infra gcp/mars-1: Invalid region 'mars-1'",
     "SkyPilot refused the machine: Invalid region 'mars-1'"),
    ("--infra", "aws", None, "SkyPilot cannot rent on aws: Task"),
]  # fmt: skip


@pytest.mark.parametrize(("option", "value", "before", "_"), [m for m in BAD_MACHINES if m[2]])
def test_a_machine_the_catalog_does_not_list_is_refused_before_renting(
    sky: Sky, tmp_path: Path, option: str, value: str, before: str, _: str
) -> None:
    res, out = _run(tmp_path, option, value)
    assert res.exit_code == 2, res.output
    assert f"error: {before}" in res.stderr and "fix: " in res.stderr
    assert not sky.calls("launch") and not out.exists()


@pytest.mark.parametrize(("option", "value", "_", "error"), BAD_MACHINES)
def test_offline_the_api_servers_answer_is_mapped(
    sky: Sky, tmp_path: Path, option: str, value: str, _: str | None, error: str
) -> None:
    """The catalog cannot be read here: the API server refuses the task at launch."""
    sky.script(catalog="offline")
    res, out = _run(tmp_path, option, value, machines=1)
    assert res.exit_code == 2, res.output
    assert [ln for ln in res.stderr.splitlines() if "error:" in ln] == [
        f"micakit: error: {_fleet(out)[M1]['error']}"
    ]
    assert error in res.stderr and sky.clusters() == {}


def test_audit_names_a_cluster_without_autodown_first(sky: Sky) -> None:
    base = {"status": "UP", "labels": {"micakit": "old"}, "region": "us-central1", "zone": "a"}
    state = sky.read()
    state["clusters"] = {
        "micakit-old-1": {**base, "autostop": 15, "to_down": True, "up_min": None},
        "micakit-old-2": {**base, "autostop": -1, "to_down": False, "up_min": None},
    }
    sky.state.write_text(json.dumps(state))
    res = _cloud("audit")
    assert res.exit_code == 2, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "micakit-old-2\tUP\tus-central1\tNO autodown"
    assert lines[1] == "micakit-old-1\tUP\tus-central1\tautodown after 15 idle minutes"
    assert "error: 1 machine(s) of the kit have NO autodown and bill until torn down: " in (
        res.stderr
    )
    assert "fix: tear them down first: `micakit cloud down old`" in res.stderr


def test_idle_minutes_is_checked(sky: Sky, tmp_path: Path) -> None:
    res, _ = _run(tmp_path, "--idle-minutes", 0)
    assert res.exit_code == 2 and "autodown needs at least 1 idle minute" in _all(res)
    assert plan.IDLE_MINUTES == 15 and not sky.calls("launch")


def test_a_preempted_spot_machine_is_launched_again_and_its_series_started_anew(
    sky: Sky, series: Path, tmp_path: Path
) -> None:
    """--spot: machine 2 is taken back 3 minutes into its series (SkyPilot makes a GCP spot VM
    with `instanceTerminationAction: DELETE`); the kit launches it again under its name, the
    series starts anew there (a series resumes only on its own card), and is pulled and
    verified; machine 1 goes on meanwhile. The plan says so before anything is rented."""
    sky.script(
        results=str(series), machines={M1: {"job_minutes": 8}, M2: {"job_minutes": 5,
                                                                     "preempt_at": [3]}}
    )  # fmt: skip
    res, out = _run(tmp_path, "--spot")
    assert res.exit_code == 0, res.output
    assert _order(sky, "launch") == [M1, M2, M2]
    assert all(c["resources"]["use_spot"] for c in sky.calls("launch"))
    assert _order(sky, "preempted") == [M2] and sky.clusters() == {}
    record = _fleet(out)
    assert record[M2]["state"] == record[M1]["state"] == "delivered"
    assert len(record[M2]["preemptions"]) == 1 and record[M1]["preemptions"] == []
    assert record[M2]["preemptions"][0].startswith("ClusterDoesNotExist: Cluster")
    assert f"{M2}: preempted; launching it again (1 of 2 relaunches)" in res.stderr
    assert re.search(rf"^{M2} +L4 +delivered \(preempted 1×, launched again\)", res.stdout, re.M)


def test_a_spot_machine_preempted_past_its_recoveries_is_a_failed_machine(
    sky: Sky, series: Path, tmp_path: Path
) -> None:
    sky.script(results=str(series), machines={M1: {"job_minutes": 5, "preempt_at": [2, 2]}})
    res, out = _run(tmp_path, "--spot", "--recoveries", 1, machines=1)
    assert res.exit_code == 8, res.output  # ExitCode.FLEET_INCOMPLETE
    assert _order(sky, "launch") == [M1, M1] and sky.clusters() == {}
    record = _fleet(out)[M1]
    assert record["state"].startswith(f"failed: {M1} no longer exists (preempted")
    assert len(record["preemptions"]) == 1 and record["pulled"] is False


def test_recoveries_is_for_spot_machines_and_the_plan_says_them(sky: Sky, tmp_path: Path) -> None:
    res, _ = _run(tmp_path, "--recoveries", 1)
    assert res.exit_code == 2 and "--recoveries 1 is for spot machines" in _all(res)
    assert not sky.calls("launch")
    p = plan.make("t1", 1, "L4", None, True)
    assert not any("preemption:" in line for line in plan.lines(p))
    said = plan.lines(dataclasses.replace(p, recoveries=plan.RECOVERIES))
    assert any(
        line.startswith("  preemption: a spot machine the cloud takes back") for line in said
    )

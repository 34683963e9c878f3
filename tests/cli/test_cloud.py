"""`micakit cloud` against a recording fake of SkyPilot's SDK (tests/fakes/skypilot_sdk/sky).

Past the launch everything is real: a real series' results directory stands on each "machine"
(a folder), rsync pulls it back over an ssh that runs in that folder, and `verify` checks it.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli.main import main
from tests.conftest import FAKES, ROOT, contender_args, write_protocol

SDK = FAKES / "skypilot_sdk"
SSH = SDK / "fake_ssh.py"
RUNNER = "registry.example/micakit@sha256:" + "a" * 64
PYTORCH = "registry.example/micakit-pytorch@sha256:" + "b" * 64


@pytest.fixture(scope="module")
def series(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real finished series (the fake contender on the CPU), what each machine 'writes'."""
    root = tmp_path_factory.mktemp("series")
    out = root / "made"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MICAKIT_FAKE", json.dumps({"step_ms": {"*": 2.0}, "state": str(root / "s")}))
        mp.setenv("MICAKIT_CACHE", str(root / "cache"))
        args = contender_args(
            out, write_protocol(root / "p.toml", runs=2), "--precision", "float32"
        )
        res = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out


class Sky:
    """The fake SDK on the path, its state in a file of the test's own."""

    def __init__(self, tmp_path: Path, mp: pytest.MonkeyPatch) -> None:
        self.state = tmp_path / "sky.json"
        self.home = tmp_path / "machines"
        self.home.mkdir()
        mp.syspath_prepend(str(SDK))
        for name in [m for m in sys.modules if m == "sky" or m.startswith("sky.")]:
            mp.delitem(sys.modules, name)
        mp.setenv("FAKE_SKY_STATE", str(self.state))
        mp.setenv("FAKE_SKY_HOME", str(self.home))
        mp.setenv("MICAKIT_CLOUD_SSH", f"{sys.executable} {SSH}")
        self.script(home=str(self.home))

    def script(self, **values: object) -> None:
        state = self.read()
        state.setdefault("script", {}).update(values)
        self.state.write_text(json.dumps(state))

    def read(self) -> dict:
        return json.loads(self.state.read_text()) if self.state.exists() else {}

    def calls(self, fn: str) -> list[dict]:
        return [args for name, args in self.read().get("calls", []) if name == fn]

    def clusters(self) -> dict:
        return self.read().get("clusters", {})


@pytest.fixture
def sky(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sky]:
    yield Sky(tmp_path, monkeypatch)
    for name in [m for m in sys.modules if m == "sky" or m.startswith("sky.")]:
        del sys.modules[name]  # the fake leaves with the test (the real one comes back after)


def _digests(tmp_path: Path) -> Path:
    path = tmp_path / "digests.json"
    images = {"runner": {"pinned": RUNNER}, "pytorch": {"pinned": PYTORCH}}
    path.write_text(json.dumps({"schema": 1, "images": images}))
    return path


def _runner() -> CliRunner:
    """stdout and stderr apart on click 8.1 too (8.2 keeps them apart and mixes .output)."""
    try:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    except TypeError:
        return CliRunner()


def _all(res) -> str:
    """What the command printed, stdout then stderr."""
    return res.stdout + res.stderr


def _cloud(*args: object, input: str | None = None):
    return _runner().invoke(main, ["cloud", *map(str, args)], input=input)


def _run(tmp_path: Path, *extra: object, machines: int = 2):
    out = tmp_path / "fleet"
    res = _cloud(
        "run", "--machines", machines, "--digests", _digests(tmp_path), "--series-id", "t1",
        "--out", out, "--yes", *extra,
    )  # fmt: skip
    return res, out


def test_help_imports_neither_skypilot_nor_the_cloud_command() -> None:
    probe = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from kit.cli.main import main\n"
        "r = CliRunner().invoke(main, ['--help'])\n"
        "assert 'cloud' in r.output, r.output\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sky'\n"
        "      or m.startswith(('kit.cloud', 'kit.cli.cloud'))))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(SDK)])}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_plan_prices_each_machine_and_the_whole_from_the_catalog(sky: Sky) -> None:
    res = _cloud("plan", "--machines", 2, "--hours", 4)
    assert res.exit_code == 0, res.output
    lines = _all(res).splitlines()
    machines = [line for line in lines if "micakit-" in line and ": 1 x L4" in line]
    assert len(machines) == 2
    # the fake catalog: g2-standard-8 $0.50 + L4 $0.25 in us-central1, the cheapest region
    for line in machines:
        assert "g2-standard-8, on-demand, gcp: $0.75/hour (us-central1, SkyPilot's catalog)" in line
    assert "  in all: $1.50/hour for 2 machine(s)" in lines
    assert "  a full series of 4 hours: about $6.00 in all" in lines
    assert any(line.startswith("  micakit cloud run --machines 2") for line in lines)
    assert "  L4 on gcp per SkyPilot's catalog (--infra gcp/REGION[/ZONE]): " in res.stdout
    assert "europe-west4 (1 zone), us-central1 (2 zones)" in res.stdout
    assert "<sky-payload" not in _all(res)  # SkyPilot's encoded status messages
    assert not sky.calls("launch")  # a plan rents nothing


def test_plan_says_price_unknown_where_the_catalog_cannot_be_read(sky: Sky) -> None:
    sky.script(catalog="offline")
    res = _cloud("plan", "--machines", 1, "--spot")
    assert res.exit_code == 0, res.output
    assert "spot, gcp: price unknown\n" in _all(res)
    assert "  price unknown: SkyPilot's catalog cannot be read (ConnectionError: " in _all(res)
    assert "in all: price unknown per hour" in _all(res)


def test_plan_without_skypilot_says_price_unknown_and_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sky", None)  # import sky raises ImportError
    res = _cloud("plan")
    assert res.exit_code == 0, res.output
    assert "gcp: price unknown\n" in _all(res)
    assert "price unknown: SkyPilot is not installed: install the extra: pip install " in _all(res)
    assert "'micakit[cloud]'" in _all(res)


def test_run_launches_labelled_machines_with_autodown_pulls_verifies_and_tears_down(
    sky: Sky, series: Path, tmp_path: Path
) -> None:
    sky.script(results=str(series))
    res, out = _run(tmp_path, "--", "--model", "shakespeare-char")
    assert res.exit_code == 0, res.output
    launches = sky.calls("launch")
    assert [c["cluster_name"] for c in launches] == ["micakit-t1-1", "micakit-t1-2"]
    for i, c in enumerate(launches, 1):
        # autodown armed at launch, never set afterwards
        assert c["down"] is True and c["idle_minutes_to_autostop"] == 15  # --idle-minutes' default
        assert c["resources"]["labels"] == {"micakit": "t1"}
        assert c["resources"]["accelerators"] == "L4:1"
        assert c["resources"]["instance_type"] == "g2-standard-8"
        assert c["envs"]["MICAKIT_RUNNER"] == RUNNER
        assert c["envs"]["MICAKIT_PYTORCH"] == PYTORCH
        assert c["envs"]["MICAKIT_NAME"] == f"machine-{i}"
        assert c["envs"]["MICAKIT_SERIES_ARGS"] == "--model shakespeare-char"  # after --
        script = Path(c["file_mounts"]["~/.micakit/cloud-series.sh"]).read_text()
        assert c["run"] == "bash ~/.micakit/cloud-series.sh"
    assert not sky.calls("autostop")
    # the README's docker run line: the card, the Docker socket, the runner by its digest
    assert (
        '"${docker[@]}" run --rm ${gpus[@]+"${gpus[@]}"} "${user[@]}" "${mounts[@]}" '
        '"$MICAKIT_RUNNER"' in script
    )
    assert 'gpus=(--gpus "${MICAKIT_GPUS-all}")' in script
    assert "-v /var/run/docker.sock:/var/run/docker.sock" in script
    assert sorted(c["cluster_name"] for c in sky.calls("down")) == ["micakit-t1-1", "micakit-t1-2"]
    assert sky.clusters() == {}
    # the ssh entry rsync goes through, written as SkyPilot's CLI does, removed with the machine
    for call in ("ssh_add_cluster", "ssh_remove_cluster"):
        assert sorted(c["cluster_name"] for c in sky.calls(call)) == [
            "micakit-t1-1",
            "micakit-t1-2",
        ]
    for i in (1, 2):
        assert (out / f"machine-{i}" / "manifest.json").is_file()
        row = re.compile(
            rf"^micakit-t1-{i} +L4 +delivered +machine-{i}: verified +\$0\.\d+ *$", re.M
        )
        assert row.search(res.stdout), res.stdout
    fleet = json.loads((out / "fleet.json").read_text())
    assert [m["zone"] for m in fleet["machines"]] == ["us-central1-a"] * 2
    assert all(m["usd_per_hour"] == 0.75 and m["usd"] is not None for m in fleet["machines"])
    assert "no machine of the kit is up" in _all(res)  # cloud run ends with the audit
    assert f"micakit merge {out / 'machine-1'} {out / 'machine-2'}" in _all(res)


def test_a_failed_series_still_pulls_and_tears_down(sky: Sky, series: Path, tmp_path: Path) -> None:
    sky.script(results=str(series), job="FAILED")
    res, out = _run(tmp_path)
    assert res.exit_code == 8, res.output
    assert "2 of 2 machines did not bring back a verified series" in _all(res)
    assert len(sky.calls("down")) == 2 and sky.clusters() == {}
    assert (out / "machine-1" / "manifest.json").is_file()  # what it finished came back


def test_a_teardown_that_fails_is_named_by_the_audit(
    sky: Sky, series: Path, tmp_path: Path
) -> None:
    sky.script(results=str(series), down_fails=["micakit-t1-2"])
    res, _ = _run(tmp_path, "--idle-minutes", 600)  # autodown would clear it before the audit
    assert res.exit_code == 2, res.output
    assert "could not tear down micakit-t1-2" in _all(res)
    assert "1 machine(s) of the kit are still up: micakit-t1-2" in _all(res)
    assert "fix: tear them down: `micakit cloud down t1`" in _all(res)


def test_ctrl_c_tears_every_machine_down(sky: Sky, series: Path, tmp_path: Path) -> None:
    sky.script(results=str(series), in_tail_logs="interrupt")
    res, _ = _run(tmp_path)
    assert res.exit_code == 130, res.output
    assert len(sky.calls("down")) == 2 and sky.clusters() == {}


def test_ctrl_c_while_launching_cancels_the_launches_under_way(sky: Sky, tmp_path: Path) -> None:
    sky.script(in_stream_and_get="interrupt")
    res, out = _run(tmp_path)
    assert res.exit_code == 130, res.output
    assert sky.calls("api_cancel") == [{"request_ids": ["req-0", "req-1"]}]
    assert [c["cluster_name"] for c in sky.calls("down")] == ["micakit-t1-1", "micakit-t1-2"]
    assert "tore down micakit-t1-1" in _all(res) and sky.clusters() == {}


@pytest.mark.parametrize(
    ("error", "message", "fix"),
    [
        ("quota", "Quota 'NVIDIA_L4_GPUS' exceeded", "ask the cloud for quota for L4 GPUs"),
        ("capacity", "ZONE_RESOURCE_POOL_EXHAUSTED", "name another zone or region with --infra"),
        ("credentials", "no cloud credentials SkyPilot can use", "run `sky check`"),
        ("api", "SkyPilot's API server does not answer", "start it with `sky api start`"),
        ("prechecks", "GCP credentials are not set", "run `sky check`"),
        ("network", "SkyPilot could not reach the network", "SkyPilot fetches its catalog"),
    ],
)
def test_launch_failures_are_exit_2_with_the_fix(
    sky: Sky, tmp_path: Path, error: str, message: str, fix: str
) -> None:
    sky.script(launch_error=error)
    res, out = _run(tmp_path, machines=1)
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit) and "Traceback" not in _all(res)
    assert message in _all(res) and f"fix: {fix}" in _all(res)
    # a launch that failed half-way may have left a machine: it is torn down too
    assert [c["cluster_name"] for c in sky.calls("down")] == ["micakit-t1-1"]
    assert sky.clusters() == {}
    record = json.loads((out / "fleet.json").read_text())["machines"][0]
    assert message in record["error"] and record["fix"].startswith(fix)


def test_without_skypilot_run_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "sky", None)
    res, out = _run(tmp_path)
    assert res.exit_code == 2
    assert "error: SkyPilot is not installed" in _all(res)
    assert "fix: install the extra: pip install 'micakit[cloud]'" in _all(res)
    assert not out.exists()  # a start refused leaves nothing behind


def test_run_without_yes_prints_the_plan_and_asks(sky: Sky, tmp_path: Path) -> None:
    res = _cloud("run", "--digests", _digests(tmp_path), input="n\n")
    assert res.exit_code == 2
    assert "1 x L4, g2-standard-8" in _all(res) and "Rent these machines? [y/N]" in _all(res)
    assert "nothing was rented" in _all(res) and not sky.calls("launch")


def test_an_image_not_named_by_digest_is_refused(sky: Sky) -> None:
    res = _cloud("run", "--image", "micakit:latest", "--pytorch-image", PYTORCH, "--yes")
    assert res.exit_code == 2
    assert "--image micakit:latest does not name an image by digest" in _all(res)
    assert not sky.calls("launch")


def test_audit_names_what_is_left_and_down_removes_it(sky: Sky) -> None:
    sky.script()
    state = sky.read()
    state["clusters"] = {
        "micakit-old-1": {
            "status": "UP", "labels": {"micakit": "old"}, "autostop": 30, "to_down": True,
            "launched_min": 0, "job_minutes": 60, "region": "us-central1", "zone": "us-central1-a",
        },
        "someone-else": {
            "status": "UP", "labels": {}, "autostop": -1, "to_down": False,
            "launched_min": 0, "job_minutes": 60, "region": "us-east1", "zone": "us-east1-b",
        },
    }  # fmt: skip
    sky.state.write_text(json.dumps(state))
    res = _cloud("audit")
    assert res.exit_code == 2
    assert "micakit-old-1\tUP\tus-central1\tautodown after 30 idle minutes" in _all(res)
    assert "someone-else" not in _all(res).split("error:")[0]
    assert "1 machine(s) of the kit are still up: micakit-old-1" in _all(res)
    assert "fix: tear them down: `micakit cloud down old`" in _all(res)
    assert sky.calls("status")[-1]["refresh"] == "FORCE"
    sky.script(down_fails=["micakit-old-1"])
    res = _cloud("down", "old")
    assert res.exit_code == 2 and "could not tear down micakit-old-1: Failed to terminate" in _all(
        res
    )
    assert "1 machine(s) of series old are still up: micakit-old-1" in _all(res)
    sky.script(down_fails=[])
    res = _cloud("down", "old")
    assert res.exit_code == 0 and "tore down micakit-old-1" in _all(res)
    assert _cloud("audit").exit_code == 0
    assert "someone-else" in sky.clusters()


def test_a_killed_kit_leaves_machines_that_delete_themselves(sky: Sky, tmp_path: Path) -> None:
    flag = tmp_path / "waiting"
    # the fake's clock stopped: only advance_clock moves it
    sky.script(in_tail_logs="hang", hang_flag=str(flag), job_minutes=60, minute_s=1e9)
    sky.script(provision_minutes=0)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(SDK)])}
    args = [
        "cloud", "run", "--machines", "2", "--digests", str(_digests(tmp_path)),
        "--series-id", "k9", "--out", str(tmp_path / "fleet"), "--yes",
    ]  # fmt: skip
    kit = subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args], env=env)
    try:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert kit.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        kit.send_signal(signal.SIGKILL)  # no finally runs
        kit.wait()
    finally:
        if kit.poll() is None:
            kit.kill()
    assert set(sky.clusters()) == {"micakit-k9-1", "micakit-k9-2"}
    assert _cloud("audit").exit_code == 2
    # the series would run its 60 minutes, then 15 idle minutes: autodown on the machine
    clock = importlib.import_module("sky").advance_clock  # the fake's, on the path (Sky)
    assert clock(74) == []
    assert sorted(clock(1)) == ["micakit-k9-1", "micakit-k9-2"]
    assert _cloud("audit").exit_code == 0

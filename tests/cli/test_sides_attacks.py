"""Attacks on the sides' isolation beyond test_sides_apart's (tests/fakes/hostile_contender.py):
a contender without namespaces that forges its supervisor's report; a confined one that looks
for an earlier check beside its own, and one that writes outside its results directory."""

from __future__ import annotations

import os
import signal
import sysconfig
import uuid
from pathlib import Path

import pytest

from kit.executors.supervised import HIDDEN, NAMESPACES
from tests.cli.test_correctness_cmd import STAND_IN_MODEL, check_args, nanogpt_tree
from tests.cli.test_sides_apart import (
    HOSTILE,
    _confined,
    _ran,
    _series,
    confined_series,
)
from tests.conftest import STEADY_STEP_MS, alive, records

pytestmark = pytest.mark.slow  # whole series


@pytest.mark.parametrize(
    "form, said",
    [
        # unconfined, the program reaches its supervisor's report pipe through /proc and can
        # kill it: its claim of namespaces and of no process left is not recorded, and its run,
        # whose supervisor it killed, is not ok
        ("forge", "none: the supervisor's report was not its own"),
        # a forged report that agrees with its supervisor's end (both killed by SIGKILL) still
        # cannot say namespaces where the kit gave none
        ("forge-dead", "none: the run's report claimed namespaces it was not given"),
    ],
)
def test_a_forged_supervisor_report_claims_nothing(
    tmp_path, fake_env, cli, monkeypatch, form, said
):
    """A contender without namespaces that forges its supervisor's report claims nothing."""
    marker = f"300.{uuid.uuid4().int % 10**12}"
    fake_env(step_ms=STEADY_STEP_MS)
    monkeypatch.setenv("HOSTILE", form)
    monkeypatch.setenv("HOSTILE_SLEEP", marker)
    monkeypatch.setenv("MICAKIT_LOCAL_CONFINE", "0")  # as on a machine without namespaces
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    try:
        out, made = _series(tmp_path, cli, tree, protocol)
        contender = _ran(out)
        assert contender, made.output
        for r in contender:
            assert r["isolation"].startswith(said), r["isolation"]
            assert form == "forge-dead" or r["status"] != "ok"
    finally:
        # with its supervisor killed, the daemon outlives the run: no subreaper is left
        for pid in alive(marker):
            os.kill(pid, signal.SIGKILL)


def test_method_b_cannot_be_copied_from_a_check_beside_it(tmp_path, fake_env, cli, monkeypatch):
    """An earlier check beside this one, from the same seed, holds PyTorch's losses for the
    same shared start; a confined contender sees the machine hidden and cannot find it."""
    if not _confined():
        pytest.skip("this machine allows no user namespaces")
    fake_env(step_ms=STEADY_STEP_MS)
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    assert cli(*check_args(tmp_path / "b1", protocol, tree, "B")).exit_code == 0
    monkeypatch.setenv("HOSTILE", "copy-sibling")
    res = cli(*check_args(tmp_path / "b2", protocol, tree, "B", "--contender", HOSTILE))
    assert res.exit_code != 0, res.output
    (run,) = [r for r in records(tmp_path / "b2") if r["log_dir"].startswith("runs/") and
              "contender" in r["log_dir"]]  # fmt: skip
    said = (tmp_path / "b2" / run["log_dir"] / "stderr.log").read_text()
    assert "cannot copy PyTorch's losses: no PyTorch log" in said, said
    assert "the machine hidden" in run["isolation"], run["isolation"]
    checks = tmp_path / "b2" / "checks.jsonl"
    assert not checks.exists() or '"passed": true' not in checks.read_text()


def test_a_confined_contender_cannot_write_outside_its_directory(
    tmp_path, fake_env, cli, monkeypatch
):
    """PyTorch's Python environment, a file beside the results directory and /tmp, which
    PyTorch's runs would share, are out of a confined contender's reach: the machine is
    hidden or read-only to it, and /tmp and /dev/shm are its own, gone with it."""
    if not _confined():
        pytest.skip("this machine allows no user namespaces")
    marker = f"{uuid.uuid4().int % 10**12}"
    beside = tmp_path / "outside.py"
    environment = Path(sysconfig.get_paths()["purelib"]) / f"hostile_probe_{marker}.py"
    for target in (beside, environment):
        target.write_text("x = 1\n")
    fake_env(step_ms=STEADY_STEP_MS)
    monkeypatch.setenv("HOSTILE", "reach")
    monkeypatch.setenv("HOSTILE_SLEEP", marker)
    monkeypatch.setenv("HOSTILE_TARGET", f"{beside}{os.pathsep}{environment}")
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    left = Path(f"/tmp/hostile-{marker}")
    try:
        out, _ = _series(tmp_path, cli, tree, protocol)
        contender = _ran(out)
        assert contender
        said = (out / contender[0]["log_dir"] / "stderr.log").read_text()
        if not environment.is_relative_to("/tmp"):  # under /tmp: its own layer takes the line
            assert f"cannot write {environment}: Read-only file system" in said, said
        # written, where it could be, into the run's own /tmp, and gone with it
        assert beside.read_text() == environment.read_text() == "x = 1\n"
        assert not left.exists()
        isolation = {r["isolation"] for r in records(out) if r.get("isolation") is not None}
        # PyTorch's side sees the machine read-only; the contender sees it hidden
        assert isolation == {
            f"{NAMESPACES}; only the run's mounts writable, /tmp and /dev/shm its own",
            f"{NAMESPACES}; {HIDDEN}; only the run's mounts writable, /tmp and /dev/shm its own",
        }
    finally:
        left.unlink(missing_ok=True)
        environment.unlink(missing_ok=True)


def test_a_timed_run_cannot_rewrite_the_products_record(tmp_path, fake_env, cli, monkeypatch):
    """Amendment 4.3: the discarded run writes the products record and every timed run reads
    it; a timed run that writes it finds its folder read-only."""
    out = confined_series(tmp_path, fake_env, cli, monkeypatch, "rewrite")
    (record,) = (out / "work" / "products").iterdir()
    assert "rewritten" not in record.read_text()
    timed = [r for r in _ran(out) if not r["discarded"]]
    assert timed
    for r in timed:
        said = (out / r["log_dir"] / "stderr.log").read_text()
        assert "cannot rewrite" in said and "Read-only file system" in said

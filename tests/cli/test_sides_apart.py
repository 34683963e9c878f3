"""No side can touch the other's files, and every process a run starts ends with it: a
contender written to game the kit (tests/fakes/hostile_contender.py) edits nanoGPT's train.py
mid-series, copies PyTorch's losses in a method B check, and leaves daemons behind."""

from __future__ import annotations

import hashlib
import json
import tempfile
import uuid
from pathlib import Path

import pytest

from kit.errors import ExitCode
from kit.executors.base import RunSpec
from kit.executors.local import LocalExecutor
from tests.cli.test_correctness_cmd import (
    STAND_IN_MODEL,
    check_args,
    nanogpt_tree,
    smoke_series,
)
from tests.conftest import FAKES, STEADY_STEP_MS, alive, records

pytestmark = pytest.mark.slow  # whole series and checks

HOSTILE = FAKES / "hostile_contender.py"


def _confined() -> bool:
    """Whether this machine gives a local run namespaces of its own (kit.executors.supervisor)."""
    with tempfile.TemporaryDirectory() as d:
        spec = RunSpec("probe", ("true",), confine=(Path(d),))
        outcome = LocalExecutor().run(spec, Path(d) / "logs")
    return bool(outcome.isolation and outcome.isolation.startswith("namespaces"))


def _series(tmp_path: Path, cli, tree: Path, protocol: Path):
    """A smoke series of the hostile contender, doing what $HOSTILE says."""
    return smoke_series(tmp_path, cli, tree, protocol, HOSTILE)


def confined_series(tmp_path: Path, fake_env, cli, monkeypatch, form: str) -> Path:
    """A smoke series of the hostile contender doing `form` (tests/fakes/hostile_contender.py),
    confined; skipped where the machine allows no user namespaces. It must end with exit 0."""
    if not _confined():
        pytest.skip("this machine allows no user namespaces")
    fake_env(step_ms=STEADY_STEP_MS)
    monkeypatch.setenv("HOSTILE", form)
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    out, made = _series(tmp_path, cli, tree, protocol)
    assert made.exit_code == 0, made.output
    return out


def _ran(out: Path) -> list[dict]:
    """The contender's records of runs that ran (a run not run has no outcome to record)."""
    return [r for r in records(out) if "contender" in r["config"] and r["start_ns"]]


def _train_py(out: Path) -> list[str]:
    return [(out / "work" / "nanogpt" / t / "train.py").read_text() for t in ("shipped", "patched")]


def test_a_confined_contender_cannot_edit_pytorchs_code(tmp_path, fake_env, cli, monkeypatch):
    out = confined_series(tmp_path, fake_env, cli, monkeypatch, "edit")
    assert all(not t.startswith("import time") for t in _train_py(out))
    contender = _ran(out)
    assert contender and all(r["isolation"].startswith("namespaces") for r in contender)
    said = (out / contender[0]["log_dir"] / "stderr.log").read_text()
    # it sees no tree to edit: its run mounts its products folder alone of the directory
    assert "cannot edit" in said and "No such file or directory" in said
    assert cli("verify", out).exit_code == 0


def test_an_edit_the_runs_could_make_stops_the_series_at_the_next_run(
    tmp_path, fake_env, cli, monkeypatch
):
    fake_env(step_ms=STEADY_STEP_MS)
    monkeypatch.setenv("HOSTILE", "edit")
    monkeypatch.setenv("MICAKIT_LOCAL_CONFINE", "0")  # as on a machine without namespaces
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    out, made = _series(tmp_path, cli, tree, protocol)
    assert made.exit_code == ExitCode.VERIFY_MISMATCH, made.output
    assert "work/nanogpt/shipped/train.py: changed" in made.output
    assert all(t.startswith("import time") for t in _train_py(out))
    # the run that edited is the last one recorded: no run after it ran the altered code
    last = records(out)[-1]
    assert "contender" in last["config"]
    assert last["isolation"] == "none"


def test_verify_names_a_tree_edited_after_the_series(tmp_path, fake_env, cli):
    fake_env(step_ms=STEADY_STEP_MS)
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    out, made = _series(tmp_path, cli, tree, protocol)
    assert made.exit_code == 0, made.output
    assert cli("verify", out).exit_code == 0
    train = out / "work" / "nanogpt" / "patched" / "train.py"
    train.write_text("import time; time.sleep(1)\n" + train.read_text())
    res = cli("verify", out)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH, res.output
    assert "work/nanogpt/patched/train.py: changed" in res.output
    # the listing edited to match is named too: the manifest holds its hash
    listing = out / "work" / "nanogpt" / "workspace.json"
    data = json.loads(listing.read_text())
    data["files"]["patched/train.py"] = hashlib.sha256(train.read_bytes()).hexdigest()
    listing.write_text(json.dumps(data))
    res = cli("verify", out)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH, res.output
    assert "work/nanogpt/workspace.json: changed" in res.output


@pytest.mark.parametrize(
    ("form", "confine"),
    [("daemon", "1"), ("daemon-null", "0")],
    ids=["holding-stdout-namespaces", "devnull-subreaper"],
)
def test_daemons_a_contender_leaves_are_stopped_and_named(
    tmp_path, fake_env, cli, monkeypatch, form, confine
):
    marker = f"300.{uuid.uuid4().int % 10**12}"  # a sleep no other process runs
    fake_env(step_ms=STEADY_STEP_MS)
    monkeypatch.setenv("HOSTILE", form)
    monkeypatch.setenv("HOSTILE_SLEEP", marker)
    monkeypatch.setenv("MICAKIT_LOCAL_CONFINE", confine)
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    out, made = _series(tmp_path, cli, tree, protocol)
    assert made.exit_code == 0, made.output
    contender = _ran(out)
    assert contender
    for r in contender:
        assert r["status"] == "ok"
        assert r["outlived"].startswith("1 process outlived the program and was stopped (sleep")
    assert alive(marker) == []  # none left after the series


def test_method_b_cannot_be_copied_or_is_marked(tmp_path, fake_env, cli, monkeypatch):
    """A contender that prints PyTorch's losses as its own: confined, it cannot read them and
    the check fails; unconfined, the check says so and gates nothing."""
    fake_env(step_ms=STEADY_STEP_MS)
    monkeypatch.setenv("HOSTILE", "copy")
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    args = ["--contender", HOSTILE]
    if _confined():
        out = tmp_path / "b"
        res = cli(*check_args(out, protocol, tree, "B", *args))
        assert res.exit_code != 0, res.output
        said = (out / records(out)[-1]["log_dir"] / "stderr.log").read_text()
        assert "cannot copy PyTorch's losses" in said
    monkeypatch.setenv("MICAKIT_LOCAL_CONFINE", "0")
    out = tmp_path / "b-open"
    res = cli(*check_args(out, protocol, tree, "B", *args))
    marked = "local executor: the contender could read the other side's files"
    assert marked in res.output
    assert marked in (out / "correctness.md").read_text()
    (check,) = [json.loads(x) for x in (out / "checks.jsonl").read_text().splitlines()]
    assert check["sides_isolated"] is False
    # the check's nanoGPT tree, edited afterwards, is named by `verify`
    train = out / "work" / "nanogpt" / "patched" / "train.py"
    train.write_text("import time\n" + train.read_text())
    res = cli("verify", out)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH, res.output
    assert "work/nanogpt/patched/train.py: changed" in res.output

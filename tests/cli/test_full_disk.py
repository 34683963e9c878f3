"""A full disk at each stage of a series: exit 2 with `error:` and `fix:` naming the disk, never a
traceback (the clock's reader, a process of its own, included); once space is freed the same
command, or `--resume`, goes on, and no finished run is lost or run twice.

The disk is a real one: a small tmpfs (`small_disk`), filled to its last byte at the stage.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pytest

from kit.engine import engine
from kit.errors import ExitCode
from kit.results import store
from kit.sides import nanogpt
from tests.conftest import (
    STEADY_STEP_MS,
    contender_args,
    fake_nanogpt_protocol,
    flat,
    pytorch_args,
    records,
    run_py,
)

pytestmark = pytest.mark.slow


def _run_py(args: list, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python run.py ARGS`, the documented invocation, its stderr kept whole (the reader's too)."""
    return run_py(*args, env=env)


def _said_full(code: int, err: str, disk: Path, elsewhere: str, then: str) -> None:
    """Exit 2, one error naming the disk and one fix saying how to go on, no traceback."""
    assert code == ExitCode.USER_ERROR, err
    assert "Traceback" not in err, err
    assert err.count("micakit: error: ") == 1 and err.count("  fix: ") == 1, err
    error = next(x for x in err.splitlines() if x.startswith("micakit: error: "))
    fix = next(x for x in err.splitlines() if x.startswith("  fix: "))
    assert "No space left on device" in error and f"the disk at {disk} is full" in error, err
    assert f"free space on {disk}" in fix and elsewhere in fix and then in fix, err


def _complete_once(out: Path, before: list[dict]) -> None:
    """Every finished run before the full disk is kept as it was; every planned run is done
    once."""
    after = records(out)
    assert after[: len(before)] == before, "a finished run was lost or changed"
    plan = json.loads((out / "plan.json").read_text())
    assert sorted(r["run_id"] for r in after) == list(range(len(plan["order"])))


def _env(tmp_path: Path, **fake) -> dict:
    env = dict(os.environ)
    env["MICAKIT_FAKE"] = json.dumps(
        {"step_ms": STEADY_STEP_MS, "state": str(tmp_path / "s"), **fake}
    )
    return env


def test_dataset_preparation(tmp_path, fast_protocol, small_disk):
    out = tmp_path / "r"
    args = contender_args(out, fast_protocol, "--precision", "float32")
    args += ["--data-dir", small_disk.root / "data"]
    small_disk.fill()
    res = _run_py(args, _env(tmp_path))
    _said_full(res.returncode, res.stderr, small_disk.root, "--data-dir", "same command again")
    assert "needed" in res.stderr  # the data's size is known before it is written
    assert not (out / store.MANIFEST).exists()
    small_disk.free()
    res = _run_py(args, _env(tmp_path))
    assert res.returncode == 0, res.stderr
    _complete_once(out, [])


def test_nanogpt_trees(tmp_path, small_disk, cli, fake_env, monkeypatch, capfd):
    fake_env(step_ms={"*": 2.0})
    protocol = fake_nanogpt_protocol(tmp_path / "p.toml", runs=1)
    out = small_disk.root / "r"
    copy = nanogpt.copy_run_files

    def full_first(*args, **kwargs):
        small_disk.fill()
        return copy(*args, **kwargs)

    monkeypatch.setattr(nanogpt, "copy_run_files", full_first)
    res = cli(*pytorch_args(out, protocol))
    _said_full(res.exit_code, res.output, small_disk.root, "--out", "same command again")
    monkeypatch.setattr(nanogpt, "copy_run_files", copy)
    small_disk.free()
    res = cli(*pytorch_args(out, protocol))
    assert res.exit_code == 0, res.output
    _complete_once(out, [])
    assert "Traceback" not in capfd.readouterr().err


def test_manifest_and_plan(tmp_path, fast_protocol, small_disk, cli, fake_env, monkeypatch):
    fake_env(step_ms={"*": 2.0})
    out = small_disk.root / "r"
    write_start = engine.Engine.write_start

    def full_first(self, *args, **kwargs):
        small_disk.fill()
        return write_start(self, *args, **kwargs)

    monkeypatch.setattr(engine.Engine, "write_start", full_first)
    args = contender_args(out, fast_protocol, "--precision", "float32")
    res = cli(*args)
    _said_full(res.exit_code, res.output, small_disk.root, "--out", "same command again")
    assert not (out / store.MANIFEST).exists()
    monkeypatch.setattr(engine.Engine, "write_start", write_start)
    small_disk.free()
    res = cli(*args)
    assert res.exit_code == 0, res.output
    _complete_once(out, [])


def test_mid_run_the_clocks_log(tmp_path, fast_protocol, small_disk):
    # the third run fills the disk as it starts: the reader cannot write its first line
    out = small_disk.root / "r"
    env = _env(tmp_path, events={"mica#3": "fill-disk"}, fill=str(small_disk.filler))
    # the disk fills as another program on the machine would fill it: a confined run could not
    # (the machine is read-only to it, kit.executors.supervisor), so the fake runs unconfined
    env["MICAKIT_LOCAL_CONFINE"] = "0"
    res = _run_py(contender_args(out, fast_protocol, "--precision", "float32"), env)
    resume = f"`micakit series --resume {out}`"
    _said_full(res.returncode, res.stderr, small_disk.root, "--out", resume)
    assert "attempt-1" in res.stderr  # the run's own folder is named
    before = records(out)
    assert len(before) == 2
    small_disk.free()
    res = _run_py(["series", "--resume", out], env)
    assert res.returncode == 0, res.stderr
    _complete_once(out, before)
    assert _run_py(["verify", out]).returncode == 0


def test_the_record_append(tmp_path, fast_protocol, small_disk, cli, fake_env, monkeypatch):
    fake_env(step_ms={"*": 2.0})
    out = small_disk.root / "r"
    append = store.ResultsDir.append_record
    page = resource.getpagesize()

    def full_at_third(self, record):
        done = records(self.root)
        line = len(json.dumps(record.to_json())) + 1
        # the disk is filled before the third record, once the record cannot fit in what is
        # left of runs.jsonl's last page (a tmpfs gives whole pages; that rest is the file's)
        if len(done) >= 2 and line > -(self.root / store.RECORDS).stat().st_size % page:
            small_disk.fill()
        return append(self, record)

    monkeypatch.setattr(store.ResultsDir, "append_record", full_at_third)
    res = cli(*contender_args(out, fast_protocol, "--precision", "float32"))
    resume = f"`micakit series --resume {out}`"
    _said_full(res.exit_code, res.output, small_disk.root, "--out", resume)
    assert str(out / store.RECORDS) in res.output
    monkeypatch.setattr(store.ResultsDir, "append_record", append)
    small_disk.free()
    # a line the full disk tore is read as absent, never as a run (the resume cuts it)
    before = [flat(r) for r in store.ResultsDir.open(out).records()]
    assert len(before) >= 2
    res = cli("series", "--resume", out)
    assert res.exit_code == 0, res.output
    _complete_once(out, before)

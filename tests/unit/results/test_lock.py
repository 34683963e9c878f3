"""One writer per results directory: a second is refused at once; a killed holder blocks none."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kit.errors import UserError
from kit.results.lock import LOCK, WriterLock
from kit.results.store import ResultsDir
from tests.conftest import contender_args

HOLD = """
import sys, time
from pathlib import Path
from kit.results.lock import WriterLock
WriterLock(Path(sys.argv[1])).acquire()
print("held", flush=True)
time.sleep(60)
"""


def _holder(root: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def _end(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()
    proc.stdout.close()


def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
    proc = _holder(tmp_path)
    try:
        with pytest.raises(UserError) as e:
            WriterLock(tmp_path).acquire()
        assert f"pid {proc.pid}" in e.value.message
        assert socket.gethostname() in e.value.message
        assert "kill" in e.value.fix
    finally:
        _end(proc)


def test_a_lock_left_by_a_killed_process_blocks_nothing(tmp_path):
    proc = _holder(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    _end(proc)
    assert (tmp_path / LOCK).exists()  # the file stays; the kernel's lock went with its holder
    lock = WriterLock(tmp_path)
    lock.acquire()
    assert lock.held
    assert str(os.getpid()) in (tmp_path / LOCK).read_text()


def test_the_lock_is_taken_once_and_released(tmp_path):
    lock = WriterLock(tmp_path)
    lock.acquire()
    lock.acquire()  # the holder asking again is no second writer
    with pytest.raises(UserError):
        WriterLock(tmp_path).acquire()
    lock.release()
    WriterLock(tmp_path).acquire()


def test_a_second_new_series_on_one_directory_is_refused(tmp_path):
    root = tmp_path / "r"
    first = ResultsDir.create(root)
    with pytest.raises(UserError) as e:
        ResultsDir.create(root)
    assert f"pid {os.getpid()}" in e.value.message
    first.writer.release()
    # the directory never got its manifest: the same command starts it again
    ResultsDir.create(root)


def test_the_cli_refuses_a_second_writer_with_exit_2(tmp_path, fast_protocol, fake_env, cli):
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    out.mkdir()
    proc = _holder(out)
    args = contender_args(out, fast_protocol, "--precision", "float32")
    try:
        res = cli(*args)
        assert res.exit_code == 2, res.output
        assert f"pid {proc.pid}" in res.output
    finally:
        _end(proc)
    assert cli(*args).exit_code == 0

"""Whole process trees: a stop, a stall, SIGTERM or the kit's own death end every process of a
run, with a contender that is a wrapper shell script (no exec) around the real program."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.executors.base import RunSpec
from kit.executors.local import LocalExecutor

ROOT = Path(__file__).resolve().parents[3]


def _wrapper(tmp_path: Path, then: str = "sleep 300") -> tuple[Path, Path]:
    """A shell script that starts its program as a child (no exec) and waits for it; the
    program writes its pid, prints a line, then does `then`."""
    pidfile = tmp_path / "program.pid"
    program = tmp_path / "program.sh"
    program.write_text(
        f"#!/bin/sh\necho $$ > {pidfile}\necho 'step 0 loss 4.0 time_ms 0'\n{then}\n"
    )
    wrapper = tmp_path / "wrapper.sh"
    wrapper.write_text(f"#!/bin/sh\n{program}\necho done\n")
    for p in (program, wrapper):
        p.chmod(0o755)
    return wrapper, pidfile


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose: it holds no card and no pipe
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _pid(pidfile: Path, within_s: float = 20.0) -> int:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pidfile.exists() and pidfile.read_text().strip():
            return int(pidfile.read_text())
        time.sleep(0.05)
    raise AssertionError("the program never started")


def test_a_stall_stops_the_whole_tree_and_says_why(tmp_path):
    wrapper, pidfile = _wrapper(tmp_path)
    spec = RunSpec("stall", (str(wrapper),), stall_s=1.0)
    started = time.monotonic()
    outcome = LocalExecutor(grace_s=1.0).run(spec, tmp_path / "logs")
    assert time.monotonic() - started < 30
    assert outcome.stopped and "no output line for 1 s" in outcome.stopped
    assert outcome.exit_code is not None and outcome.exit_code != 0
    assert _gone(_pid(pidfile))
    assert b"step 0 loss" in (tmp_path / "logs" / "stdout.log").read_bytes()


def test_the_whole_run_limit_stops_a_run_that_keeps_printing(tmp_path):
    wrapper, pidfile = _wrapper(tmp_path, "while true; do echo tick; sleep 0.1; done")
    spec = RunSpec("limit", (str(wrapper),), stall_s=5.0, limit_s=2.0)
    outcome = LocalExecutor(grace_s=1.0).run(spec, tmp_path / "logs")
    assert outcome.stopped and "whole-run limit" in outcome.stopped
    assert _gone(_pid(pidfile))


def test_what_a_finished_wrapper_leaves_in_its_group_is_ended(tmp_path):
    pidfile = tmp_path / "bg.pid"
    wrapper = tmp_path / "w.sh"
    wrapper.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pidfile}\necho out\nexit 0\n")
    wrapper.chmod(0o755)
    outcome = LocalExecutor().run(RunSpec("bg", (str(wrapper),)), tmp_path / "logs")
    assert outcome.exit_code == 0 and outcome.stopped is None
    assert _gone(_pid(pidfile))


KIT = """
import sys
from pathlib import Path
from kit.engine.engine import sigterm_as_interrupt
from kit.executors.base import RunSpec
from kit.executors.local import LocalExecutor
with sigterm_as_interrupt():
    try:
        LocalExecutor(grace_s=1.0).run(RunSpec("kit", (sys.argv[1],)), Path(sys.argv[2]))
    except KeyboardInterrupt:
        sys.exit(130)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_the_kits_stop_or_death_ends_the_whole_tree(tmp_path, sig, sigint_default):
    wrapper, pidfile = _wrapper(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    kit = subprocess.Popen(
        [sys.executable, "-c", KIT, str(wrapper), str(tmp_path / "logs")], env=env
    )
    program = _pid(pidfile)
    kit.send_signal(sig)
    code = kit.wait(30)
    assert code == (-9 if sig == signal.SIGKILL else 130)
    assert _gone(program), f"the program outlived the kit's {sig.name}"
    # the reader, too, ended: nothing holds the logs open
    out = subprocess.run(["pgrep", "-f", f"kit.measure.clock .*{tmp_path}"], capture_output=True)
    assert out.stdout.strip() == b"" or _gone(int(out.stdout.split()[0]))


def test_the_program_does_not_inherit_held_signals(tmp_path):
    script = tmp_path / "mask.sh"
    # read by the shell itself: a child (grep) could read the shell's mask while the shell,
    # forking it, holds every signal for a moment (dash does)
    script.write_text(
        "#!/bin/sh\nwhile read -r key value; do\n"
        '  [ "$key" = SigBlk: ] && echo "$key $value"\ndone < /proc/$$/status\n'
    )
    script.chmod(0o755)
    LocalExecutor().run(RunSpec("mask", (str(script),)), tmp_path / "logs")
    blocked = (tmp_path / "logs" / "stdout.log").read_text().split()[-1]
    assert int(blocked, 16) & ((1 << (signal.SIGTERM - 1)) | (1 << (signal.SIGINT - 1))) == 0

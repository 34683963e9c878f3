"""kit.measure.alone: a reader is alone only where no other live reader has marked the machine;
a later reader lowers an earlier one's real-time priority; a dead reader's mark is removed."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from kit.measure import alone


def test_the_first_reader_is_alone_and_a_second_is_not(tmp_path):
    first = alone.mark(101, tmp_path)
    assert first.alone
    second = alone.mark(102, tmp_path)
    assert not second.alone
    first.close()
    third = alone.mark(103, tmp_path)
    assert not third.alone  # the second still reads
    second.close()
    third.close()
    assert alone.mark(104, tmp_path).alone
    assert [p.name for p in tmp_path.iterdir()] == [f"{os.getpid()}-104"]


def test_a_dead_readers_mark_is_removed_and_not_counted(tmp_path):
    (tmp_path / "999999-1").write_text("1")  # no one holds its lock: its reader died
    presence = alone.mark(7, tmp_path)
    assert presence.alone and not (tmp_path / "999999-1").exists()
    presence.close()


def test_a_folder_it_cannot_mark_counts_as_not_alone(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert not alone.mark(1, blocked).alone


# a stand-in reader: a process whose arguments name kit.measure.clock, at a real-time
# priority, marked; it says its thread's id and waits for its stdin to close
READER = """
import os, sys, threading
from pathlib import Path
from kit.measure import alone
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
presence = alone.mark(threading.get_native_id(), Path(sys.argv[1]))
print(threading.get_native_id(), presence.alone, flush=True)
sys.stdin.read()
"""


def _real_time_allowed() -> bool:
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except PermissionError:
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


def test_a_later_reader_lowers_an_earlier_ones_real_time_priority(tmp_path):
    if not _real_time_allowed():
        pytest.skip("no real-time priority here (root or CAP_SYS_NICE)")
    argv = [sys.executable, "-c", READER, str(tmp_path), "kit.measure.clock"]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as first:
        tid, was_alone = first.stdout.readline().split()
        assert was_alone == "True" and os.sched_getscheduler(int(tid)) == os.SCHED_FIFO
        second = alone.mark(threading.get_native_id(), tmp_path)
        assert not second.alone
        assert os.sched_getscheduler(int(tid)) == os.SCHED_OTHER
        second.close()
        first.stdin.close()


def test_a_mark_that_names_no_reader_of_the_kits_is_never_acted_on(tmp_path):
    """The folder is everyone's: a mark naming some other real-time thread (here this test's
    own, in a process that is no reader) counts as a reader but lowers nothing."""
    if not _real_time_allowed():
        pytest.skip("no real-time priority here (root or CAP_SYS_NICE)")
    started, done = threading.Event(), threading.Event()
    tids: list[int] = []

    def held() -> None:
        tids.append(threading.get_native_id())
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        started.set()
        done.wait(10)

    t = threading.Thread(target=held)
    t.start()
    started.wait(10)
    try:
        planted = alone.mark(tids[0], tmp_path)
        later = alone.mark(threading.get_native_id(), tmp_path)
        assert not later.alone
        assert os.sched_getscheduler(tids[0]) == os.SCHED_FIFO
        planted.close()
        later.close()
    finally:
        done.set()
        t.join()


# a program that finds its run's reader (the process whose arguments name its stdout.log) and
# prints the scheduling policy of the reader's main thread
FIND_READER = """
import os, sys
log = sys.argv[1]
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
    except OSError:
        continue
    if b"kit.measure.clock" in args and log.encode() in args:
        print("reader", os.sched_getscheduler(int(pid)), flush=True)
"""


def test_by_default_the_reader_thread_keeps_an_ordinary_priority(tmp_path, monkeypatch):
    from kit.executors.base import RunSpec
    from kit.executors.local import LocalExecutor
    from kit.measure import clock

    monkeypatch.delenv(clock.REALTIME_ENV, raising=False)
    folder = tmp_path / "run"
    log = folder / "stdout.log"
    LocalExecutor().run(RunSpec("look", (sys.executable, "-c", FIND_READER, str(log))), folder)
    said = [ln.split()[-1] for ln in log.read_text().splitlines() if " reader " in ln]
    assert said == [str(os.SCHED_OTHER)], log.read_text()

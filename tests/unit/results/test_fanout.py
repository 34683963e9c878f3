"""Per-run work spread over the cores (kit.results.fanout): the same results, in the same order,
as a plain loop; errors raised as the loop would raise them; a plain loop where forking does
not pay or is not safe."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading

import pytest

from kit.errors import UserError
from kit.results import fanout
from tests.conftest import ROOT

FORKS = fanout.cores() > 1


def _pid_and_square(x: int) -> tuple[int, int]:
    return os.getpid(), x * x


@pytest.mark.skipif(not FORKS, reason="one core: the plain loop is all there is")
def test_the_work_is_shared_among_processes_and_comes_back_in_order():
    got = fanout.map_in_order(_pid_and_square, range(1000), least=10)
    assert [y for _, y in got] == [x * x for x in range(1000)]
    pids = {pid for pid, _ in got}
    assert os.getpid() in pids and len(pids) > 1  # the caller did a share, workers the rest


def test_few_items_run_here_in_a_plain_loop():
    got = fanout.map_in_order(_pid_and_square, range(5))  # fewer than fanout.LEAST
    assert got == [(os.getpid(), x * x) for x in range(5)]


def test_another_thread_keeps_it_a_plain_loop():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        got = fanout.map_in_order(_pid_and_square, range(100), least=1)
    finally:
        stop.set()
        t.join()
    assert {pid for pid, _ in got} == {os.getpid()}


def _fails_at_700(x: int) -> int:
    if x == 700:
        raise UserError(f"item {x} is wrong", "mend it")
    return x


@pytest.mark.parametrize("least", [1, 10**9])
def test_an_error_in_a_worker_is_raised_whole(least):
    with pytest.raises(UserError, match="item 700 is wrong") as e:
        fanout.map_in_order(_fails_at_700, range(1000), least=least)
    assert e.value.fix == "mend it"


def test_a_user_error_survives_pickling_with_its_fix():
    e = pickle.loads(pickle.dumps(UserError("what", "how")))
    assert (e.message, e.fix, str(e)) == ("what", "how", "what\n  fix: how")


def _pid() -> int:
    return os.getpid()


def _fails() -> int:
    raise UserError("a child failed", "see why")


@pytest.mark.parametrize("least", [1, 10**9])
def test_children_give_what_calling_them_gives(least):
    job = fanout.Children([_pid, _pid], size=5000, least=least)
    here = sum(range(10_000))  # the caller goes on meanwhile
    pids = job.result()
    assert here and len(pids) == 2
    if least == 1 and FORKS:
        assert os.getpid() not in pids and len(set(pids)) == 2  # a process each
    else:
        assert pids == [os.getpid()] * 2
    with pytest.raises(UserError, match="a child failed"):
        fanout.Children([_pid, _fails], size=5000, least=least).result()


QUIET = """
import os, signal
from kit.results import fanout

class Stopped(Exception):
    pass

def stop(*_):
    raise Stopped

def square(x):
    return x * x

signal.signal(signal.SIGTERM, stop)  # as a series installs it
for _ in range(10):  # a worker stopped as it waits for work: not each time, so ten times
    assert fanout.map_in_order(square, range(1000), least=10) == [x * x for x in range(1000)]
    assert fanout.Children([os.getpid], size=5000, least=1).result() != [os.getpid()]
print("done")
"""


@pytest.mark.skipif(not FORKS, reason="one core: no worker to stop")
def test_workers_end_quietly_under_the_kits_own_sigterm_handler():
    """A series installs a SIGTERM handler that raises; the workers it forks at its end (the
    report of thousands of runs) are stopped with SIGTERM once done, and must end quietly."""
    run = subprocess.run(
        [sys.executable, "-c", QUIET], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert run.returncode == 0 and run.stdout.strip() == "done", run.stderr
    assert "Traceback" not in run.stderr and "Stopped" not in run.stderr, run.stderr


def _dies() -> int:
    os._exit(9)  # a worker killed, as by the out-of-memory killer


@pytest.mark.skipif(not FORKS, reason="one core: no worker to lose")
def test_a_worker_that_dies_is_an_error_at_once_not_a_wait():
    with pytest.raises(RuntimeError, match="ended without answering \\(exit 9\\)"):
        fanout.Children([_pid, _dies], size=5000, least=1).result()


@pytest.mark.skipif(not FORKS, reason="one core: the plain loop is all there is")
@pytest.mark.parametrize("where", ["walk", "audit"])
def test_a_walk_or_audit_that_fails_reaps_the_workers_beside_it_first(where):
    """`report` and `verify` audit the walk's listing in their own process while the judging
    workers go on (kit.results.audit._walked): an error there is raised once those workers
    are reaped, none left running."""
    import multiprocessing
    import time

    from kit.results import audit

    def walk() -> tuple[list[str], dict[str, frozenset[str]]]:
        if where == "walk":
            raise OSError("the walk failed")
        return [], {}

    def audited(listing: dict[str, frozenset[str]]) -> list[str]:
        raise OSError("the audit failed")

    walker = fanout.Children([walk], size=1, least=0)
    judging = fanout.Children([lambda: time.sleep(0.3) or "judged"], size=1, least=0)
    assert multiprocessing.active_children()  # the judging worker, asleep
    with pytest.raises(OSError, match=f"the {where} failed"):
        audit._walked(walker, judging, audited)
    assert multiprocessing.active_children() == []

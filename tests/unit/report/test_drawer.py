"""The plots' drawer (kit.report.drawer): a process forked when `verify` or `publish` starts,
which draws what it is sent, in order, the same bytes as drawing here; a call that does not
pickle is left to the caller, an error in a drawing is raised in the caller, and an unused
drawer ends when it is closed."""

from __future__ import annotations

import functools
import os

import pytest

from kit.report import drawer, figures
from kit.results import fanout

FORKS = fanout.forkable(1, 1)


def _pid(tag: str) -> bytes:
    return f"{tag}:{os.getpid()}".encode()


def _fails() -> bytes:
    raise ValueError("a drawing that fails")


def _loss_curve() -> functools.partial:
    curve = figures.LossCurve(
        label="mica", side="contender", step=(0, 10, 20), loss=(4.0, 3.0, 2.5), variant="mica"
    )
    return functools.partial(figures.loss_curves_png, [curve], "a title")


@pytest.mark.skipif(not FORKS, reason="one core or no fork: there is no drawer")
def test_the_drawer_draws_in_its_own_process_in_order_and_the_same_bytes():
    d = drawer.Drawer()
    calls = [functools.partial(_pid, "a"), _loss_curve(), functools.partial(_pid, "b")]
    wait = d.send(calls)
    assert wait is not None
    first, png, last = wait()
    assert first.startswith(b"a:") and last.startswith(b"b:")
    assert first != f"a:{os.getpid()}".encode()  # drawn by another process
    assert png == _loss_curve()()  # the same bytes as drawing here
    # the drawings shared among the cores: the last one drawn by a worker of the drawer's
    assert first.split(b":")[1] != last.split(b":")[1]
    assert d.send(calls) is None  # one batch a drawer


@pytest.mark.skipif(not FORKS, reason="one core or no fork: there is no drawer")
def test_what_does_not_pickle_is_the_callers_and_an_error_is_raised_here():
    d = drawer.Drawer()
    assert d.send([lambda: b"not picklable"]) is None
    d = drawer.Drawer()
    wait = d.send([_fails])
    assert wait is not None
    with pytest.raises(ValueError, match="a drawing that fails"):
        wait()


@pytest.mark.skipif(not FORKS, reason="one core or no fork: there is no drawer")
def test_an_unused_drawer_ends_when_closed():
    d = drawer.Drawer()
    process = d._process
    assert process is not None and process.is_alive()
    d.close()
    assert not process.is_alive() and process.exitcode == 0


def test_without_fork_there_is_no_drawer(monkeypatch):
    monkeypatch.setattr(fanout, "forkable", lambda size, least=None: False)
    d = drawer.Drawer()
    assert d.send([functools.partial(_pid, "a")]) is None
    d.close()

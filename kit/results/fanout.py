"""Per-run work over thousands of runs, spread over the machine's cores.

A report or `verify` of a large results directory judges every run again from its raw logs and
hashes every raw file: the same small work thousands of times, independent from run to run.
`map_in_order` hands contiguous slices of the items to forked processes (they inherit the
function and the items, so nothing is sent to them) and does the first slice itself; the
results come back through a pipe each, in the items' order, exactly as a plain loop gives them.
`Children` starts a few whole jobs so and returns at once, so the caller goes on with other
work; `result()` waits for them.

It stays a plain loop where forking would not pay or is not safe: few items, one core, no
`fork` (macOS and Windows start processes otherwise), or another thread running (a forked child
inherits no thread but every lock one held). A process per job, rather than a pool: a worker
that dies (killed, out of memory) is an error here at once, never a wait for an answer that
cannot come.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

LEAST = 2000  # below this many items, a plain loop is faster than starting workers


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def forkable(size: int, least: int | None = None) -> bool:
    """Whether work of `size` items is shared among forked processes here (at least `least`
    items, default LEAST): more than one core, `fork`, and no other thread running."""
    return _forkable(size, least)


def _forkable(size: int, least: int | None) -> bool:
    return (
        size >= (LEAST if least is None else least)
        and cores() > 1
        and "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
    )


def map_in_order(fn: Callable[[T], R], items: Sequence[T], least: int | None = None) -> list[R]:
    """[fn(x) for x in items], with the work shared among the cores where it pays. An
    exception in any item is raised here, as the plain loop would raise it."""
    if not _forkable(len(items), least):
        return [fn(x) for x in items]
    step = -(-len(items) // min(cores(), 8))
    spans = [(i, min(i + step, len(items))) for i in range(0, len(items), step)]
    rest = Children([functools.partial(_slice, fn, items, *s) for s in spans[1:]], 0, least=0)
    try:
        first = _slice(fn, items, *spans[0])
    except BaseException:
        with contextlib.suppress(Exception):
            rest.result()  # reaped; the first slice's error is the one a plain loop raises
        raise
    return first + [r for part in rest.result() for r in part]


def _slice(fn: Callable[[T], R], items: Sequence[T], start: int, end: int) -> list[R]:
    return [fn(x) for x in items[start:end]]


class Children:
    """Each of `fns` called in a forked process of its own while the caller goes on (`verify`
    audits and hashes while the report's modules load); or, where forking does not pay or is
    not safe, called in turn by `result()`. `size`: how many items the work covers."""

    def __init__(self, fns: Sequence[Callable[[], Any]], size: int, least: int | None = None):
        self._fns = list(fns)
        self._running: list[tuple[BaseProcess, Connection]] = []  # (process, its pipe's read end)
        if self._fns and _forkable(size, least):
            ctx = multiprocessing.get_context("fork")
            for fn in self._fns:
                read, write = ctx.Pipe(duplex=False)
                process = ctx.Process(target=_answer, args=(fn, write), daemon=True)
                process.start()
                write.close()
                self._running.append((process, read))

    def result(self) -> list[Any]:
        """Each function's value, in order; an exception in one is raised here."""
        if not self._running:
            fns, self._fns = self._fns, []
            return [fn() for fn in fns]
        answers = []
        for process, read in self._running:
            try:
                answers.append(read.recv())
            except EOFError:
                process.join()
                why = f"a worker process ended without answering (exit {process.exitcode})"
                answers.append((False, RuntimeError(why)))
            read.close()
            process.join()
        self._running = []
        for ok, value in answers:
            if not ok:
                raise value
        return [value for _, value in answers]


def _answer(fn: Callable[[], Any], write: Connection) -> None:
    # the worker leaves signals to the kit: Ctrl-C reaches the kit, which then waits for it or
    # exits; a SIGTERM ends it quietly, not through the kit's own handler inherited with the
    # fork (a series turns SIGTERM into an interruption, with a traceback)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        answer = (True, fn())
    except Exception as e:  # raised again in the caller, whole
        answer = (False, e)
    write.send(answer)
    write.close()

"""Per-run work over thousands of runs, spread over the machine's cores.

A report or `verify` of a large results directory judges every run again from its raw logs and
hashes every raw file: the same small work thousands of times, independent from run to run.
`map_in_order` hands contiguous slices of the items to forked worker processes (they inherit
the function and the items, so nothing is sent to them but two numbers) and does the first
slice itself; the results come back in the items' order, exactly as a plain loop gives them.

It stays a plain loop where forking would not pay or is not safe: few items, one core, no
`fork` (macOS and Windows start processes otherwise), or another thread running (a forked child
inherits no thread but every lock one held).

`Children` starts a few whole jobs in forked processes and returns at once, so the caller goes
on with other work; `result()` waits for them.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

LEAST = 2000  # below this many items, a plain loop is faster than starting workers
_WORK: tuple[Callable[[Any], Any], Sequence[Any]] | None = None  # what the forked workers see


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _forkable(items: Sequence[Any], least: int | None) -> bool:
    return (
        len(items) >= (LEAST if least is None else least)
        and cores() > 1
        and "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
    )


def map_in_order(fn: Callable[[T], R], items: Sequence[T], least: int | None = None) -> list[R]:
    """[fn(x) for x in items], with the work shared among the cores where it pays. An
    exception in any item is raised here, as the plain loop would raise it."""
    workers = min(cores(), 8)
    if not _forkable(items, least):
        return [fn(x) for x in items]
    global _WORK
    _WORK = (fn, items)
    try:
        step = -(-len(items) // workers)
        spans = [(i, min(i + step, len(items))) for i in range(0, len(items), step)]
        if len(spans) < 2:
            return _slice(spans[0])
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(len(spans) - 1, initializer=_worker_signals) as pool:
            rest = pool.map_async(_slice, spans[1:])
            first = _slice(spans[0])
            out = first + [r for part in rest.get() for r in part]
        return out
    finally:
        _WORK = None


def _worker_signals() -> None:
    """A worker leaves signals to the kit: Ctrl-C reaches the kit, which stops the workers; the
    SIGTERM that stops one ends it quietly (not through the kit's own handler, inherited with
    the fork, which would turn it into an interruption with a traceback)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _slice(span: tuple[int, int]) -> list[Any]:
    assert _WORK is not None
    fn, items = _WORK
    return [fn(x) for x in items[span[0] : span[1]]]


class Children:
    """Each of `fns` called in a forked process of its own while the caller goes on (`verify`
    audits and hashes while the report's modules load); or, where forking does not pay or is
    not safe, called in turn by `result()`. `size`: how many items the work covers."""

    def __init__(self, fns: Sequence[Callable[[], Any]], size: int, least: int | None = None):
        self._fns = list(fns)
        self._running: list[tuple[Any, Any]] = []  # (process, the read end of its pipe)
        if self._fns and _forkable(range(size), least):
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
            return [fn() for fn in self._fns]
        answers = []
        for process, read in self._running:
            try:
                answers.append(read.recv())
            except EOFError:
                answers.append((False, RuntimeError(f"a worker process died ({process.exitcode})")))
            read.close()
            process.join()
        self._running = []
        for ok, value in answers:
            if not ok:
                raise value
        return [value for _, value in answers]


def _answer(fn: Callable[[], Any], write: Any) -> None:
    _worker_signals()
    try:
        answer = (True, fn())
    except Exception as e:  # raised again in the caller, whole
        answer = (False, e)
    write.send(answer)
    write.close()

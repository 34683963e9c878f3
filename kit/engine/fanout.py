"""Per-run work over thousands of runs, spread over the machine's cores.

A report or `verify` of a large results directory judges every run again from its raw logs and
hashes every raw file: the same small work thousands of times, independent from run to run.
`map_in_order` hands contiguous slices of the items to forked worker processes (they inherit
the function and the items, so nothing is sent to them but two numbers) and does the first
slice itself; the results come back in the items' order, exactly as a plain loop gives them.

It stays a plain loop where forking would not pay or is not safe: few items, one core, no
`fork` (macOS and Windows start processes otherwise), or another thread running (a forked child
inherits no thread but every lock one held).

`in_background` starts such work in forked workers and returns at once, so the caller goes on
with other work (`verify` judges and renders while the raw files are hashed); `result()` waits.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

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
        with multiprocessing.get_context("fork").Pool(len(spans) - 1) as pool:
            rest = pool.map_async(_slice, spans[1:])
            first = _slice(spans[0])
            out = first + [r for part in rest.get() for r in part]
        return out
    finally:
        _WORK = None


def _slice(span: tuple[int, int]) -> list[Any]:
    assert _WORK is not None
    fn, items = _WORK
    return [fn(x) for x in items[span[0] : span[1]]]


class Background(Generic[R]):
    """[fn(x) for x in items], computed by forked workers while the caller goes on; or, where
    forking does not pay, by `result()` itself."""

    def __init__(self, fn: Callable[[T], R], items: Sequence[T], least: int | None = None) -> None:
        self._fn, self._items = fn, items
        self._pool: Any = None
        self._pending: Any = None
        if _forkable(items, least):
            global _WORK
            _WORK = (fn, items)
            try:
                workers = min(cores() - 1, 8)
                step = -(-len(items) // workers)
                spans = [(i, min(i + step, len(items))) for i in range(0, len(items), step)]
                self._pool = multiprocessing.get_context("fork").Pool(len(spans))
                self._pending = self._pool.map_async(_slice, spans)
            finally:
                _WORK = None  # the workers were forked with it

    def result(self) -> list[R]:
        if self._pool is None:
            return [self._fn(x) for x in self._items]
        try:
            return [r for part in self._pending.get() for r in part]
        finally:
            self._pool.terminate()
            self._pool = None


def in_background(
    fn: Callable[[T], R], items: Sequence[T], least: int | None = None
) -> Background[R]:
    return Background(fn, items, least)

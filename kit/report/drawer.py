"""A process that draws report.html's plots, forked when a command that draws them starts
(`verify`, `publish`), so that matplotlib loads while the command reads and judges the
directory, not after: loading it is most of a small report's drawing time.

The drawer imports the plotting modules at once, then waits for one batch of drawings, each a
call of a function of kit.report.figures on plain data (sent pickled), and answers with the
PNG bytes, in order. Where forking is not safe or does not pay (kit.results.fanout: one core,
no `fork`, another thread running) there is no drawer, and where a batch cannot be sent the
caller draws it itself: the same calls, the same bytes.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from kit.results import fanout


class Drawer:
    """One batch of drawings, in a process forked now (`send`, then the answer's `result`)."""

    def __init__(self) -> None:
        self._conn: Connection | None = None
        self._process: BaseProcess | None = None
        if not fanout.forkable(1, 1):
            return
        ctx = multiprocessing.get_context("fork")
        mine, theirs = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(theirs, mine), daemon=True)
        self._process.start()
        theirs.close()
        self._conn = mine

    def send(self, calls: Sequence[Callable[[], bytes]]) -> Callable[[], list[bytes]] | None:
        """The calls handed to the drawer, and how to wait for their bytes; None where there is
        no drawer or the calls cannot be sent (the caller draws them itself)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return None
        try:
            conn.send(list(calls))
        except Exception:  # noqa: BLE001 - a call that does not pickle: drawn by the caller
            self._stop(conn)
            return None

        def result() -> list[bytes]:
            try:
                ok, value = conn.recv()
            except EOFError:
                code = self._stop(conn)
                why = f"the plots' drawer ended without answering (exit {code})"
                raise RuntimeError(why) from None
            self._stop(conn)
            if not ok:
                raise value
            return value

        return result

    def close(self) -> None:
        """The drawer stopped unused (a command that ends before it draws)."""
        if self._conn is not None:
            self._stop(self._conn)
            self._conn = None

    def _stop(self, conn: Connection) -> int | None:
        conn.close()  # an idle drawer reads the end of its pipe, and ends
        if self._process is None:
            return None
        self._process.join()
        return self._process.exitcode


def _serve(conn: Connection, other: Connection) -> None:
    # signals are the command's, as fanout's workers leave them
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    other.close()
    # the command ends the drawer (daemonic in its eyes); the drawer's own workers are its
    # drawings, each ended and joined before it answers
    multiprocessing.current_process().daemon = False
    preload()  # before it is asked
    try:
        calls = conn.recv()
    except EOFError:
        return  # the command ended without drawing
    answer: tuple[bool, object]
    try:
        # the drawings shared among the cores (forked again, matplotlib loaded): the command
        # itself mostly waits for them by then
        answer = (True, fanout.map_in_order(_draw, calls, least=2))
    except Exception as e:  # raised again in the command, whole
        answer = (False, e)
    conn.send(answer)
    conn.close()


def _draw(call: Callable[[], bytes]) -> bytes:
    return call()


def preload() -> None:
    """The plotting modules loaded (the drawer's first work); an error is left to the drawing
    itself, which raises it where the caller sees it."""
    try:
        from matplotlib.backends import backend_agg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401

        from kit.report import figures  # noqa: F401
    except Exception:  # noqa: BLE001 - the drawing itself raises it, where the caller sees it
        pass

"""Whether a run's reader is the only one on the machine: the one case where it may take a
real-time priority (kit.measure.clock).

A reader thread at a real-time priority stamps lines at the floor's delay however busy the
machine (docs/benchmarks.md, "The outside clock under load"), but it preempts every ordinary
program as it wakes: on a machine where several series run at once, each reader would delay
the programs the others measure. So each reader marks its presence for as long as it reads:
a file named by its process in a folder every reader on the machine shares, locked (`flock`,
exclusive) while it lives, holding the id of its thread. A reader that finds another live mark
keeps an ordinary priority and lowers the other's to ordinary too (a reader that was alone
when it began is not alone any more); the marks of readers that died are removed. Two that
start together each see the other's mark, since each marks before it looks.

The folder is /dev/shm's (memory, the machine's own; a container has its own, so readers in
different containers do not see each other), else the temporary folder's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path

NAME = "micakit-readers"


def folder() -> Path:
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else Path(_temporary())
    return base / NAME


class Presence:
    """This reader's mark; `alone`: no other live reader was found when it marked. (A plain
    class: dataclasses loads `inspect`, a cost every run's reader would pay at its start.)"""

    def __init__(self, path: Path | None, fd: int | None, alone: bool):
        self.path, self.fd, self.alone = path, fd, alone

    def __repr__(self) -> str:
        return f"Presence(path={self.path!r}, fd={self.fd!r}, alone={self.alone!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Presence):
            return NotImplemented
        return (self.path, self.fd, self.alone) == (other.path, other.fd, other.alone)

    def close(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
        if self.fd is not None:
            os.close(self.fd)
        self.path = self.fd = None


def mark(thread_id: int, where: Path | None = None) -> Presence:
    """Mark this reader (its thread `thread_id`), then look at the others: each live one is
    lowered to an ordinary priority, each dead one's mark removed. Where no mark can be made
    (a folder it cannot write), the reader counts itself not alone: it never takes a
    priority it cannot show it alone holds."""
    where = folder() if where is None else where
    try:
        where.mkdir(mode=0o777, exist_ok=True)
        with contextlib.suppress(OSError):
            os.chmod(where, 0o1777)  # every user's readers mark here; each removes its own
        path = where / f"{os.getpid()}-{thread_id}"
        # made under a hidden name, locked and written, then named: no reader sees it unlocked
        making = where / f".{path.name}"
        fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, str(thread_id).encode())
        os.replace(making, path)
    except OSError:
        return Presence(None, None, alone=False)
    others = sum(
        _lower_if_live(e.path)
        for e in os.scandir(where)
        if e.name != path.name and not e.name.startswith(".")
    )
    return Presence(path, fd, alone=not others)


def _lower_if_live(path: str) -> bool:
    """Whether the mark at `path` is a live reader's; a live one's thread is put at an ordinary
    priority, a dead one's mark removed."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False  # removed as we looked: its reader ended
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            if _a_readers_mark(path, os.fstat(fd).st_uid):
                _ordinary(os.read(fd, 32), int(os.path.basename(path).split("-")[0]))
            return True
        with contextlib.suppress(OSError):  # no one holds it: its reader died
            os.unlink(path)
        return False
    finally:
        os.close(fd)


def _a_readers_mark(path: str, owner: int) -> bool:
    """Whether a mark names a reader of the kit's, made by that reader's own user: its file
    is named `<pid>-<tid>`, owned by the user whose process `pid` is, and that process runs
    `kit.measure.clock`. The folder is everyone's, so a mark anyone else made (naming some
    other process's real-time thread) is never acted on."""
    pid, _, tid = os.path.basename(path).partition("-")
    if not (pid.isdigit() and tid.isdigit()):
        return False
    try:
        if os.stat(f"/proc/{pid}").st_uid != owner:
            return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"kit.measure.clock" in f.read().split(b"\0")
    except OSError:
        return False


def _ordinary(written: bytes, pid: int) -> None:
    """The thread whose id a live mark holds, at an ordinary priority, where it is a thread of
    the mark's process: best effort (a thread of another user's without the privilege, or one
    that just ended, is left as it is)."""
    try:
        tid = int(written.decode() or "0")
    except ValueError:
        return
    if tid <= 0 or not os.path.exists(f"/proc/{pid}/task/{tid}"):
        return
    with contextlib.suppress(OSError, AttributeError):
        if os.sched_getscheduler(tid) in (os.SCHED_FIFO, os.SCHED_RR):
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))


def _temporary() -> str:
    import tempfile  # lazy: only where /dev/shm cannot be written

    return tempfile.gettempdir()

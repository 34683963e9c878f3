"""One writer per results directory (D6): an exclusive `flock` held for a whole series or check.

Two writers on one directory would run the same runs at once, each measuring while the other
trains (§5: the card holds no other program). The lock is the kernel's: it is released when its
holder's last descriptor closes, a killed process included, so a lock left by `kill -9` never
blocks a resume. The file keeps the holder's pid and host only to name them in the refusal.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
from pathlib import Path

from kit.errors import UserError

LOCK = ".micakit-lock"
_HELD: set[WriterLock] = set()  # every lock this process holds, released when a command ends


class WriterLock:
    """The directory's lock, taken at once or refused; held until `release` or process end."""

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / LOCK
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, what: str = "a series") -> None:
        if self._fd is not None:
            return
        try:
            # O_CLOEXEC: no run's program or reader inherits the lock and outlives the kit with it
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise UserError(
                f"cannot write in {self.path.parent}: {e.strerror}",
                "name a results directory in a folder you can write to",
            ) from None
        with contextlib.suppress(OSError):  # readable whatever the umask (D6); another's: as is
            os.fchmod(fd, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _holder(fd)
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise UserError(
                f"{self.path.parent} is being written by another micakit "
                f"(pid {holder.get('pid', '?')} on host {holder.get('host', '?')}); "
                "one writer per results directory",
                f"wait for it to end, or stop it (kill {holder.get('pid', 'PID')}) and then "
                f"resume with `micakit {_command(what)} --resume {self.path.parent}`",
            ) from None
        note = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "what": what})
        os.ftruncate(fd, 0)
        os.pwrite(fd, note.encode() + b"\n", 0)
        self._fd = fd
        _HELD.add(self)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None
        _HELD.discard(self)


def release_all() -> None:
    """A command's end: whatever it held is released, however it ended (the CLI run in-process
    by tests and tools runs many commands in one process)."""
    for held in list(_HELD):
        held.release()


def _holder(fd: int) -> dict:
    try:
        return json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}


def _command(what: str) -> str:
    return "correctness" if "check" in what else "series"

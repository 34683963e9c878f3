"""The compiled stamper (stamper.c), as the reader process sees it: where it is, its records.

The wheel carries `micakit-stamp`, built from stamper.c by setup.py; a checkout has it once
`scripts/install.sh` ran. Where it is missing (no C compiler at build time, another platform)
or `MICAKIT_STAMPER=python` is set, the reader stamps in Python (kit.measure.clock) as before;
`MICAKIT_STAMPER=PATH` names another build of it (the tests build their own).
"""

from __future__ import annotations

import os
import selectors
import struct
import subprocess
import time
from pathlib import Path

BINARY = Path(__file__).with_name("micakit-stamp")
HEADER = struct.Struct("=IIQ")  # source's place, chunk's length (0: closed), CLOCK_MONOTONIC ns
READ_SIZE = 1 << 20  # the stamper's own read size (stamper.c)
CHOICE_ENV = "MICAKIT_STAMPER"  # "python", or the stamper's path; unset: the one built here


def available() -> Path | None:
    """The stamper to use, or None for Python's stamps."""
    chosen = os.environ.get(CHOICE_ENV)
    if chosen == "python":
        return None
    binary = Path(chosen) if chosen else BINARY
    return binary if os.access(binary, os.X_OK) else None


def start(binary: Path, fds: list[int]) -> subprocess.Popen[bytes]:
    """The stamper on the sources `fds` (the caller then closes its own copies)."""
    return subprocess.Popen(
        [str(binary), *map(str, fds)],
        pass_fds=fds,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        # a session, so a scheduling group (autogroup), of its own: the reader process's
        # threads' CPU time then never makes the stamper wait its group's turn as it wakes
        start_new_session=True,
    )


class Records:
    """The stamper's output, parsed as it arrives: a bytearray grows in place and drops what
    was handed on, so a record of a megabyte split across reads costs one copy."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> list[tuple[int, int, bytes]]:
        """(source's place, stamp in ns, chunk; b"" once the source closed) for each whole
        record so far."""
        self._buf += chunk
        start, found = 0, []
        while len(self._buf) - start >= HEADER.size:
            source, length, stamp_ns = HEADER.unpack_from(self._buf, start)
            end = start + HEADER.size + length
            if len(self._buf) < end:
                break
            found.append((source, stamp_ns, bytes(self._buf[start + HEADER.size : end])))
            start = end
        del self._buf[:start]
        return found


def start_on(fds: list[int], sel: selectors.BaseSelector) -> Chunks | None:
    """The compiled stamper on the sources, once it waits on them; None where it is not
    built, cannot start or ends before it is ready: this process then stamps in Python."""
    binary = available()
    if binary is None:
        return None
    try:
        helper = start(binary, fds)
    except OSError:
        return None
    chunks = Chunks(helper, fds)
    if not chunks.wait_ready():
        chunks.close()
        return None
    for fd in fds:
        os.close(fd)  # the stamper holds them now
    sel.register(chunks.fileno(), selectors.EVENT_READ)
    return chunks


class Chunks:
    """The stamper's records as (source fd, stamp, chunk); its first record says it waits on
    the sources, and only then is the kit told to start the program."""

    def __init__(self, helper: subprocess.Popen[bytes], fds: list[int]) -> None:
        assert helper.stdout is not None
        self._helper, self._out, self._fds = helper, helper.stdout, fds
        self._records = Records()

    def fileno(self) -> int:
        return self._out.fileno()

    def wait_ready(self) -> bool:
        """Block until the stamper's first record; False if it ended without one."""
        while True:
            chunk = os.read(self._out.fileno(), HEADER.size)
            if not chunk:
                return False
            for place, _, _ in self._records.feed(chunk):
                if place >= len(self._fds):
                    return True

    def read(self) -> list[tuple[int, int, bytes]]:
        chunk = os.read(self._out.fileno(), READ_SIZE + HEADER.size)
        if not chunk:  # the stamper ended early: what it left open ends here
            return [(fd, time.monotonic_ns(), b"") for fd in self._fds]
        return [(self._fds[p], t, data) for p, t, data in self._records.feed(chunk)]

    def close(self) -> None:
        self._out.close()
        self._helper.wait()

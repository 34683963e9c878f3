"""The compiled stamper (stamper.c), as the reader process sees it: where it is, its records.

The wheel carries `micakit-stamp`, built from stamper.c by setup.py; a checkout has it once
`scripts/install.sh` ran. Where it is missing (no C compiler at build time, another platform)
or `MICAKIT_STAMPER=python` is set, the reader stamps in Python (kit.measure.clock) as before;
`MICAKIT_STAMPER=PATH` names another build of it (the tests build their own).
"""

from __future__ import annotations

import os
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

BINARY = Path(__file__).with_name("micakit-stamp")
HEADER = struct.Struct("=IIQ")  # source's place, chunk's length (0: closed), CLOCK_MONOTONIC ns
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

    def feed(self, chunk: bytes) -> Iterator[tuple[int, int, bytes]]:
        """(source's place, stamp in ns, chunk; b"" once the source closed) for each whole
        record so far."""
        self._buf += chunk
        start = 0
        while len(self._buf) - start >= HEADER.size:
            source, length, stamp_ns = HEADER.unpack_from(self._buf, start)
            end = start + HEADER.size + length
            if len(self._buf) < end:
                break
            yield source, stamp_ns, bytes(self._buf[start + HEADER.size : end])
            start = end
        del self._buf[:start]

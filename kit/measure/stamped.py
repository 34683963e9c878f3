"""A stamped log read back (kit.measure.clock writes them): `<monotonic_ns> <the line's bytes>`
a line, the line as a terminal would show it (the text after its last carriage return) with
its stamp.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple


class StampedLine(NamedTuple):
    stamp_ns: int
    text: str  # decoded as UTF-8 with replacement, for parsing; the log keeps the bytes


_STAMPED = re.compile(r"^(\d+) (.*)$", re.M)


def read_stamped(
    path: Path | str, read: Callable[[Path | str], bytes] | None = None
) -> Iterator[StampedLine]:
    """The lines of a stamped log. A line that is not `<int> <bytes>` is a corrupt log.
    `read`: how its bytes are had (`verify` judges from the bytes it has just hashed); by
    default, the file read whole.

    A results directory of thousands of runs is read in one `report`: the file is decoded
    whole and its lines matched at once; only a file with a line that does not match is read
    line by line, to name that line (or take an odd stamp that is still an integer).
    """
    data = (read or read_bytes)(path)
    text = data.decode("utf-8", "replace")
    found = _STAMPED.findall(text)
    parts = text.split("\n")
    if len(found) == len(parts) - parts.count(""):
        return iter([StampedLine(int(s), _shown_text(t) if "\r" in t else t) for s, t in found])
    return _read_line_by_line(path, data)


def _read_line_by_line(path: Path | str, data: bytes) -> Iterator[StampedLine]:
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last line
    for number, raw in enumerate(lines, 1):
        stamp, sep, text = raw.partition(b" ")
        if not sep and not stamp:
            continue
        try:
            stamp_ns = int(stamp)
        except ValueError:
            raise ValueError(f"{path}:{number}: not a stamped line: {raw[:80]!r}") from None
        if b"\r" in text:
            text = shown(text)
        yield StampedLine(stamp_ns, text.decode("utf-8", "replace"))


def _shown_text(text: str) -> str:
    """`shown`, of a decoded line."""
    return text.rstrip("\r").rpartition("\r")[2]


def shown(raw: bytes) -> bytes:
    """What a terminal shows of a line: the text after its last carriage return (a progress
    bar redrawn with `\r` on the line of a step must not hide the step). A `\r` just before
    the newline (CRLF) ends the line and hides nothing. The log keeps the bytes as written."""
    raw = raw.rstrip(b"\r")
    return raw.rpartition(b"\r")[2]


def read_bytes(path: Path | str) -> bytes:
    """A whole file through os.read: a report reads thousands of small logs, and a buffered
    open costs twice the system calls."""
    fd = os.open(path, os.O_RDONLY)
    try:
        blocks = []
        while block := os.read(fd, 1 << 20):
            blocks.append(block)
        return b"".join(blocks)
    finally:
        os.close(fd)


def tail(path: Path, n: int = 15) -> list[str]:
    """The last lines of a stamped log, without stamps, for error messages."""
    try:
        return [line.text for line in read_stamped(path)][-n:]
    except (OSError, ValueError):
        return []


def tail_block(log_dir: Path, n: int = 10) -> str:
    """The end of a failed run's output, indented for a message: stderr's, else stdout's."""
    lines = tail(log_dir / "stderr.log", n) or tail(log_dir / "stdout.log", n)
    return "\n".join(f"    {line}" for line in lines) or "    (no output)"

"""summary.json as a directory publishes it, parsed once while the file is the same: `verify`
asks its schema more than once (to render as the kit that published it), and a large series'
file (12 MB at 15,000 runs) takes a tenth of a second to parse."""

from __future__ import annotations

import functools
import json
import os
import stat
from pathlib import Path


def document(path: Path) -> object | None:
    """The parsed file, which its callers only read; None where there is none, it is no
    regular file, or it does not read as JSON."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return _parsed(str(path), (st.st_size, st.st_mtime_ns, st.st_ino))


@functools.lru_cache(maxsize=4)
def _parsed(path: str, key: tuple[int, int, int]) -> object | None:
    try:
        return json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError):
        return None

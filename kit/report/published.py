"""summary.json as a directory publishes it, parsed once while the file is the same: `verify`
asks its schema more than once (to render as the kit that published it), and a large series'
file (12 MB at 15,000 runs) takes a tenth of a second to parse. `declared_schema` reads the
schema a file declares without parsing it, for a reader that needs no more (`report`)."""

from __future__ import annotations

import functools
import json
import os
import re
import stat
from pathlib import Path


def document(path: Path) -> object | None:
    """The parsed file, which its callers only read; None where there is none, it is no
    regular file, or it does not read as JSON."""
    key = _same(path)
    return None if key is None else _parsed(str(path), key)


def _same(path: Path) -> tuple[int, int, int] | None:
    """What tells the file from an edited one (size, modification time, inode), the key of
    what is read of it once; None where there is no regular file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


@functools.lru_cache(maxsize=4)
def _parsed(path: str, key: tuple[int, int, int]) -> object | None:
    try:
        return json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError):
        return None


# how the kit writes summary.json's first key (json.dumps with indent=2)
_HEAD = re.compile(rb'\A\{\n  "schema_version": (\d+),\n')


def declared_schema(path: Path) -> int | None:
    """The schema summary.json declares as its first key, the only "schema_version" (or
    "schema") the file holds, read without parsing the file, once while the file is the same;
    None where it declares none so (no such file, another shape): `document` then says what
    it holds. A declared schema is no proof that the rest parses."""
    key = _same(path)
    return None if key is None else _declared(str(path), key)


@functools.lru_cache(maxsize=4)
def _declared(path: str, key: tuple[int, int, int]) -> int | None:
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            found = _HEAD.match(head)
            if found is None:
                return None
            data = head + f.read()
    except OSError:
        return None
    if data.count(b'"schema_version"') != 1 or b'"schema"' in data:
        return None
    return int(found[1])

"""nanoGPT's trees and the files beside the protocol, as the series' start hashed them (D6).

A series keeps nanoGPT's two trees and their data in its directory (`kit.sides.workspace`),
listed with their SHA-256 in `work/nanogpt/workspace.json`, whose own SHA-256 the manifest
names among the files the series reads (`inputs_sha256`). Before every run, and at `verify`,
each is hashed again: a contender that edited PyTorch's code midway is named, file by file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from kit.results.store import sha256_file

LISTING = "work/nanogpt/workspace.json"  # the trees' listing, by its path in the directory


def changed(root: Path, named: Mapping[str, str] | None) -> list[str]:
    """Each file the manifest names (`named`: inputs_sha256) that the directory holds, and each
    file of nanoGPT's trees, that is gone or no longer hashes as the series' start recorded."""
    out: list[str] = []
    for rel, digest in sorted((named or {}).items()):
        path = root / rel
        if rel == LISTING or path.is_file():
            out += _differs(root, rel, digest, "since the series started")
    listing = root / LISTING
    if not listing.is_file():
        return out
    try:
        files = json.loads(listing.read_text("utf-8"))["files"]
    except (ValueError, KeyError, TypeError):
        return [*out, f"{LISTING}: not the listing of nanoGPT's trees the kit writes"]
    base = os.path.dirname(LISTING)
    for rel, digest in sorted(files.items()):
        out += _differs(root, f"{base}/{rel}", digest, "since the series wrote nanoGPT's trees")
    return out


def _differs(root: Path, rel: str, digest: str, since: str) -> list[str]:
    try:
        actual = sha256_file(root / rel)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return [f"{rel}: missing (the series hashed it at its start)"]
    return [] if actual == digest else [f"{rel}: changed {since}"]

"""Whether a protocol file is the one this kit ships (kit/files/protocol.toml), and where it is
not, how it differs, key by key. A directory measured under another protocol (one passed with
`--protocol`, or its copy edited afterwards with the manifest's hash) says so at the top of
everything that reads it: report.md, report.html, the terminal's result block, summary.json
and `micakit compare` (§3 rule 1: the protocol is fixed before measuring; a reader is told when
it is not the one published)."""

from __future__ import annotations

import functools
import hashlib
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from kit.protocol.load import DEFAULT_PATH


class ChangedJson(TypedDict):
    key: str
    shipped: object  # null where the shipped protocol has no such key
    here: object  # null where this directory's protocol has none


class ShippedJson(TypedDict):
    """summary.json's "protocol" (and `compare --json`'s, per side)."""

    sha256: str  # the directory's protocol file's
    shipped: bool
    shipped_sha256: str
    differences: list[ChangedJson]


@dataclass(frozen=True)
class Changed:
    key: str  # dotted, as the protocol file names it (`timing.cross_check_tolerance`)
    shipped: object
    here: object

    def line(self) -> str:
        return f"`{self.key}`: {_shown(self.here)} here, {_shown(self.shipped)} shipped"


@dataclass(frozen=True)
class Shipped:
    """A protocol file against the shipped one."""

    sha256: str
    shipped_sha256: str
    changed: tuple[Changed, ...]

    @property
    def shipped(self) -> bool:
        return self.sha256 == self.shipped_sha256

    def label(self) -> str:
        """The title's label: empty for the shipped protocol."""
        return "" if self.shipped else "not the protocol the kit ships"

    def lines(self) -> list[str]:
        """What differs, a line a key; its text alone where no key does (comments)."""
        if self.shipped:
            return []
        if not self.changed:
            return ["its text differs from the shipped file's (comments or layout); no key does"]
        return [c.line() for c in self.changed]

    def sentence(self) -> str:
        """One sentence before the lines."""
        return (
            f"This directory's protocol.toml (SHA-256 {self.sha256[:12]}…) is not the protocol "
            f"this kit ships ({self.shipped_sha256[:12]}…); its numbers are measured under "
            "these differences:"
        )

    def to_json(self) -> ShippedJson:
        return {
            "sha256": self.sha256,
            "shipped": self.shipped,
            "shipped_sha256": self.shipped_sha256,
            "differences": [
                {"key": c.key, "shipped": c.shipped, "here": c.here} for c in self.changed
            ],
        }


def against_shipped(path: Path) -> Shipped:
    """The protocol file at `path` against the one this kit ships."""
    return _against(Path(path).read_bytes())


def shipped_sha256() -> str:
    """The SHA-256 of the protocol file this kit ships."""
    return _against(DEFAULT_PATH.read_bytes()).shipped_sha256


@functools.lru_cache(maxsize=8)  # a report and its HTML, summary and block read it again
def _against(raw: bytes) -> Shipped:
    shipped_raw = DEFAULT_PATH.read_bytes()
    mine, theirs = hashlib.sha256(raw).hexdigest(), hashlib.sha256(shipped_raw).hexdigest()
    if mine == theirs:
        return Shipped(mine, theirs, ())
    here = _flat(tomllib.loads(raw.decode("utf-8")))
    shipped = _flat(tomllib.loads(shipped_raw.decode("utf-8")))
    changed = tuple(
        Changed(key, shipped.get(key), here.get(key))
        for key in sorted(set(here) | set(shipped))
        if here.get(key, _ABSENT) != shipped.get(key, _ABSENT)
    )
    return Shipped(mine, theirs, changed)


_ABSENT = object()


def _flat(data: object, prefix: str = "") -> dict[str, object]:
    """Every value by its dotted key; an array of tables by index (`amendments.8.reason`)."""
    if isinstance(data, dict):
        out: dict[str, object] = {}
        for k, v in data.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(data, list) and any(isinstance(v, dict) for v in data):
        out = {}
        for i, v in enumerate(data):
            out.update(_flat(v, f"{prefix}.{i}"))
        return out
    return {prefix: data}


def _shown(value: object) -> str:
    return "absent" if value is None else json.dumps(value, ensure_ascii=False)

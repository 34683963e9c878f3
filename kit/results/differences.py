"""How `verify` names a published file that differs from its recomputation: the first line that
differs, or each table cell, with what was published and what the raw files give. One wording
for a series (kit.report.publish) and a correctness check (kit.correctness.check_verify)."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pandas as pd


def file_differences(root: Path, rel: str, recomputed: bytes) -> list[str]:
    """A published file against its re-rendering: the first line that differs, named."""
    path = root / rel
    if not path.is_file():
        return [f"{rel}: missing"]
    published = path.read_bytes()
    if published == recomputed:
        return []
    if rel.endswith(".png"):
        return [f"{rel}: differs from the plot recomputed from the raw logs"]
    old = published.decode("utf-8", "replace").splitlines()
    new = recomputed.decode("utf-8", "replace").splitlines()
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            return [f"{rel} line {i + 1}: published {_clip(a, b)!r}, recomputed {_clip(b, a)!r}"]
    return [f"{rel}: {len(old)} lines published, {len(new)} recomputed"]


def _clip(line: str, other: str, width: int = 100) -> str:
    """The part of a long line (an HTML table row) around where it differs from `other`."""
    if len(line) <= width:
        return line
    same = (i for i, (a, b) in enumerate(zip(line, other)) if a != b)
    at = next(same, min(len(line), len(other)))
    lo = max(0, at - width // 2)
    return ("…" if lo else "") + line[lo : lo + width] + ("…" if lo + width < len(line) else "")


def frame_differences(where: str, published: pd.DataFrame, recomputed: pd.DataFrame) -> list[str]:
    """A published table against its recomputation, cell by cell (row 2 is the first under the
    header, as a spreadsheet numbers it)."""
    if list(published.columns) != list(recomputed.columns):
        return [f"{where}: columns {list(published.columns)} differ from the recomputed ones"]
    if len(published) != len(recomputed):
        return [f"{where}: {len(published)} rows published, {len(recomputed)} recomputed"]
    out = []
    for col in published.columns:
        for i, (a, b) in enumerate(zip(published[col], recomputed[col])):
            if same(a, b):
                continue
            out.append(f"{where} row {i + 2} column {col}: published {a!r}, recomputed {b!r}")
    return out


def same(a: object, b: object) -> bool:
    """Two cells alike: the same number however it was written, or the same text."""
    try:
        fa, fb = float(a), float(b)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(a) == str(b)
    if math.isnan(fa) and math.isnan(fb):
        return True
    return fa == fb or abs(fa - fb) <= 1e-12 * max(abs(fa), abs(fb))


# -- the same differences for other tools (`verify --json`) ------------------------------------

VERIFY_SCHEMA = 1  # the version of `verify --json`'s answer
# a value as the lines above write it: Python's repr of a text, or a bare number or word
_VALUE = r"""(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^,]+?)"""
_FORMS = (
    ("line", re.compile(rf"(?P<file>\S+) line (?P<line>\d+): published (?P<found>{_VALUE}), "
                        rf"recomputed (?P<expected>{_VALUE})")),
    ("cell", re.compile(rf"(?P<file>\S+) row (?P<row>\d+) column (?P<column>.+?): published "
                        rf"(?P<found>{_VALUE}), recomputed (?P<expected>{_VALUE})")),
    ("lines", re.compile(r"(?P<file>\S+): (?P<found>\d+) lines published, (?P<expected>\d+) "
                         r"recomputed")),
    ("rows", re.compile(r"(?P<file>\S+): (?P<found>\d+) rows published, (?P<expected>\d+) "
                        r"recomputed")),
    ("columns", re.compile(r"(?P<file>\S+): columns (?P<found>\[.*\]) differ from the "
                           r"recomputed ones")),
    ("missing", re.compile(r"(?P<file>\S+): missing")),
    ("plot", re.compile(r"(?P<file>\S+\.png): differs from the plot recomputed from the raw "
                        r"logs")),
    ("not made", re.compile(r"(?P<file>\S+): a file the report does not make")),
)  # fmt: skip
KINDS = (*(kind for kind, _ in _FORMS), "other")


def as_object(said: str) -> dict[str, object]:
    """One difference as `verify --json` gives it: the file, where in it (line, or row and
    column), what was found there (published) and what was expected (recomputed from the raw
    files), its kind (KINDS), and the sentence `verify` prints, as `reason`. A difference of
    another wording (a raw file changed, a record) is of kind "other", its file named where the
    sentence starts with one."""
    out: dict[str, object] = dict.fromkeys(("file", "line", "row", "column", "expected", "found"))
    out |= {"kind": "other", "reason": said}
    for kind, form in _FORMS:
        m = form.fullmatch(said)
        if m is None:
            continue
        got = m.groupdict()
        out |= {"kind": kind, "file": got["file"], "column": got.get("column")}
        for key in ("line", "row"):
            out[key] = int(got[key]) if got.get(key) else None
        for key in ("expected", "found"):
            out[key] = _value(got[key]) if got.get(key) is not None else None
        return out
    first = said.split(":", 1)[0].split(" ", 1)[0]
    if ":" in said and ("/" in first or "." in first):
        out["file"] = first
    return out


def _value(text: str) -> object:
    """A value as the sentence wrote it, read back (a text's repr, a number); else the text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text

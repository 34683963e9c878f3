"""`json.dumps(document, indent=2, allow_nan=False, default=str)`, byte for byte, at the C
encoder's speed.

With `indent` set, the standard library encodes in pure Python (`json.encoder`'s
`_make_iterencode`: a call per value), which made summary.json of a 15,000-run series cost
`verify` seconds. Its output is a dict or list whose members each stand on a line of their
own, indented by the depth. A container that holds no container is written here by the C
encoder in one call, its separators carrying the newline and the indent (`item_separator`
may be any string, as `json.dumps`'s `separators` documents); a container that holds others is
walked, but for a list of rows (dicts that hold no container), which is written in one call
and re-laid at the seams between its rows. Keys, numbers, strings, NaN's refusal and
`default` (whose `str` gives no container) go through the same encoder, so every scalar
reads as the standard library writes it (tests/unit/results/test_jsontext.py holds the two
equal on random documents)."""

from __future__ import annotations

import json
from collections.abc import Iterable

INDENT = "  "
_CONTAINERS = (dict, list, tuple)
_PLAIN = frozenset({str, int, float, bool, type(None)})  # JSON's scalars, as Python has them


def dumps(document: object) -> str:
    """The text `json.dumps(document, indent=2, allow_nan=False, default=str)` gives."""
    out: list[str] = []
    _write(document, 0, out)
    return "".join(out)


def _scalar(value: object) -> str:
    return json.dumps(value, allow_nan=False, default=str)


def _key(key: object) -> str:
    """A key as the encoder writes it: a string quoted, a number or constant as its text,
    anything else refused (as `json.dumps` refuses it)."""
    if isinstance(key, str):
        return json.dumps(key)
    written = json.dumps({key: None}, allow_nan=False)  # '{"KEY": null}'
    return written[1 : -len(": null}")]


def _scalars(members: Iterable[object]) -> bool:
    """Whether no member is a container: their types looked up at C's speed first, any other
    type asked member by member (a subclass of dict, list or tuple is a container)."""
    return _PLAIN.issuperset(map(type, members)) or not any(
        isinstance(m, _CONTAINERS) for m in members
    )


def _flat_dict(value: object) -> bool:
    """A dict with members, none of them a container: a row (summary.json's per-run
    sections hold tens of thousands)."""
    return isinstance(value, dict) and bool(value) and _scalars(value.values())


def _rows(rows: list[object] | tuple[object, ...], depth: int) -> str:
    """A list of rows (`_flat_dict`s) at `depth`, in one call of the C encoder: its separator
    carries the rows' members' newline and indent, and the seams between the rows (and at
    either end) are re-laid. A newline in a key or a string is written escaped ("\\n"), so
    the only newlines in the encoder's text are the separators', and each "},<newline>" is
    the seam between two rows."""
    inner = "\n" + INDENT * (depth + 1)  # a row's own line
    member = inner + INDENT  # each member of a row
    flat = json.dumps(rows, allow_nan=False, default=str, separators=("," + member, ": "))
    # '[{M,\n    M},\n    {M}]' -> '[\n  {\n    M,\n    M\n  },\n  {\n    M\n  }\n]'
    body = flat[2:-2].replace("}," + member + "{", inner + "}," + inner + "{" + member)
    return "[" + inner + "{" + member + body + inner + "}" + "\n" + INDENT * depth + "]"


def _write(value: object, depth: int, out: list[str]) -> None:
    if isinstance(value, dict):
        members: Iterable[object] = value.values()
    elif isinstance(value, (list, tuple)):
        members = value
    else:
        out.append(_scalar(value))
        return
    if not value:
        out.append("{}" if isinstance(value, dict) else "[]")
        return
    inner = "\n" + INDENT * (depth + 1)
    close = "\n" + INDENT * depth + ("}" if isinstance(value, dict) else "]")
    if _scalars(members):
        flat = json.dumps(value, allow_nan=False, default=str, separators=("," + inner, ": "))
        out.append(flat[0] + inner + flat[1:-1] + close)  # "{" + members + "}" re-laid
        return
    if not isinstance(value, dict) and all(_flat_dict(m) for m in members):
        out.append(_rows(value, depth))
        return
    out.append("{" if isinstance(value, dict) else "[")
    if isinstance(value, dict):
        for i, (k, v) in enumerate(value.items()):
            out.append(("," if i else "") + inner + _key(k) + ": ")
            _write(v, depth + 1, out)
    else:
        for i, v in enumerate(value):
            out.append(("," if i else "") + inner)
            _write(v, depth + 1, out)
    out.append(close)

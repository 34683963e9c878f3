"""YAML of a SkyPilot task, for `cloud run --dry-run`: block mappings and lists, each string
quoted as JSON does (a JSON string is a YAML scalar), so the kit needs no YAML library."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

Node = object


def dump(value: Node) -> str:
    return "".join(line + "\n" for line in _lines(value, 0))


def _scalar(value: Node) -> str:
    if isinstance(value, str) and "\n" not in value and value and value[0].isalpha():
        return json.dumps(value) if any(c in value for c in ":#{}[],&*!|>'\"%@`") else value
    return json.dumps(value)


def _lines(value: Node, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(v, (Mapping, list, tuple)) and v:
                out.append(f"{pad}{_scalar(str(k))}:")
                out += _lines(v, indent + 2)
            else:
                out.append(f"{pad}{_scalar(str(k))}: {_flow(v)}")
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for v in value:
            inner = _lines(v, indent + 2)
            if isinstance(v, (Mapping, list, tuple)) and v:
                out.append(f"{pad}- {inner[0].lstrip()}")
                out += inner[1:]
            else:
                out.append(f"{pad}- {_flow(v)}")
    else:
        out.append(pad + _flow(value))
    return out


def _flow(value: Node) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, (list, tuple)):
        return "[]"
    return _scalar(value)

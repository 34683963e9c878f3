"""Strict JSON: every file the kit writes parses without NaN or Infinity (D6), so a strict
reader (`jq`, JavaScript's JSON.parse, Python's json with parse_constant refusing) reads it."""

from __future__ import annotations

import math


def finite(obj: object, where: str = "") -> tuple[object, dict[str, str]]:
    """`obj` with every float that is not finite (NaN, an infinity) replaced by null, and each
    such value's dotted path with what it was: JSON has no NaN or Infinity, and a file the kit
    writes is read by strict parsers too (`jq`, JavaScript's JSON.parse)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None, {where: f"{obj} (not a finite number: stored as null)"}
    if isinstance(obj, dict):
        out: dict[object, object] = {}
        nulled: dict[str, str] = {}
        for k, v in obj.items():
            out[k], found = finite(v, f"{where}.{k}" if where else str(k))
            nulled.update(found)
        return out, nulled
    if isinstance(obj, (list, tuple)):
        items = [finite(v, f"{where}.{i}") for i, v in enumerate(obj)]
        return [v for v, _ in items], {k: r for _, found in items for k, r in found.items()}
    return obj, {}

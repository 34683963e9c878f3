"""A TOML table read into a frozen dataclass, key by key, against the dataclass' annotations.

A key the dataclass lacks, a missing required key and a value of the wrong type are each a
`UserError` naming the key (`timing.window[1] must be an integer, not str '500'`) and saying
what to do; lists become tuples where the annotation says so. `kit.protocol.load` builds the
whole protocol with it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from kit.errors import UserError

# fields a protocol computes rather than reads (its file's path and SHA-256)
INTERNAL = {"path", "sha256"}


def check(value: Any, tp: Any, where: str) -> Any:
    """Check `value` against the annotation `tp`; return it converted (lists to tuples etc.)."""
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise wrong(where, "a table", value)
        return build(tp, value, where)
    if origin is list:
        if not isinstance(value, list):
            raise wrong(where, "a list", value)
        (item,) = typing.get_args(tp)
        return [check(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, list) or len(value) != len(args):
            raise wrong(where, f"a list of {len(args)}", value)
        return tuple(check(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if origin is dict:
        key_tp, val_tp = typing.get_args(tp)
        if not isinstance(value, dict):
            raise wrong(where, "a table", value)
        return {k: check(v, val_tp, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise wrong(where, "a number", value)
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise wrong(where, "an integer", value)
        return value
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise wrong(where, f"a {tp.__name__}", value)
        return value
    if isinstance(tp, types.UnionType):  # pragma: no cover - none in the schema yet
        raise TypeError(f"unsupported annotation at {where}")
    raise TypeError(f"unsupported annotation {tp!r} at {where}")


def wrong(where: str, expected: str, value: Any) -> UserError:
    return UserError(
        f"protocol file: {where} must be {expected}, not {type(value).__name__} {value!r}",
        "correct that key (see benchmarks/NanoGpt/protocol.toml for the reference file)",
    )


def build(cls: type, table: dict[str, Any], where: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in INTERNAL}
    unknown = sorted(set(table) - set(fields))
    if unknown:
        prefix = f"{where}." if where else ""
        raise UserError(
            f"protocol file: unknown key {prefix}{unknown[0]}",
            f"the keys allowed there are {', '.join(sorted(fields))}",
        )
    values = {}
    for name, f in fields.items():
        key = f"{where}.{name}" if where else name
        if name not in table:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise UserError(f"protocol file: missing key {key}", "add it to the file")
            continue
        values[name] = check(table[name], hints[name], key)
    return cls(**values)

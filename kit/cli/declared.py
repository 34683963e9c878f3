"""A command's options declared once, as the fields of the frozen dataclass its parameters
fill (`SeriesArgs`, `CheckArgs`): each field names its option, its help and anything click must
know beyond the field's type, and `takes` builds the click options from them.

The type gives click's: `bool` a flag, `tuple[str, ...]` a repeatable option, `Path` a path,
`float` a number, `str` text; a field's `None` is the option left out. The command's body is
one call that takes the dataclass, which mypy checks; no parameter reaches it by a string key.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

A = TypeVar("A")
R = TypeVar("R")
_KEY = "micakit.option"


def option(*decls: str, help: str, **click_kwargs: object) -> Any:  # a field, as dataclasses'
    """A field of a command's arguments: its option's names (default: `--` and the field's name
    with dashes), its help, and click's arguments beyond what the field's type says."""
    return dataclasses.field(metadata={_KEY: (decls, help, click_kwargs)})


def _click_type(hint: object) -> dict[str, Any]:  # click.option's own attrs
    """click's arguments for a field of type `hint`."""
    if hint is bool:
        return {"is_flag": True}
    if typing.get_origin(hint) is tuple:
        return {"multiple": True}
    inner = next((a for a in typing.get_args(hint) if a is not type(None)), hint)  # X | None: X
    if inner is Path:
        return {"type": click.Path(path_type=Path)}
    return {"type": inner}


def with_options(args_type: type, command: Callable[..., R]) -> Callable[..., R]:
    """`command` with one click option for each field of `args_type`, listed in the fields'
    order."""
    hints = typing.get_type_hints(args_type)
    for f in reversed(dataclasses.fields(args_type)):  # click lists the last one added first
        decls, help_, extra = f.metadata[_KEY]
        names = decls or (f"--{f.name.replace('_', '-')}",)
        attrs = {**_click_type(hints[f.name]), **extra}  # what the field says beats its type
        command = click.option(*names, f.name, help=help_, **attrs)(command)
    return command


def takes(args_type: type[A]) -> Callable[[Callable[[A], R]], Callable[..., R]]:
    """Make `command(args)` a click callback: its options built from `args_type`'s fields and
    their values handed over as one `args_type`."""

    def wrap(command: Callable[[A], R]) -> Callable[..., R]:
        @functools.wraps(command)
        def call(**params: object) -> R:
            return command(args_type(**params))

        return with_options(args_type, call)

    return wrap

"""A command's options declared once, as fields (kit.cli.declared): each field's type makes its
click option, and the command's body receives the one typed object."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click
from click.testing import CliRunner

from kit.cli.declared import option, takes


@dataclass(frozen=True)
class _Args:
    out: Path | None = option(help="Where.")
    models: tuple[str, ...] = option("--model", help="Repeat for several.")
    smoke: bool = option(help="Small.")
    idle_timeout: float = option(help="Seconds.", default=60.0)
    device: str | None = option(help="Which.", type=click.Choice(["cuda", "cpu"]))


def _command(seen: list[_Args]) -> click.Command:
    @click.command()
    @takes(_Args)
    def cmd(args: _Args) -> None:
        """Do it."""
        seen.append(args)

    return cmd


def test_each_field_is_an_option_of_its_type_and_the_body_gets_one_object() -> None:
    seen: list[_Args] = []
    argv = ["--out", "r", "--model", "a", "--model", "b", "--smoke", "--device", "cpu"]
    result = CliRunner().invoke(_command(seen), argv)
    assert result.exit_code == 0, result.output
    assert seen == [_Args(Path("r"), ("a", "b"), True, 60.0, "cpu")]
    CliRunner().invoke(_command(seen), ["--idle-timeout", "2.5"])
    assert seen[-1] == _Args(None, (), False, 2.5, None)


def test_the_options_are_listed_in_the_fields_order_with_their_help() -> None:
    text = CliRunner().invoke(_command([]), ["--help"]).output
    assert "Do it." in text
    order = [text.index(o) for o in ("--out PATH", "--model TEXT", "--smoke", "--idle-timeout")]
    assert order == sorted(order)
    assert "--device [cuda|cpu]" in text and "Repeat for several." in text


def test_a_value_of_the_wrong_type_is_refused_by_click() -> None:
    result = CliRunner().invoke(_command([]), ["--idle-timeout", "soon"])
    assert result.exit_code == 2 and "'soon' is not a valid float" in result.output

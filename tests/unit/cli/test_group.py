"""The group's mapping of a stop: whatever error a stop's interrupt comes out as, exit 130."""

from __future__ import annotations

import signal

import click
import pytest
from click.testing import CliRunner

from kit.cli.group import KitGroup


def _group(body) -> click.Group:
    group = KitGroup("micakit")
    group.command("series")(body)
    return group


def test_a_sigterm_that_came_out_as_an_import_error_ends_as_a_stop():
    """As a series' start-up showed: SIGTERM's KeyboardInterrupt raised inside scipy's extension
    module init comes out as `ImportError: initialization failed`; it is the stop, exit 130."""

    def body() -> None:
        handler = signal.getsignal(signal.SIGTERM)
        try:
            handler(signal.SIGTERM, None)  # as the signal would call it
        except KeyboardInterrupt:
            raise ImportError("initialization failed") from None  # the cause, dropped

    result = CliRunner().invoke(_group(body), ["series"])
    assert result.exit_code == 130, result.output
    assert "interrupted" in result.output and "Traceback" not in result.output


def test_ctrl_c_inside_an_import_ends_as_a_stop():
    def body() -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as k:
            raise ImportError("initialization failed") from k

    result = CliRunner().invoke(_group(body), ["series"])
    assert result.exit_code == 130, result.output


@pytest.mark.parametrize("error", [ImportError("initialization failed"), OSError(5, "I/O")])
def test_the_same_error_without_a_stop_is_a_bug_with_its_traceback(error):
    def body() -> None:
        raise error

    result = CliRunner().invoke(_group(body), ["series"])
    assert result.exit_code == 1 and result.exception is error

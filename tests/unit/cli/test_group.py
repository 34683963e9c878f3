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


def _stopped(group: click.Group, args: list[str]) -> str:
    result = CliRunner().invoke(group, args)
    assert result.exit_code == 130, result.output
    return result.output


def _stopped_import(monkeypatch) -> KitGroup:
    """A group whose `series` (resumable) and `verify` are lazy, their imports stopped."""
    import importlib

    def stopped_import(name: str, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib, "import_module", stopped_import)
    lazy = {
        "series": ("kit.cli.series_cmd", "series", "Run a series."),
        "verify": ("kit.cli.verify_cmd", "verify", "Verify."),
    }
    return KitGroup("micakit", lazy=lazy, resumable=("series",))


def test_a_stop_before_a_resumable_command_named_its_directory_measured_nothing():
    """As CI caught once: SIGTERM while a series' options were still being read (before
    `resume_hint`, its first act) said "finished runs are kept" and no way on. A new series
    that had not named its directory measured nothing: the same command again."""
    group = KitGroup("micakit", resumable=("series",))

    @group.command("series")
    @click.option("--out")
    def series(out: str | None) -> None:
        raise KeyboardInterrupt

    for args in (["series"], ["series", "--out", "nowhere/r"], ["series", "--out=nowhere/r"]):
        out = _stopped(group, args)
        assert "interrupted, before its first run." in out
        assert "nothing was measured yet: the same command starts it again" in out
        assert "finished runs are kept" not in out


def test_a_stop_while_a_resumed_series_loads_says_resume(monkeypatch, tmp_path):
    """As CI caught next: a `series --resume DIR` stopped while its module was imported has
    measured runs; it says how to resume them, as the command line names the directory."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "manifest.json").write_text("{}")
    group = _stopped_import(monkeypatch)
    for args in (["--resume", str(tmp_path / "r")], [f"--resume={tmp_path / 'r'}"]):
        out = _stopped(group, ["series", *args])
        assert "finished runs are kept" in out and "nothing was measured" not in out
        assert f"resume with: micakit series --resume {tmp_path / 'r'}" in out
    out = _stopped(group, ["series", "--out", str(tmp_path / "new")])
    assert "before its first run" in out and "nothing was measured yet" in out


def test_a_stop_while_the_commands_module_is_imported_says_it_had_not_begun(monkeypatch):
    """A lazy command's module imported when it is called: a stop during that import came
    before the command did anything."""
    out = _stopped(_stopped_import(monkeypatch), ["verify", "results/x"])
    assert "interrupted, before it began." in out
    assert "nothing was measured yet: the same command starts it again" in out


def test_a_stop_of_a_command_that_keeps_no_directory_keeps_its_line():
    group = KitGroup("micakit", resumable=("series",))

    @group.command("verify")
    @click.option("--out")
    def verify(out: str | None) -> None:
        raise KeyboardInterrupt

    out = _stopped(group, ["verify", "--out", "x"])
    assert "interrupted; finished runs are kept." in out and "nothing was measured" not in out
    assert "resume with" not in out


def test_a_stop_after_the_directory_was_named_but_before_its_manifest(tmp_path):
    group = KitGroup("micakit", resumable=("series",))

    @group.command("series")
    @click.option("--out")
    def series(out: str) -> None:
        click.get_current_context().meta["resume_hint"] = out
        raise KeyboardInterrupt

    out = _stopped(group, ["series", "--out", str(tmp_path / "r")])
    assert "before its first run" in out and "--resume" not in out
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "manifest.json").write_text("{}")
    out = _stopped(group, ["series", "--out", str(tmp_path / "r")])
    assert f"resume with: micakit series --resume {tmp_path / 'r'}" in out

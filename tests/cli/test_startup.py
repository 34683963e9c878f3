"""`micakit --help` and `--version` import nothing heavy (start-up speed; benchmarks/kit/startup.py)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import click

from kit.cli.main import main
from tests.conftest import ROOT

HEAVY = (
    "pandas",
    "numpy",
    "matplotlib",
    "torch",
    "docker",
    "rich",
    "requests",
    "kit.report",
    "kit.engine",
    "kit.results",
    "kit.cli.correctness",
    "kit.cli.cloud",  # and SkyPilot's SDK (`micakit cloud`'s extra)
    "kit.cloud",
    "sky",
)


def imported_after(*args: str) -> list[str]:
    """The heavy modules a fresh `micakit ARGS` process holds when it exits."""
    code = (
        "import atexit, json, sys\n"
        f"heavy = {HEAVY!r}\n"
        "atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules "
        "if m.startswith(heavy) and (m in heavy or m.split('.')[0] in heavy "
        "or any(m.startswith(h + '.') for h in heavy))))))\n"
        "from kit.cli.main import main\n"
        f"main({list(args)!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_help_and_version_import_nothing_heavy():
    assert imported_after("--version") == []
    assert imported_after("--help") == []


def test_a_command_still_imports_what_it_needs():
    # the check above can fail: a command that runs does import the kit's engine
    assert "kit.cli.correctness" in imported_after("correctness", "--help")


def test_the_series_options_are_read_without_the_engine():
    # its options are declared apart from what runs it (kit.cli.series_args)
    assert imported_after("series", "--help") == []


def test_the_lazy_commands_help_line_is_the_commands_own():
    # every command in a module of its own, imported when called; main.py keeps the group
    group_module = sys.modules[main.callback.__module__]  # kit/cli/main.py
    kept = [n for n, v in vars(group_module).items() if isinstance(v, click.Command)]
    assert kept == ["main"]
    commands = "series report publish verify merge correctness compare images footprint cloud"
    assert set(main.lazy) == set(commands.split())
    for name, (module, attribute, line) in main.lazy.items():
        command = getattr(importlib.import_module(module), attribute)
        assert command.name == name
        assert line == command.help.splitlines()[0]

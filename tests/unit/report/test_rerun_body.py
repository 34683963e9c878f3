"""rerun.sh's constant part: a shell file shipped in the package, checked as a program."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from importlib import resources

import pytest

from kit.report import rerun
from kit.results.store import ResultsDir

TEMPLATE = resources.files("kit") / "files" / rerun.BODY


def test_the_template_is_valid_bash() -> None:
    run = subprocess.run(["bash", "-n", str(TEMPLATE)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_shellcheck_finds_nothing_to_fix() -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed")
    run = subprocess.run(
        ["shellcheck", "--shell=bash", "--severity=warning", str(TEMPLATE)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout


def test_every_place_in_the_template_is_filled_and_its_notes_dropped(tmp_path) -> None:
    places = set(re.findall(r"@[A-Z_]+@", TEMPLATE.read_text()))
    assert places == {"@ARGS@", "@INPUTS@", "@SIDE_IMAGES@", "@GPUS@"}
    (tmp_path / "manifest.json").write_text(
        json.dumps({"schema": 1, "kit_version": "0.1.0", "executor": "docker"})
    )
    text = rerun.script(ResultsDir(tmp_path))
    assert not re.search(r"@[A-Z_]+@", text)
    assert "\n## " not in text
    assert 'micakit verify "$ORIGINAL"' in text  # the template's steps are there
    assert subprocess.run(["bash", "-n", "-c", text]).returncode == 0

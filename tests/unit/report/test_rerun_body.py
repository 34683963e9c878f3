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


@pytest.mark.parametrize(
    ("said", "accepted"),
    [
        ("micakit, version 0.1.0\ncommit abc\nprotocol sha256 00", True),
        # a kit from before the version came first: the same words, last
        ("commit abc\nprotocol sha256 00\nmicakit, version 0.1.0", True),
        ("micakit, version 0.2.0\ncommit abc\nprotocol sha256 00", False),
        ("micakit, version 0.1.01\ncommit abc", False),
    ],
)
def test_a_local_rerun_runs_only_under_the_series_kit_version(tmp_path, said, accepted) -> None:
    """MODE=local: the `micakit` on PATH must say the series' version, wherever on its lines."""
    series = tmp_path / "series"
    series.mkdir()
    (series / "manifest.json").write_text(
        json.dumps({"schema": 1, "kit_version": "0.1.0", "executor": "local"})
    )
    (series / "rerun.sh").write_text(rerun.script(ResultsDir(series)))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    fake = bin_dir / "micakit"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        f'if [ "$1" = --version ]; then printf "%s\\n" "{said}"; fi\n'
    )
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        ["bash", str(series / "rerun.sh"), str(tmp_path / "again")],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    ran = calls.read_text().splitlines()
    if accepted:  # on to step 0, which the fake passes (the rest is not this test's)
        assert ran[0] == "--version" and ran[1].startswith("verify "), done.stderr
    else:
        assert done.returncode == 2, done.stderr
        assert "is not the series' kit 0.1.0" in done.stderr and "fix: install it" in done.stderr
        assert all(not r.startswith("verify") for r in ran)

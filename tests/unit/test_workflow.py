"""The workflow that builds, pushes and signs the images, as others can trust it: zizmor (a
static analyser for GitHub Actions) finds nothing above informational in it, offline; every
action is pinned to a full commit with its version beside it; checkout keeps no credentials;
no value is expanded inside a script; each job names its own permissions."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "images.yml"


def zizmor() -> str:
    """zizmor from the kit's own environment (the dev extra), else from PATH."""
    found = shutil.which("zizmor", path=str(Path(sys.executable).parent)) or shutil.which("zizmor")
    if found is None:
        pytest.skip("no zizmor here: `pip install -e .[dev]` installs it")
    return found


def test_zizmor_finds_nothing_above_informational_offline():
    out = subprocess.run(
        [zizmor(), "--offline", "--min-severity", "low", "--format", "plain", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_action_is_pinned_to_a_commit_with_its_version_beside_it():
    uses = re.findall(r"uses:\s*(\S+)(.*)", WORKFLOW.read_text())
    assert uses
    for action, comment in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", action), action
        assert re.fullmatch(r"\s*# v\d+(\.\d+)*", comment), f"{action}: {comment!r}"


def test_no_expansion_inside_a_script_and_checkout_keeps_no_credentials():
    lines = WORKFLOW.read_text().splitlines()
    in_run, indent = False, 0
    for number, line in enumerate(lines, 1):
        depth = len(line) - len(line.lstrip())
        if in_run and line.strip() and depth <= indent:
            in_run = False
        m = re.match(r"(\s*)(- )?run:(.*)", line)
        if m:
            in_run, indent = True, len(m.group(1))
            assert "${{" not in m.group(3), f"line {number}: {line.strip()}"
        elif in_run:
            assert "${{" not in line, f"line {number}: {line.strip()}"
    text = WORKFLOW.read_text()
    assert text.count("actions/checkout@") == text.count("persist-credentials: false")
    assert re.search(r"^permissions: \{\}$", text, re.MULTILINE)  # each job names its own

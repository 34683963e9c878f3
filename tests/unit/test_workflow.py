"""The workflow that builds, pushes and signs the images, as others can trust it: zizmor (a
static analyser for GitHub Actions) finds nothing in it with its pedantic persona, offline;
every action is pinned to a full commit with its version beside it; checkout keeps no
credentials; no value is expanded inside a script; each job names its own permissions; only
the job that attests holds `id-token: write`, and it builds, checks out and installs nothing
and fails without a signing identity; every `pip install` names its files by hash."""

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


def test_zizmor_pedantic_finds_nothing_offline():
    out = subprocess.run(
        [zizmor(), "--offline", "--persona", "pedantic", "--format", "plain", str(WORKFLOW)],
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


REQUIREMENTS = ROOT / ".github" / "requirements" / "ci.txt"


def jobs() -> dict[str, str]:
    """Each job's text, by its id (the workflow's two-space keys under `jobs:`)."""
    text = WORKFLOW.read_text().split("\njobs:\n", 1)[1]
    parts = re.split(r"^  ([\w-]+):\n", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_only_the_attest_job_signs_and_it_builds_checks_out_and_installs_nothing():
    found = jobs()
    assert [name for name, text in found.items() if "id-token: write" in text] == ["attest"]
    attest = found["attest"]
    for word in ("actions/checkout@", "pip ", "build-images", "images build", "setup-python"):
        assert word not in attest, word
    assert "actions/attest-build-provenance@" in attest and "actions/attest-sbom@" in attest
    assert attest.count("push-to-registry: true") == 3  # beside the image, by its digest
    # no identity, no release: the check exits non-zero, before anything is attested
    check = attest.index("ACTIONS_ID_TOKEN_REQUEST_URL")
    assert "exit 1" in attest[check : check + 300] and check < attest.index("attest-sbom@")
    # the images are built once, in the job that tests and pushes them
    assert "build-images.sh" in found["images"] and "build-images.sh" not in found["release"]
    assert "--check-reproducible" in found["images"] and "reproducible.txt" in found["release"]


def test_every_pip_install_names_its_files_by_hash():
    lines = WORKFLOW.read_text().splitlines()
    script = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    # each command whole, its continued lines with it
    installs = re.findall(r"pip install(?:[^\n\\]|\\\n)*", script)
    assert len(installs) == 2
    for line in installs:
        # by hash, or the kit itself from the checkout with no index at all
        assert "--require-hashes" in line or ("--no-index" in line and "--no-deps" in line), line
    requirements = [
        r for r in REQUIREMENTS.read_text().split("\n\n") if r.strip() and not r.startswith("#")
    ]
    assert requirements
    for requirement in requirements:
        assert re.match(r"[\w.-]+(\[[\w,-]+\])?==\S+ ", requirement), requirement
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", requirement), requirement

"""The kit's programs that run where a side runs: shipped as files, run with `python -m`."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from kit.errors import UserError
from kit.executors import programs
from kit.executors.base import Mount
from kit.executors.local import LocalExecutor
from kit.sides import versions
from kit.telemetry import kernels


def _run(folder: Path, module: str, *python_flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *python_flags, "-m", module],
        capture_output=True,
        text=True,
        cwd=folder,  # not the checkout: only what was shipped is importable as kit
        env={**os.environ, **programs.env(str(folder))},
    )


def test_ship_copies_the_modules_and_the_packages_above_them(tmp_path) -> None:
    programs.ship(versions.PROBE_FILES, tmp_path)
    shipped = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.py"))
    assert shipped == [
        "kit/__init__.py",
        "kit/sides/__init__.py",
        "kit/sides/versions_probe.py",
        "kit/telemetry/__init__.py",
        "kit/telemetry/sdpa_probe.py",
    ]
    source = Path(versions.versions_probe.__file__).read_text()
    assert (tmp_path / "kit/sides/versions_probe.py").read_text() == source


def test_the_versions_probe_runs_with_nothing_else_of_the_kit(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    programs.ship(versions.PROBE_FILES, tmp_path)
    run = _run(tmp_path, versions.PROBE)
    assert run.returncode == 0, run.stderr
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith(versions.MARKER + " "))
    found = json.loads(line[len(versions.MARKER) + 1 :])
    assert found["python"] == platform.python_version()
    assert found["torch"] == torch.__version__
    assert kernels.parse_sdpa_probe(run.stdout).torch_version == torch.__version__


# `python -S`: no site-packages, so neither torch nor an installed kit, only what was shipped


def test_a_module_the_probe_was_not_shipped_with_is_missing_there(tmp_path) -> None:
    # what a measured image sees: a probe that imported more of the kit would fail like this
    programs.ship(["sides/versions_probe.py"], tmp_path)
    run = _run(tmp_path, versions.PROBE, "-S")
    assert run.returncode != 0
    assert "No module named 'kit.telemetry'" in run.stderr


def test_the_probe_says_torch_is_missing_and_fails(tmp_path) -> None:
    programs.ship(versions.PROBE_FILES, tmp_path)
    run = _run(tmp_path, versions.PROBE, "-S")
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith(versions.MARKER + " "))
    assert json.loads(line[len(versions.MARKER) + 1 :])["torch"].startswith("unavailable: ")
    assert run.returncode != 0 and "No module named 'torch'" in run.stderr


def test_pytorch_versions_through_the_local_executor(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    workspace = tmp_path / "nanogpt"
    workspace.mkdir()
    found = versions.pytorch_versions(
        LocalExecutor(), sys.executable, Mount("nanogpt", workspace), None, tmp_path / "scratch"
    )
    assert found["torch"] == torch.__version__
    assert found["sdpa_backends"]["math"] is True  # torch's default
    assert (tmp_path / "scratch" / "programs" / "kit" / "sides" / "versions_probe.py").is_file()


def test_pytorch_versions_without_torch_is_a_user_error(tmp_path) -> None:
    python = tmp_path / "python-without-torch"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    workspace = tmp_path / "nanogpt"
    workspace.mkdir()
    with pytest.raises(UserError, match="did not report its versions"):
        versions.pytorch_versions(
            LocalExecutor(), str(python), Mount("nanogpt", workspace), None, tmp_path / "s"
        )

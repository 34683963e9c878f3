"""The kit as a user installs it: a wheel in a fresh venv, outside the checkout, runs a series.

Every file the kit reads (protocol, patch, families, Dockerfiles, rerun.sh's body, the probes it
ships into a side's environment) must come from the installed package, never the checkout.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CONTENDER, FAKE_NANOGPT, FAKES, ROOT, TEXT_INPUT, fake_nanogpt_protocol

# what never goes into a wheel's source tree: history, caches, results, earlier builds; the
# checkout's own folders by their place at its top (kit/results/ is the kit's source)
_ANYWHERE = shutil.ignore_patterns("*.egg-info", "__pycache__", ".*_cache")
BUILT_FROM = "0123456789abcdef0123456789abcdef01234567"
_AT_THE_TOP = {".git", ".venv", "results", "build", "dist", "wheelhouse"}


def NOT_SOURCES(folder: str, names: list[str]) -> set[str]:
    # every virtual environment at the top (.venv, .venv-cloud, ...)
    at_top = {n for n in names if n in _AT_THE_TOP or n.startswith(".venv")}
    top = at_top if Path(folder) == ROOT else set()
    return set(_ANYWHERE(folder, names)) | top


def _run(argv: list, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    run = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True)
    assert run.returncode == 0, f"{argv[:3]} exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
    return run


@pytest.mark.slow
def test_the_wheel_installed_in_a_fresh_venv_runs_a_smoke_series_and_verifies_it(tmp_path):
    pytest.importorskip("setuptools", reason="the build backend builds the wheel here")
    # a copy of the checkout: the build writes build/ and *.egg-info beside its sources, and
    # kit/files' links to the protocol's files must resolve as they do in the checkout
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=NOT_SOURCES)
    # the commit the wheel is built from: a checkout's HEAD, read by the build (setup.py)
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text(BUILT_FROM + "\n")
    # the checkout's own build of the clock's stamper: the wheel's build must make its own
    (src / "kit" / "measure" / "micakit-stamp").unlink(missing_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "MICAKIT_COMMIT", "MICAKIT_STAMPER")
    }
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", tmp_path / "dist", src],
        tmp_path,
        env,
    )
    (wheel,) = (tmp_path / "dist").glob("micakit-*.whl")

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], tmp_path, env)
    python = venv / "bin" / "python"
    purelib = _run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path, env
    ).stdout.strip()
    # The dependencies (torch among them) are this interpreter's, reached by a path file
    # rather than installed again; a path file adds its folders and runs none of theirs, so an
    # editable install of the checkout there is not seen, and the venv's own folder comes first.
    (Path(purelib) / "micakit-test-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    _run([*pip, "--python", python, "install", "--no-deps", "--no-index", wheel], tmp_path, env)

    where = _run(
        [python, "-c", "import kit, kit.protocol.load as p; print(kit.__file__); print(p.FILES)"],
        tmp_path,
        env,
    ).stdout.split()
    assert all(Path(w).is_relative_to(venv) for w in where), where
    if shutil.which("cc"):  # the outside clock's stamper, built with the wheel (setup.py)
        code = "from kit.measure import stamper; print(stamper.available())"
        stamper_at = _run([python, "-c", code], tmp_path, env).stdout.strip()
        assert Path(stamper_at).is_relative_to(venv), stamper_at
    said = _run([venv / "bin" / "micakit", "--version"], tmp_path, env).stdout.splitlines()
    protocol_sha256 = hashlib.sha256((ROOT / "kit" / "files" / "protocol.toml").read_bytes())
    assert said == [
        "micakit, version 0.1.0",  # first: rerun.sh looks for it
        f"commit {BUILT_FROM}",
        f"protocol sha256 {protocol_sha256.hexdigest()}",
    ]
    files = Path(where[1])
    for name in (
        "protocol.toml",
        "train.patch",
        "families.tsv",
        "Dockerfile.pytorch",
        "Dockerfile.mica",
        "Dockerfile.runner",
        "rerun-body.sh",
    ):
        assert (files / name).is_file() and not (files / name).is_symlink(), name

    protocol = fake_nanogpt_protocol(tmp_path / "p.toml", runs=2)
    out = tmp_path / "r"
    env |= {
        "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
        "MICAKIT_FAKE": json.dumps({"step_ms": {"*": 2.0}, "state": str(tmp_path / "state")}),
        "MICAKIT_FAKES": str(FAKES),
        "MICAKIT_CACHE": str(tmp_path / "cache"),
    }
    micakit = venv / "bin" / "micakit"
    _run(
        [
            micakit,
            "series",
            "--smoke",
            "--device",
            "cpu",
            "--executor",
            "local",
            "--nanogpt",
            FAKE_NANOGPT,
            "--input",
            TEXT_INPUT,
            "--protocol",
            protocol,
            "--contender",
            CONTENDER,
            "--out",
            out,
        ],
        tmp_path,
        env,
    )
    _run([micakit, "verify", out], tmp_path, env)
    assert json.loads((out / "manifest.json").read_text())["kit_commit"] == BUILT_FROM
    assert json.loads((out / "summary.json").read_text())["kit"]["commit"] == BUILT_FROM
    versions = json.loads((out / "versions.json").read_text())
    assert versions["pytorch"]["sdpa_backends"]["math"] is True  # the shipped probes ran
    assert (out / "rerun.sh").is_file() and (out / "report.md").is_file()

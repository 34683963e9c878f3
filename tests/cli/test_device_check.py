"""scripts/device-check.sh as its usage line and the README give it: from a fresh copy of the
checkout, `$OUT` set, no `--protocol`, with --device cpu. It runs here, says what it skipped,
needs no Docker SDK, and a step that fails says why in one line.

With MICAKIT_NANOGPT naming a real nanoGPT checkout it trains that on tiny Shakespeare, under the
protocol as shipped; else the fake nanoGPT, which the copy's own protocol then pins.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import (
    FAKE_NANOGPT,
    REAL_INPUT,
    ROOT,
    TEXT_INPUT,
    TEXT_INPUT_SHA256,
    edit_protocol,
    pin_fake_nanogpt,
    records,
)

NANOGPT = os.environ.get("MICAKIT_NANOGPT")
# the real nanoGPT compiles four modes on the CPU; the fake trains in a second
TIMEOUT_S = 3600 if NANOGPT else 600


def fresh_checkout(dest: Path) -> Path:
    """What a fresh clone of this checkout holds, as it is now: the tracked files and the new
    ones git does not ignore (no build outputs, results or wheelhouse), symbolic links kept."""
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout: a fresh clone's files are not known")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout  # fmt: skip
    for name in filter(None, os.fsdecode(listed).split("\0")):
        src, to = ROOT / name, dest / name
        if not os.path.lexists(src):
            continue  # deleted here and not yet committed: a clone would not hold it either
        to.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), to)
        else:
            shutil.copy2(src, to)
    return dest


def pin_the_fake(checkout: Path) -> None:
    """The checkout's own protocol pinned to the fake nanoGPT and the shipped text, with the
    fake's patch where the real one lies, beside the protocol file."""
    protocol = checkout / "benchmarks" / "NanoGpt" / "protocol.toml"
    assert tomllib.loads(protocol.read_text())["nanogpt"]["patch"] == "train.patch"
    edit_protocol(protocol, {**pin_fake_nanogpt(), "data.input_sha256": TEXT_INPUT_SHA256})
    shutil.copyfile(FAKE_NANOGPT / "train.patch", protocol.parent / "train.patch")


@pytest.fixture
def checkout(tmp_path: Path, fake_env) -> tuple[Path, Path, Path]:
    """A fresh copy of the checkout, and the nanoGPT and input.txt the check trains."""
    copy = fresh_checkout(tmp_path / "micakit")
    if NANOGPT:
        if not REAL_INPUT.is_file():
            pytest.skip(f"no tiny Shakespeare at {REAL_INPUT}: name a copy with MICAKIT_INPUT")
        return copy, Path(NANOGPT), REAL_INPUT
    fake_env(step_ms={"*": 2.0})
    pin_the_fake(copy)
    return copy, FAKE_NANOGPT, TEXT_INPUT


def device_check(checkout: Path, *args: str, site: Path | None = None) -> tuple[int, dict, str]:
    """`OUT=captures bash scripts/device-check.sh ARGS` in the checkout, under the kit's
    interpreter: its exit status, its steps by name and its whole output."""
    env = {**os.environ, "PYTHON": sys.executable, "OUT": "captures"}
    env.pop("PYTHONPATH", None)  # the copy's kit, found by the script itself
    if site is not None:
        env["MICAKIT_SITE"] = str(site)
    proc = subprocess.run(
        ["bash", "scripts/device-check.sh", *args],
        cwd=checkout, capture_output=True, text=True, env=env, timeout=TIMEOUT_S,
    )  # fmt: skip
    steps = dict(
        line[len("step ") :].split(": ", 1)
        for line in proc.stdout.splitlines()
        if line.startswith("step ")
    )
    return proc.returncode, steps, proc.stdout + proc.stderr


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow  # runs scripts/device-check.sh: a series and more
def test_device_check_runs_as_documented_and_names_what_it_skipped(tmp_path, checkout):
    copy, nanogpt, text = checkout
    # the local executor never needs the Docker SDK: here it cannot be imported at all
    blocked = tmp_path / "no-docker" / "docker"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('the Docker SDK is not installed')\n")
    code, steps, output = device_check(
        copy, "--device", "cpu", "--nanogpt", str(nanogpt), "--input", str(text),
        site=blocked.parent,
    )  # fmt: skip
    assert code == 0, output
    assert "Traceback" not in output
    assert steps["series"].startswith("ok")
    assert steps["verify"] == "ok"
    for name in ("card", "float16", "out-of-memory"):
        assert steps[name].startswith("skipped: --device cpu"), steps[name]
    assert steps["captures"].startswith("ok")
    # a short A/A round: PyTorch's default mode against its twin, from the series' aa.csv
    assert steps["aa"].startswith("ok: shakespeare-char/float32/pytorch/default: twin / "), steps
    out = copy / "captures"
    # the one-round protocol lies beside copies of the files the protocol names beside itself,
    # so the series read the very bytes the shipped protocol names (and hashed them)
    shipped = copy / "benchmarks" / "NanoGpt"
    manifest = json.loads((out / "series" / "manifest.json").read_text())
    hashed = manifest["inputs_sha256"]
    assert {"train.patch", "families.tsv", "gpt2-shakespeare.py"} <= set(hashed)
    for name, digest in hashed.items():
        if name.startswith("work/"):
            continue  # the series' own listing of nanoGPT's trees (verify hashes the trees)
        assert digest == sha256(shipped / name) == sha256(out / "protocol-one-round" / name)
    # one timed round after the discarded run, every number labelled by the kit as usual
    runs = records(out / "series")
    timed = [r for r in runs if r.get("kind", "timed") == "timed" and r.get("round", 0) >= 1]
    assert timed and all(r["round"] == 1 for r in timed)
    summary = (out / "summary.md").read_text()
    assert "- verify: ok" in summary and "## " in summary
    # no copy of nanoGPT's code or the datasets stays among the captures
    assert not (out / "series" / "work").exists()


@pytest.mark.slow  # runs scripts/device-check.sh: a series and more
def test_a_failed_step_says_why_in_one_line(tmp_path, checkout):
    copy, nanogpt, text = checkout
    changed = tmp_path / "nanogpt-changed"
    shutil.copytree(nanogpt, changed, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    with open(changed / "train.py", "a") as f:
        f.write("# not the pinned commit's train.py\n")
    code, steps, output = device_check(
        copy, "--device", "cpu", "--nanogpt", str(changed), "--input", str(text)
    )
    assert code == 1, output
    assert "Traceback" not in output
    reason = steps["series"]
    assert reason.startswith("failed: exit 2: ") and "train.py" in reason, reason
    assert "fix:" in reason and reason.endswith("(all of it in series.log)"), reason
    assert "\n" not in reason


def load_script():
    spec = importlib.util.spec_from_file_location("device_check", ROOT / "scripts/device_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("log", "said"),
    [
        (
            "building trees\nmicakit: error: the protocol file p.toml is not valid TOML\n"
            "  fix: correct it\n",
            "micakit: error: the protocol file p.toml is not valid TOML; fix: correct it",
        ),
        (
            "micakit: error: the nanoGPT files differ:\n  train.py: SHA-256 a, expected b\n"
            "  fix: undo local changes\n",
            "micakit: error: the nanoGPT files differ: train.py: SHA-256 a, expected b; "
            "fix: undo local changes",
        ),
        (
            'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
            "    open(p)\n    ^^^^^^^\nFileNotFoundError: [Errno 2] No such file: 'train.patch'\n",
            "FileNotFoundError: [Errno 2] No such file: 'train.patch'",
        ),
        ("step 1\nKilled\n\n", "Killed"),
        ("", "no output"),
    ],
)
def test_a_reason_is_the_error_the_exception_or_the_last_line(tmp_path, log, said):
    (tmp_path / "series.log").write_text(log)
    assert load_script().reason(tmp_path / "series.log") == f"{said} (all of it in series.log)"

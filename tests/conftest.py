"""Shared fixtures: a fast test protocol, the fake programs, and a way to run the CLI in-process."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kit.cli.main import main
from kit.protocol import load as protocol_mod

# Every program a test starts runs under the kit's own interpreter: the fakes' `#!/usr/bin/env
# python3` finds this one first, never whichever python3 the machine happens to have.
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])

ROOT = Path(__file__).resolve().parent.parent
FAKES = ROOT / "tests" / "fakes"
CONTENDER = FAKES / "contender.py"
FAKE_NANOGPT = FAKES / "nanogpt"
SHARED_INPUT = ROOT.parent / "shared" / "data" / "tinyshakespeare" / "input.txt"

# Fast timing for tests: 100 steps, the window 20..100, a tolerance that load cannot break.
FAST_TIMING = """[timing]
steps = 100
window = [20, 100]
runs = {runs}
discarded_runs = 1
log_interval = 10
cross_check_tolerance = {tolerance}
verdict_margin = 0.05
"""


def write_protocol(path: Path, runs: int = 5, tolerance: float = 0.10, **replace: str) -> Path:
    """The reference protocol with fast timing (and any other text replaced), written to path."""
    text = protocol_mod.DEFAULT_PATH.read_text()
    text = re.sub(
        r"\[timing\].*?(?=\n\[)",
        FAST_TIMING.format(runs=runs, tolerance=tolerance).strip(),
        text,
        flags=re.S,
    )
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)
    return path


@pytest.fixture
def fast_protocol(tmp_path: Path) -> Path:
    return write_protocol(tmp_path / "protocol.toml")


@pytest.fixture
def fake_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Set the fakes' behaviour: fake_env(step_ms={...}, events={...})."""

    def set_fake(**cfg) -> dict:
        cfg.setdefault("state", str(tmp_path / "fake-state"))
        monkeypatch.setenv("MICAKIT_FAKE", json.dumps(cfg))
        monkeypatch.setenv("MICAKIT_FAKES", str(FAKES))
        return cfg

    return set_fake


@pytest.fixture
def cli():
    """Run `micakit ARGS` in-process; returns click's Result."""

    def invoke(*args: str):
        return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)

    return invoke


def contender_args(out: Path, protocol: Path, *extra: str) -> list[str]:
    return [
        "series",
        "--out",
        out,
        "--protocol",
        protocol,
        "--device",
        "cpu",
        "--no-pytorch",
        "--contender",
        CONTENDER,
        "--executor",
        "local",
        "--model",
        "shakespeare-char",
        "--input",
        SHARED_INPUT,
        *extra,
    ]


def records(out: Path) -> list[dict]:
    path = out / "runs.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def python() -> str:
    return sys.executable


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    # never touch the user's cache from a test
    monkeypatch.setenv("MICAKIT_CACHE", str(tmp_path_factory.mktemp("cache")))
    os.environ.pop("MICAKIT_FAKE", None)


def fake_nanogpt_protocol(path: Path, runs: int = 5, tolerance: float = 0.10) -> Path:
    """A protocol whose pinned nanoGPT is the fake under tests/fakes/nanogpt, hashes and patch.

    The kit checks and patches the fake exactly as it checks and patches the real nanoGPT.
    """
    import hashlib

    files = ["train.py", "model.py", "configurator.py", "config/train_shakespeare_char.py"]
    lines = "\n".join(
        f'"{f}" = "{hashlib.sha256((FAKE_NANOGPT / f).read_bytes()).hexdigest()}"' for f in files
    )
    write_protocol(path, runs=runs, tolerance=tolerance)
    text = path.read_text()
    text = re.sub(r"\[nanogpt\.files\].*?(?=\n\n)", "[nanogpt.files]\n" + lines, text, flags=re.S)
    text = text.replace('patch = "train.patch"', f'patch = "{FAKE_NANOGPT / "train.patch"}"')
    path.write_text(text)
    return path


def pytorch_args(out: Path, protocol: Path, *extra: str) -> list:
    """A series of both sides: the fake nanoGPT through the real PyTorch side, and the contender."""
    return [
        "series",
        "--out",
        out,
        "--protocol",
        protocol,
        "--device",
        "cpu",
        "--executor",
        "local",
        "--nanogpt",
        FAKE_NANOGPT,
        "--input",
        SHARED_INPUT,
        "--model",
        "shakespeare-char",
        "--precision",
        "float32",
        *extra,
    ]

"""A directory whose manifest is gone is no series of anyone's (D6): `series --out` and
`series --resume` refuse it, naming what it holds and how to start anew, and `report` and
`verify` name it as a directory whose manifest is missing, never as one that never started."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kit.errors import ExitCode
from tests.conftest import CONTENDER, FAKES, contender_args, raw_records, write_protocol

pytestmark = pytest.mark.slow  # one small series, copied by each test


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, Path]:
    from click.testing import CliRunner

    from kit.cli.main import main

    root = tmp_path_factory.mktemp("series")
    protocol = write_protocol(root / "protocol.toml", runs=2)
    out = root / "r"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MICAKIT_FAKE", json.dumps({"step_ms": {"*": 2.0}, "state": str(root / "st")}))
        res = CliRunner().invoke(
            main,
            [str(a) for a in contender_args(out, protocol, "--precision", "float32")],
            catch_exceptions=False,
        )
    assert res.exit_code == 0, res.output
    return out, protocol


@pytest.fixture
def copied(finished, tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "r"
    shutil.copytree(finished[0], out, symlinks=True)
    return out, finished[1]


def other_program(tmp_path: Path) -> Path:
    """Another contender: the fake's bytes under another name, one comment longer."""
    other = tmp_path / "other.py"
    other.write_text(CONTENDER.read_text().replace("import fakelib", "import fakelib  # other", 1))
    other.chmod(0o755)
    shutil.copy(FAKES / "fakelib.py", tmp_path / "fakelib.py")
    return other


@pytest.mark.parametrize("gone", [("manifest.json",), ("manifest.json", "versions.json")])
def test_series_out_refuses_runs_without_their_manifest(copied, tmp_path, cli, gone):
    out, protocol = copied
    before = (out / "runs.jsonl").read_bytes()
    for name in gone:
        (out / name).unlink()
    args = contender_args(out, protocol)
    args[args.index(CONTENDER)] = other_program(tmp_path)
    res = cli(*args)
    assert res.exit_code == ExitCode.USER_ERROR, res.output
    n = len(raw_records(out))
    assert "holds a series' runs (" in res.output
    assert f"runs.jsonl ({n} records), runs/ (" in res.output
    assert "manifest.json is missing" in res.output
    assert "start anew in a new directory" in res.output
    assert "planned" not in res.output
    # nothing written: no other program's hash beside these runs, no manifest adopted
    assert not (out / "manifest.json").exists()
    assert (out / "runs.jsonl").read_bytes() == before
    if "versions.json" in gone:
        assert not (out / "versions.json").exists()


def test_resume_refuses_runs_without_their_manifest(copied, cli):
    out, _ = copied
    (out / "manifest.json").unlink()
    res = cli("series", "--resume", out)
    assert res.exit_code == ExitCode.USER_ERROR, res.output
    assert "manifest.json is missing" in res.output and "start anew" in res.output


def test_resume_refuses_runs_without_their_versions(copied, cli):
    out, _ = copied
    (out / "versions.json").unlink()
    res = cli("series", "--resume", out)
    assert res.exit_code == ExitCode.USER_ERROR, res.output
    assert "versions.json is missing" in res.output
    assert not (out / "versions.json").exists()


@pytest.mark.parametrize("command", ["report", "verify"])
def test_readers_name_a_missing_manifest_not_a_series_that_never_started(copied, cli, command):
    out, _ = copied
    (out / "manifest.json").unlink()
    res = cli(command, out)
    assert res.exit_code != 0
    assert "manifest.json is missing" in res.output, res.output
    assert "stopped before its first run" not in res.output
    assert "nothing was lost" not in res.output

"""Every user error is exit 2 with `error: ...` and `fix: ...`, never a traceback (table-driven)."""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kit.errors import ExitCode
from kit.results import store
from tests.conftest import (
    ROOT,
    contender_args,
    edit_protocol,
    fake_nanogpt_protocol,
    pytorch_args,
    records,
    write_protocol,
)


def _series(tmp_path, fast_protocol, cli, **env):
    out = tmp_path / "r"
    assert cli(*contender_args(out, fast_protocol, "--precision", "float32")).exit_code == 0
    return out


def case_out_names_a_file(tmp_path, fast_protocol, cli, monkeypatch):
    target = tmp_path / "a-file"
    target.write_text("not a folder")
    return cli(*contender_args(target, fast_protocol)), "names a file"


def case_read_only_parent(tmp_path, fast_protocol, cli, monkeypatch):
    parent = tmp_path / "ro"
    parent.mkdir()
    real = Path.mkdir

    def refuse(self, *a, **k):  # root ignores a folder's mode, so the refusal is simulated
        if self.parent == parent:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "mkdir", refuse)
    return cli(*contender_args(parent / "r", fast_protocol)), "Permission denied"


def case_full_disk(tmp_path, fast_protocol, cli, monkeypatch):
    def full(self, record):
        raise OSError(errno.ENOSPC, "No space left on device", str(self.root / store.RECORDS))

    monkeypatch.setattr(store.ResultsDir, "append_record", full)
    return cli(*contender_args(tmp_path / "r", fast_protocol)), "No space left on device"


def case_deleted_run_folder_at_resume(tmp_path, fast_protocol, cli, monkeypatch):
    out = _series(tmp_path, fast_protocol, cli)
    shutil.rmtree(out / records(out)[1]["log_dir"])
    return cli("series", "--resume", out), "missing"


def case_time_ms_dash(tmp_path, fast_protocol, cli, monkeypatch):
    # the grammar admits `time_ms -`: a run that prints it fails, and the series ends with
    # exit 3 (amendment 8.4), error and fix, at its start and at its resume, never a traceback
    fake = tmp_path / "dash.sh"
    fake.write_text(
        "#!/bin/sh\nfor s in 0 10 20 30 40 50 60 70 80 90 100; do\n"
        '  echo "step $s loss 1.0 time_ms -"\ndone\n'
    )
    fake.chmod(0o755)
    args = contender_args(tmp_path / "r", fast_protocol)
    args[args.index("--contender") + 1] = fake
    first = cli(*args)
    assert first.exit_code == ExitCode.SERIES_FAILED, first.output
    assert "is not a number" in first.output
    return cli("series", "--resume", tmp_path / "r"), "is not a number", ExitCode.SERIES_FAILED


def case_missing_patch(tmp_path, fast_protocol, cli, monkeypatch):
    # a protocol that names a patch beside it that is not there: named, never a traceback
    bad = edit_protocol(
        fake_nanogpt_protocol(tmp_path / "p.toml"), {"nanogpt.patch": "no-such.patch"}
    )
    return cli(*pytorch_args(tmp_path / "r", bad)), "no-such.patch"


def _protocol_case(key: str, value: object, said: str):
    def case(tmp_path, fast_protocol, cli, monkeypatch):
        bad = write_protocol(tmp_path / "bad.toml", changes={key: value})
        return cli(*contender_args(tmp_path / "r", bad)), said

    return case


CASES = {
    "--out names a file": case_out_names_a_file,
    "read-only parent folder": case_read_only_parent,
    "full disk": case_full_disk,
    "deleted run folder at resume": case_deleted_run_folder_at_resume,
    "time_ms -": case_time_ms_dash,
    "patch missing": case_missing_patch,
    "tolerance below 0": _protocol_case("timing.cross_check_tolerance", -0.01, "between 0 and 1"),
    "tolerance above 1": _protocol_case("timing.cross_check_tolerance", 1.5, "between 0 and 1"),
    "runs 0": _protocol_case("timing.runs", 0, "timing.runs is 0"),
    "window beyond the steps": _protocol_case("timing.window", [20, 200], "beyond timing.steps"),
    "negative steps": _protocol_case("timing.steps", -100, "timing.steps is -100"),
    "negative window": _protocol_case("timing.window", [-20, 100], "negative"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_user_error_is_exit_2_with_error_and_fix(
    name, tmp_path, fast_protocol, fake_env, cli, monkeypatch
):
    fake_env(step_ms={"*": 2.0})
    res, said, *code = CASES[name](tmp_path, fast_protocol, cli, monkeypatch)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == (code[0] if code else ExitCode.USER_ERROR), res.output
    assert "micakit: error: " in res.output and "  fix: " in res.output, res.output
    assert said in res.output
    assert "Traceback" not in res.output


def _results_with_a_file(tmp_path: Path) -> Path:
    """A folder that reads as a results directory (a manifest) with a file in it."""
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "manifest.json").write_text("{}")
    (folder / "report.md").write_text("# a report\n")
    return folder / "report.md"


# click's own usage errors, said in the kit's form: name -> (arguments, said, what the fix says)
USAGE = {
    "unknown option": (lambda t: ["series", "--bogus"], "no such option", "micakit series --help"),
    "unknown option of micakit": (lambda t: ["--bogus"], "no such option", "micakit --help"),
    "unknown command": (lambda t: ["frob"], "no such command 'frob'", "micakit --help"),
    "bad choice": (
        lambda t: ["series", "--device", "gpu"],
        "'gpu' is not one of",
        "micakit series --help",
    ),
    "missing argument": (lambda t: ["verify"], "missing argument", "micakit verify --help"),
    "report of a missing folder": (
        lambda t: ["report", t / "nope"],
        "does not exist",
        "a `micakit series --out DIR`",
    ),
    "verify of a missing folder": (
        lambda t: ["verify", t / "nope"],
        "does not exist",
        "a `micakit series --out DIR`",
    ),
    "compare with a missing folder": (
        lambda t: ["compare", t, t / "nope"],
        "does not exist",
        "a `micakit series --out DIR`",
    ),
    "verify of a file": (
        lambda t: ["verify", _results_with_a_file(t)],
        "is a file, not a results directory",
        "name the folder it lies in",
    ),
    "--out with --resume": (
        lambda t: ["series", "--out", t / "a", "--resume", t / "b"],
        "not both",
        "--resume",
    ),
    "--out with --resume, a check": (
        lambda t: ["correctness", "--out", t / "a", "--resume", t / "b"],
        "not both",
        "--resume",
    ),
}


@pytest.mark.parametrize("how", ["in-process", "python run.py"])
@pytest.mark.parametrize("name", list(USAGE))
def test_usage_errors_say_error_and_fix(name, how, tmp_path, cli):
    make, said, fix = USAGE[name]
    args = [str(a) for a in make(tmp_path)]
    if how == "in-process":
        res = cli(*args)
        code, err = res.exit_code, res.output
    else:
        done = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True, cwd=ROOT
        )
        code, err = done.returncode, done.stderr
    assert code == ExitCode.USER_ERROR, err
    assert "Traceback" not in err and "Usage:" not in err, err
    lines = err.splitlines()
    error = [x for x in lines if x.startswith("micakit: error: ")]
    fixes = [x for x in lines if x.startswith("  fix: ")]
    assert len(error) == 1 and len(fixes) == 1, err
    assert said in error[0] and fix in fixes[0], err

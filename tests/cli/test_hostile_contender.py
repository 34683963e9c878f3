"""A contender that games the contract (D4, §5) gains nothing: more steps than asked, a loss
that is not a number inside the window, an own clock that goes back. And a results directory
is what its series wrote, read strictly (D6): every JSON file parses without NaN or Infinity,
`verify` names a link or a file its run did not write, and a resume never writes through a
link."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kit.errors import ExitCode
from tests.conftest import contender_args, preview_series, records, write_protocol

pytestmark = pytest.mark.slow  # whole series


@pytest.mark.parametrize(
    ("event", "words"),
    [
        ("past-steps", "a step line for step 110, past the protocol's last step 100"),
        ("nan-loss", "the loss at step 50 is nan"),
        ("crash", "failed: exit code 139; the series stops here"),  # its exit code said once
    ],
)
def test_a_run_that_breaks_the_contract_fails_and_ends_the_series(
    tmp_path, fast_protocol, fake_env, cli, event, words
):
    fake_env(step_ms={"*": 2.0}, events={"mica#1": event})
    out = tmp_path / "r"
    res = cli(*contender_args(out, fast_protocol, "--precision", "float32"))
    assert res.exit_code == ExitCode.SERIES_FAILED, res.output
    assert words in res.output
    failed = records(out)[-1]
    assert failed["status"] == "failed"
    assert (
        (failed["reason"] == "exit code 139") if event == "crash" else (words in failed["reason"])
    )
    assert failed["final_loss"] is None  # never the loss of a step the protocol did not ask
    assert cli("verify", out).exit_code == 0  # recomputed the same from the raw logs


def test_an_own_clock_that_goes_back_voids_the_run_with_the_step_named(tmp_path, fake_env, cli):
    protocol = write_protocol(tmp_path / "p.toml", runs=2)
    fake_env(step_ms={"*": 2.0}, events={"mica#2": "clock-backwards"})
    out = tmp_path / "r"
    res = cli(*contender_args(out, protocol, "--precision", "float32"))
    assert res.exit_code == 0, res.output
    void = [r for r in records(out) if r["status"] == "void"]
    assert len(void) == 1 and "its own clock goes backwards at step 50" in void[0]["reason"]
    assert cli("verify", out).exit_code == 0


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("series")
    protocol = write_protocol(root / "protocol.toml", runs=2)
    return preview_series(root, protocol, "--precision", "float32")[0]


@pytest.fixture
def series(finished: Path, tmp_path: Path) -> Path:
    out = tmp_path / "r"
    shutil.copytree(finished, out, symlinks=True)
    return out


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_every_json_file_the_kit_writes_parses_strictly(finished):
    parsed = 0
    for path in sorted(finished.rglob("*")):
        if path.suffix == ".json":
            _strict(path.read_text())
            parsed += 1
        elif path.suffix == ".jsonl":
            for line in path.read_text().splitlines():
                _strict(line)
            parsed += 1
    assert parsed >= 10  # manifest, plan, versions, summary, runs.jsonl, each run's files


def test_a_value_json_cannot_hold_is_null_with_its_reason(tmp_path):
    from kit.results.records import RunRecord
    from kit.results.store import ResultsDir

    rd = ResultsDir(tmp_path)
    head = {"config": "c", "kind": "timed"}
    judged = {"step_s": 0.002, "own_step_s": float("inf"), "final_loss": float("nan")}
    rd.append_record(RunRecord(0, "runs/x", "", "void", "why", "local", head=head, judged=judged))
    line = (tmp_path / "runs.jsonl").read_text()
    document = _strict(line)
    assert isinstance(document, dict)
    assert document["judged"]["own_step_s"] is None and document["judged"]["final_loss"] is None
    assert document["non_finite"] == {
        "judged.own_step_s": "inf (not a finite number: stored as null)",
        "judged.final_loss": "nan (not a finite number: stored as null)",
    }
    assert rd.runs()[0].judged["own_step_s"] is None  # read back as the kit's own record


def _log(out: Path) -> Path:
    return next(out.glob("runs/*/attempt-1/stdout.log"))


def test_verify_names_a_raw_log_replaced_by_a_link(series, cli, tmp_path):
    log = _log(series)
    outside = tmp_path / "elsewhere.log"
    shutil.copy(log, outside)
    log.unlink()
    log.symlink_to(outside)
    res = cli("verify", series)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH, res.output
    assert f"{log.relative_to(series)}: a symbolic link (to {outside})" in res.output


def test_verify_names_runs_replaced_by_a_link(series, cli, tmp_path):
    outside = tmp_path / "runs-elsewhere"
    shutil.move(series / "runs", outside)
    (series / "runs").symlink_to(outside)
    res = cli("verify", series)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH, res.output
    assert f"runs: a symbolic link (to {outside})" in res.output


def test_resume_never_writes_through_a_link(series, cli, tmp_path):
    outside = tmp_path / "runs-elsewhere.jsonl"
    data = (series / "runs.jsonl").read_bytes()
    outside.write_bytes(data[:-10])  # a torn last line, which a resume would cut
    (series / "runs.jsonl").unlink()
    (series / "runs.jsonl").symlink_to(outside)
    res = cli("series", "--resume", series)
    assert res.exit_code == ExitCode.USER_ERROR, res.output
    assert "never writes through one" in res.output and "runs.jsonl" in res.output
    assert outside.read_bytes() == data[:-10]


def test_verify_names_a_file_added_to_an_attempt_folder(series, cli):
    added = _log(series).parent / "notes.txt"
    added.write_text("a file the run did not write\n")
    res = cli("verify", series)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH, res.output
    assert f"{added.relative_to(series)}: a file that run" in res.output
    assert "does not list" in res.output
    os.unlink(added)
    assert cli("verify", series).exit_code == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("start_ns", 1),
        ("started_utc", "2020-01-01T00:00:00+00:00"),
        ("executor", "docker"),
        ("end_ns", 2),
        ("exit_code", 3),
    ],
)
def test_verify_compares_each_field_the_run_itself_gave(series, cli, field, value):
    lines = (series / "runs.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    record[field] = value
    lines[1] = json.dumps(record)
    (series / "runs.jsonl").write_text("\n".join(lines) + "\n")
    res = cli("verify", series)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH, res.output
    assert f"runs.jsonl line 2: run 1's {field} is {json.dumps(value)} in its record" in res.output


def test_a_record_without_its_run_file_still_has_its_start_before_its_stamps(series, cli):
    # as a kit before run.json wrote it: the start and end still hold the logs' stamps
    lines = (series / "runs.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    rel = f"{record['log_dir']}/run.json"
    del record["files"][rel]
    (series / rel).unlink()
    lines[1] = json.dumps(record)
    (series / "runs.jsonl").write_text("\n".join(lines) + "\n")
    assert cli("verify", series).exit_code == 0
    record["start_ns"] += 10**12  # a start after its own first line
    lines[1] = json.dumps(record)
    (series / "runs.jsonl").write_text("\n".join(lines) + "\n")
    res = cli("verify", series)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH, res.output
    assert "comes after its logs' first stamp" in res.output


def test_stderr_is_capped_per_run_the_cut_marked_and_its_size_recorded(tmp_path, fake_env, cli):
    protocol = write_protocol(
        tmp_path / "p.toml", runs=2, changes={"timing.stderr_cap_bytes": 65536}
    )
    fake_env(step_ms={"*": 2.0}, events={"mica#2": "stderr-flood"})
    out = tmp_path / "r"
    res = cli(*contender_args(out, protocol, "--precision", "float32"))
    assert res.exit_code == 0, res.output
    (flooded,) = [r for r in records(out) if r.get("stderr_cut")]
    log = out / flooded["log_dir"] / "stderr.log"
    data = log.read_bytes()
    assert len(data) <= 65536 + 200 and b"[micakit: stderr cut:" in data
    assert data.rstrip().endswith(b"the last warning")  # its end kept: an out-of-memory line is
    assert flooded["stderr_cut"]["seen_bytes"] > 1_500_000
    assert flooded["stderr_cut"]["kept_bytes"] < 65536
    assert cli("verify", out).exit_code == 0

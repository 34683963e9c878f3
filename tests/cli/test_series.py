"""Whole series driven through the CLI in-process, with the fake contender (D4's contract)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kit.errors import ExitCode
from tests.conftest import CONTENDER, TEXT_INPUT, contender_args, records, write_protocol


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_a_whole_series_rotates_discards_and_reports(tmp_path, fast_protocol, fake_env, cli):
    fake_env(step_ms={"mica": 2.0, "mica-half-intermediates": 1.5, "mica-strict": 2.5})
    out = tmp_path / "r"
    res = cli(
        *contender_args(out, fast_protocol, "--precision", "float32", "--precision", "float16")
    )
    assert res.exit_code == 0, res.output
    recs = [r for r in records(out) if r["kind"] in ("discarded", "timed")]
    plan = json.loads((out / "plan.json").read_text())
    configs = [c["id"] for c in plan["configurations"]]
    assert configs == [
        "shakespeare-char/float32/contender/mica",
        "shakespeare-char/float16/contender/mica-half-intermediates",
        "shakespeare-char/float16/contender/mica-strict",
    ]
    # the discarded round first, then five rounds rotated left by the round's number
    assert [r["config"] for r in recs[:3]] == configs
    assert all(r["discarded"] for r in recs[:3])
    for rnd in range(1, 6):
        got = [r["config"] for r in recs if r["round"] == rnd]
        assert got == configs[rnd % 3 :] + configs[: rnd % 3]
    assert [r["run_id"] for r in recs] == list(range(18))
    assert {r["status"] for r in recs} == {"ok"}
    # §6's separate records follow the rounds: here no nsys, so each says it was not profiled
    separate = [r for r in records(out) if r["kind"] == "profile"]
    assert [r["config"] for r in separate] == configs
    assert {r["status"] for r in separate} == {"not profiled"}
    # every run a fresh process: its own stamped logs and command
    for r in recs:
        assert (out / r["log_dir"] / "stdout.log").exists()
        assert (out / r["log_dir"] / "command.json").exists()
    # the discarded run wrote the products record that every timed run read (amendment 4.3)
    assert (out / "work" / "products" / "shakespeare-char.float32.contender.mica.products").exists()
    conf = (out / "tables" / "configurations.csv").read_text()
    assert "shakespeare-char/float16/contender/mica-strict" in conf
    md = (out / "report.md").read_text()
    assert "a 10.7-million-parameter model" in md
    assert cli("verify", out).exit_code == 0


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_out_of_memory_is_recorded_and_the_series_goes_on(tmp_path, fast_protocol, fake_env, cli):
    fake_env(step_ms={"*": 2.0}, events={"mica-half-intermediates#3": "oom"})
    out = tmp_path / "r"
    res = cli(
        *contender_args(out, fast_protocol, "--precision", "float32", "--precision", "float16")
    )
    assert res.exit_code == 0, res.output
    recs = records(out)
    oom = [r for r in recs if r["status"] == "out of memory"]
    assert len(oom) == 1 and oom[0]["config"].endswith("mica-half-intermediates")
    # it has no time and runs no further; the other configurations ran all their rounds
    later = [r for r in recs if r["config"] == oom[0]["config"] and r["run_id"] > oom[0]["run_id"]]
    assert later == []
    assert sum(1 for r in recs if r["config"].endswith("/mica") and r["kind"] == "timed") == 5
    conf = (out / "tables" / "configurations.csv").read_text()
    assert f"out of memory in run {oom[0]['run_id']}" in conf
    assert "out of memory" in (out / "report.md").read_text()


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_void_run_is_recorded_with_why(tmp_path, fake_env, cli):
    # the fake's own clock runs 25% fast on its 2nd start. Within the tolerance of 10%, a line
    # stamped late on a loaded machine moves an honest run's 400 ms window by tens of ms and
    # keeps it; at 3% one CI run voided an honest run besides (12 ms late)
    protocol = write_protocol(tmp_path / "p.toml", tolerance=0.10)
    fake_env(step_ms={"*": 5.0}, events={"mica#2": "drift"})
    out = tmp_path / "r"
    assert cli(*contender_args(out, protocol, "--precision", "float32")).exit_code == 0
    void = [r for r in records(out) if r["status"] == "void"]
    assert len(void) == 1 and "apart, more than 10%" in void[0]["reason"]
    assert void[0]["step_s"] is not None  # the outside clock's reading stays on record
    conf = (out / "tables" / "configurations.csv").read_text().splitlines()[1]
    assert ",4," in conf and "1 void" in conf


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_a_crash_ends_the_series_and_resume_reruns_only_it(tmp_path, fast_protocol, fake_env, cli):
    fake_env(step_ms={"*": 2.0}, events={"mica#3": "crash"})
    out = tmp_path / "r"
    res = cli(*contender_args(out, fast_protocol, "--precision", "float32"))
    assert res.exit_code == ExitCode.SERIES_FAILED
    assert "run 2 of shakespeare-char/float32/contender/mica failed" in res.output
    assert "exit code 139" in res.output and "Segmentation fault" in res.output
    assert "--resume" in res.output
    assert [r["status"] for r in records(out)] == ["ok", "ok", "failed"]
    res = cli("series", "--resume", out)
    assert res.exit_code == 0, res.output
    recs = records(out)
    done = [r["run_id"] for r in recs if r["status"] in ("ok", "not profiled")]
    assert sorted(done) == list(range(7)) and len(done) == len(set(done))
    # the failed attempt's logs are kept beside the rerun's
    assert (out / "runs" / "0002-shakespeare-char.float32.contender.mica" / "attempt-2").exists()


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_malformed_output_ends_the_series_with_what_is_wrong(
    tmp_path, fast_protocol, fake_env, cli
):
    for event, words in [
        ("bad-loss", "is not a number"),
        ("out-of-order", "step 30 comes after step 40"),
        ("missing-window-end", "no line for step 100"),
        ("empty", "printed nothing"),
        ("malformed", "breaks the grammar"),
    ]:
        fake_env(step_ms={"*": 2.0}, events={"mica#1": event}, state=str(tmp_path / event))
        out = tmp_path / event / "r"
        res = cli(*contender_args(out, fast_protocol, "--precision", "float32"))
        assert res.exit_code == ExitCode.SERIES_FAILED, (event, res.output)
        assert words in res.output, (event, res.output)


def test_bad_input_is_a_clear_error(tmp_path, fast_protocol, cli):
    out = tmp_path / "r"
    out.mkdir()
    (out / "keep").write_text("x")
    res = cli(*contender_args(out, fast_protocol))
    assert res.exit_code == ExitCode.USER_ERROR and "already exists" in res.output
    assert (out / "keep").read_text() == "x"
    not_exec = tmp_path / "prog"
    not_exec.write_text("")
    res = cli(
        "series",
        "--out",
        tmp_path / "n",
        "--device",
        "cpu",
        "--full-cpu",
        "--no-pytorch",
        "--contender",
        not_exec,
        "--executor",
        "local",
    )
    assert res.exit_code == ExitCode.USER_ERROR and "not an executable file" in res.output
    bad = write_protocol(tmp_path / "bad.toml", changes={"timing.rounds": 3})
    res = cli(*contender_args(tmp_path / "b", bad))
    assert res.exit_code == ExitCode.USER_ERROR and "unknown key timing.rounds" in res.output
    res = cli(*contender_args(tmp_path / "m", fast_protocol, "--model", "gpt5"))
    assert res.exit_code == ExitCode.USER_ERROR and "unknown model 'gpt5'" in res.output


def test_resume_under_a_changed_protocol_is_refused(tmp_path, fast_protocol, fake_env, cli):
    fake_env(step_ms={"*": 2.0}, events={"mica#2": "crash"})
    out = tmp_path / "r"
    cli(*contender_args(out, fast_protocol, "--precision", "float32"))
    changed = write_protocol(tmp_path / "changed.toml", runs=4)
    res = cli("series", "--resume", out, "--protocol", changed)
    assert res.exit_code == ExitCode.USER_ERROR
    assert "never changes protocol midway" in res.output


def test_program_that_cannot_start(tmp_path, fast_protocol, cli):
    prog = tmp_path / "prog"
    prog.write_text("#!/nonexistent/interpreter\n")
    prog.chmod(0o755)
    res = cli(
        "series",
        "--out",
        tmp_path / "r2",
        "--protocol",
        fast_protocol,
        "--device",
        "cpu",
        "--full-cpu",
        "--no-pytorch",
        "--contender",
        prog,
        "--executor",
        "local",
        "--input",
        TEXT_INPUT,
        "--model",
        "shakespeare-char",
    )
    assert res.exit_code == ExitCode.USER_ERROR
    assert "cannot start" in res.output


def test_versions_are_recorded_and_checked_at_resume(tmp_path, fast_protocol, fake_env, cli):
    fake_env(step_ms={"*": 2.0}, events={"mica#2": "crash"})
    out = tmp_path / "r"
    cli(*contender_args(out, fast_protocol, "--precision", "float32"))
    found = json.loads((out / "versions.json").read_text())
    assert found["contender"]["build_kind"] == "release"
    assert found["kit"]["version"]
    found["contender"]["says"] = "mica 7.6.0"
    (out / "versions.json").write_text(json.dumps(found))
    res = cli("series", "--resume", out)
    assert res.exit_code == ExitCode.USER_ERROR
    assert "contender.says: 'mica 7.6.0' then" in res.output


def test_a_development_build_is_labelled_preparation(
    tmp_path, fast_protocol, fake_env, cli, monkeypatch
):
    fake_env(step_ms={"*": 2.0})
    monkeypatch.setenv("FAKE_BUILD", "development")
    out = tmp_path / "r"
    assert cli(*contender_args(out, fast_protocol, "--precision", "float32")).exit_code == 0
    assert (
        "preparation (a development build, rule 9)"
        in (out / "report.md").read_text().splitlines()[0]
    )


def test_a_versions_probe_stopped_midway_leaves_nothing_behind(
    tmp_path, fast_protocol, fake_env, cli
):
    """kill -9 during the versions probe: its partial logs must not join the next reading."""
    fake_env(step_ms={"*": 2.0}, events={"mica#2": "crash"})
    out = tmp_path / "r"
    cli(*contender_args(out, fast_protocol, "--precision", "float32"))
    probe = out / "work" / "versions" / "contender"
    probe.mkdir(parents=True)
    (probe / "stdout.log").write_text("1 fake contender 1.0.0, commit 0000000, release\n")
    res = cli("series", "--resume", out)
    assert res.exit_code == 0, res.output


def _limits(tmp_path, stall_s: float, factor: float = 3.0):
    return write_protocol(
        tmp_path / "p.toml",
        runs=2,
        changes={"timing.stall_s": stall_s, "timing.run_limit_factor": factor},
    )


def _stopped(tmp_path: Path, cli, protocol: Path):
    """A contender series the kit stops at a run (exit 3): its folder, click's result and the
    stopped run's record."""
    out = tmp_path / "r"
    res = cli(*contender_args(out, protocol, "--precision", "float32"))
    assert res.exit_code == ExitCode.SERIES_FAILED, res.output
    return out, res, records(out)[-1]


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_a_hang_is_stopped_recorded_as_failed_and_resume_runs_it_again(tmp_path, fake_env, cli):
    protocol = _limits(tmp_path, stall_s=2.0)
    fake_env(step_ms={"*": 2.0}, events={"mica#1": "hang-midway"})
    out, res, failed = _stopped(tmp_path, cli, protocol)
    assert failed["status"] == "failed" and "no output line for 2 s" in failed["reason"]
    assert failed["stopped"] == failed["reason"]
    assert "step 40 loss" in res.output  # the output's tail, in the series' message
    assert cli("series", "--resume", out).exit_code == 0
    assert cli("verify", out).exit_code == 0


def test_a_timed_run_past_the_whole_run_limit_is_stopped(tmp_path, fake_env, cli):
    protocol = _limits(tmp_path, stall_s=1.5, factor=2.0)
    fake_env(step_ms={"*": 2.0}, events={"mica#2": "slow"})
    out, res, failed = _stopped(tmp_path, cli, protocol)
    assert failed["kind"] == "timed" and "whole-run limit" in failed["reason"]
    discarded = records(out)[0]
    limit_s = max(2.0 * (discarded["end_ns"] - discarded["start_ns"]) / 1e9, 1.5)
    assert (failed["end_ns"] - failed["start_ns"]) / 1e9 == pytest.approx(limit_s, abs=3.0)


def _no_info_contender(tmp_path):
    """A contender that keeps D4 but knows no `+mica info -mica`: it starts training instead,
    and its training output differs at every start (its own clock)."""
    program = tmp_path / "no-info.sh"
    program.write_text(
        f'#!/bin/sh\nif [ "$1" = "+mica" ] && [ "$2" = "info" ]; then\n'
        f"  exec {sys.executable} {CONTENDER} --steps 100000\nfi\n"
        f'exec {sys.executable} {CONTENDER} "$@"\n'
    )
    program.chmod(0o755)
    return program


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_a_contender_without_version_information_is_stopped_and_resumes(
    tmp_path, fast_protocol, fake_env, cli, monkeypatch
):
    from kit.sides import versions

    monkeypatch.setattr(versions, "ANSWER_S", 1.5)
    fake_env(step_ms={"*": 2.0}, events={"mica#3": "crash"})
    out = tmp_path / "r"
    args = contender_args(out, fast_protocol, "--precision", "float32")
    args[args.index("--contender") + 1] = _no_info_contender(tmp_path)
    # the wrapper runs the fake contender from another folder: named as one it reads, for a
    # confined contender sees the machine hidden (docs/internals.md)
    monkeypatch.setenv("MICAKIT_CONTENDER_READS", str(CONTENDER.parent))
    assert cli(*args).exit_code == ExitCode.SERIES_FAILED
    found = json.loads((out / "versions.json").read_text())["contender"]
    assert found["says"] == "gave no version information"
    assert [a["stopped"] is not None for a in found["answers"]] == [True, True]
    assert found["identity"] == f"sha256:{found['program_sha256']}"
    # its answers differ at every start, and are never compared: the resume goes on
    res = cli("series", "--resume", out)
    assert res.exit_code == 0, res.output


@pytest.mark.slow  # runs a series
def test_a_hidden_contender_that_cannot_find_its_files_is_told_how_to_show_them(
    tmp_path, fast_protocol, fake_env, cli, monkeypatch
):
    """A wrapper that runs a program from a folder the confined contender does not see fails,
    and the fix names MICAKIT_CONTENDER_READS."""
    from kit.sides import versions
    from tests.unit.executors.test_supervisor import _namespaces_allowed

    monkeypatch.setattr(versions, "ANSWER_S", 1.5)
    if not _namespaces_allowed(tmp_path):
        pytest.skip("this machine allows no user namespaces")
    fake_env(step_ms={"*": 2.0})
    args = contender_args(tmp_path / "r", fast_protocol, "--precision", "float32")
    args[args.index("--contender") + 1] = _no_info_contender(tmp_path)
    res = cli(*args)
    assert res.exit_code == ExitCode.SERIES_FAILED, res.output
    assert "No such file or directory" in res.output
    assert "name what else it reads in MICAKIT_CONTENDER_READS" in res.output

"""§5's clock holds only when every line leaves the moment it is written: a contender in C whose
stdout is block-buffered (stdio's default on a pipe) is found out, and the series stops there."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kit.errors import ExitCode
from kit.measure.stamped import read_stamped
from kit.protocol.load import load
from kit.results import judging
from kit.results.records import RunRecord
from tests.conftest import FAKES, TEXT_INPUT, raw_records, records

SOURCE = FAKES / "buffered_contender.c"
CC = shutil.which("cc") or shutil.which("gcc")


@pytest.fixture
def buffered_contender(tmp_path: Path) -> Path:
    if CC is None:
        pytest.skip("no C compiler (cc or gcc) on this machine to build the buffered contender")
    program = tmp_path / "bin" / "buffered-contender"
    program.parent.mkdir()
    subprocess.run([CC, "-O1", "-o", str(program), str(SOURCE), "-lm"], check=True)
    return program


def series_args(out: Path, protocol: Path, program: Path) -> list:
    return [
        "series", "--out", out, "--protocol", protocol, "--device", "cpu", "--full-cpu", "--no-pytorch",
        "--contender", program, "--executor", "local", "--model", "shakespeare-char",
        "--input", TEXT_INPUT, "--precision", "float32",
    ]  # fmt: skip


def bursts(said: str, lines: int) -> bool:
    """Whether `said` finds the output buffered: of at least `lines` step lines seen (what a
    stop saw; on a loaded machine it may see a few more), at least half in bursts (the kit's
    threshold; a line that opens a read of its own, late, is in none)."""
    found = re.search(r"its output is buffered: (\d+) of (\d+) step lines arrived in bursts", said)
    if found is None:
        return False
    held, told = map(int, found.groups())
    return told >= lines and held * 2 >= told


def stopped_series(tmp_path: Path, protocol: Path, program: Path, cli, monkeypatch):
    """A series of the block-buffered contender (2 ms steps) in tmp_path/r, which it stops
    (exit 3): its folder and click's result."""
    monkeypatch.delenv("FAKE_STDOUT", raising=False)
    monkeypatch.setenv("FAKE_STEP_MS", "2")
    out = tmp_path / "r"
    res = cli(*series_args(out, protocol, program))
    assert res.exit_code == ExitCode.SERIES_FAILED, res.output
    return out, res


def test_a_buffered_contender_stops_the_series_at_its_first_run_and_resumes(
    tmp_path, fast_protocol, buffered_contender, cli, monkeypatch
):
    out, res = stopped_series(tmp_path, fast_protocol, buffered_contender, cli, monkeypatch)
    # a run ended the series (exit 3), as a crash does: it is recorded, and resume runs it again
    assert "run 0 of shakespeare-char/float32/contender/mica is void" in res.output
    assert bursts(res.output, 8)
    assert "§5 needs every line to leave when written" in res.output
    assert "fix: make its stdout line-buffered: `stdbuf -oL`" in res.output
    assert "+mica stdout=line -mica" in res.output
    assert f"micakit series --resume {out}" in res.output
    # the discarded run alone ran: no round was spent on a program every run of which is void
    recs = records(out)
    assert [(r["run_id"], r["status"]) for r in recs] == [(0, "void")]
    assert bursts(recs[0]["reason"], 8)

    # `verify` judges it again from its raw stamped log alone, to the same reason
    protocol = load(out / "protocol.toml")
    raw = raw_records(out)[0]
    again = judging.rejudge(out, RunRecord.from_json(raw), protocol.contender, protocol.timing)
    assert (again.status, again.reason) == (recs[0]["status"], recs[0]["reason"])
    assert cli("verify", out).exit_code == 0
    assert recs[0]["reason"] in (out / "tables" / "runs.csv").read_text()

    # the same program, line-buffered: the resume runs run 0 again, and the series completes
    monkeypatch.setenv("FAKE_STDOUT", "line")
    res = cli("series", "--resume", out)
    assert res.exit_code == 0, res.output
    timed = [r for r in records(out) if r["kind"] in ("discarded", "timed")]
    assert [(r["run_id"], r["status"]) for r in timed] == [(0, "void")] + [
        (i, "ok") for i in range(6)
    ]
    assert cli("verify", out).exit_code == 0


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_a_buffered_contender_that_trains_when_asked_its_version_stops_the_series_first(
    tmp_path, fast_protocol, buffered_contender, cli, monkeypatch
):
    monkeypatch.setenv("FAKE_INFO", "none")  # it knows no `+mica info -mica`: it trains
    out, res = stopped_series(tmp_path, fast_protocol, buffered_contender, cli, monkeypatch)
    assert "asked its version (+mica info -mica), the contender trained instead" in res.output
    assert bursts(res.output, 40)
    assert "series stops before its first run" in res.output
    assert "fix: make its stdout line-buffered" in res.output
    assert records(out) == []  # no run was spent on it
    # line-buffered, it is asked again at the resume (it gives no version) and the series runs
    monkeypatch.setenv("FAKE_STDOUT", "line")
    res = cli("series", "--resume", out)
    assert res.exit_code == 0, res.output
    # every run ok: none void for bursts; one whose own clock a loaded machine's late stamps
    # disagreed with (CI's runner, once) is the machine's, not its output's
    ran = [r for r in records(out) if r["kind"] != "profile"]
    assert ran and all(r["status"] == "ok" or r["reason"].startswith("own clock ") for r in ran)
    assert sum(r["status"] == "ok" for r in ran) > len(ran) // 2


def test_a_buffered_run_is_stopped_at_its_first_lines(
    tmp_path, fast_protocol, buffered_contender, cli, monkeypatch
):
    monkeypatch.delenv("FAKE_STDOUT", raising=False)
    # 10 s of training whose 4 KB blocks leave every ninth step line: stopped long before
    monkeypatch.setenv("FAKE_STEPS", "5000")
    monkeypatch.setenv("FAKE_PAD", "400")
    monkeypatch.setenv("FAKE_STEP_MS", "2")
    out = tmp_path / "r"
    res = cli(*series_args(out, fast_protocol, buffered_contender))
    assert res.exit_code == ExitCode.SERIES_FAILED, res.output
    assert "step lines arrived in bursts before the kit stopped it" in res.output
    (rec,) = records(out)
    assert rec["status"] == "void" and rec["stopped"].startswith("its output is buffered")
    protocol = load(out / "protocol.toml")
    lines = [x.text for x in read_stamped(out / rec["log_dir"] / "stdout.log")]
    assert "step 5000 " not in "\n".join(lines)  # it never trained to its end
    again = judging.rejudge(
        out, RunRecord.from_json(raw_records(out)[0]), protocol.contender, protocol.timing
    )
    assert (again.status, again.reason) == (rec["status"], rec["reason"])
    assert cli("verify", out).exit_code == 0

"""§5 Conditions on a CPU through a whole series: a machine kept busy on purpose by processes
that are not the kit's, and the mark it leaves on every run and in the report."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from kit.errors import ExitCode
from kit.report import publish, sidetables, summary, tables
from kit.results import audit
from kit.results.store import ResultsDir
from tests.conftest import contender_args, copied, series_once, write_protocol

# Spinners that no process of the kit's started: their launcher exits at once, so they are
# nobody's children (the kit's own processes are left out of "others"). Each ends itself after
# a minute should the test die before it ends them.
LAUNCH = """
import subprocess, sys
spin = "import time\\nend = time.monotonic() + 60\\nwhile time.monotonic() < end: pass"
for _ in range(int(sys.argv[1])):
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(subprocess.Popen([sys.executable, "-c", spin], start_new_session=True, **quiet).pid)
"""


@pytest.fixture
def protocol(tmp_path):
    """The tests' protocol with the reference protocol's conditions."""
    reference = {"conditions.cpu_busy_share": 0.25, "conditions.cpu_look_s": 0.5}
    return write_protocol(tmp_path / "protocol.toml", changes=reference)


@pytest.fixture(scope="module")
def quiet_series(tmp_path_factory) -> Path:
    """One finished series of float32 that waits for no quiet (--idle-timeout 0), made once for
    the module (a whole series takes seconds); a test that alters it copies it first."""
    root = tmp_path_factory.mktemp("quiet")
    reference = {"conditions.cpu_busy_share": 0.25, "conditions.cpu_look_s": 0.5}
    proto = write_protocol(root / "protocol.toml", changes=reference)
    args = contender_args(root / "r", proto, "--precision", "float32", "--idle-timeout", "0")
    return series_once(root, args)


@pytest.fixture
def quiet_copy(quiet_series: Path, tmp_path: Path) -> Path:
    return copied(quiet_series, tmp_path)


@pytest.fixture
def busy_machine() -> Iterator[None]:
    # more than a quarter of the CPUs' time (the protocol's conditions.cpu_busy_share)
    count = (os.cpu_count() or 1) // 4 + 1
    out = subprocess.run(
        [sys.executable, "-c", LAUNCH, str(count)], capture_output=True, text=True, check=True
    )
    pids = [int(x) for x in out.stdout.split()]
    time.sleep(0.5)  # under way
    try:
        yield
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.slow
def test_a_series_on_a_busy_machine_is_marked_run_by_run(
    tmp_path, protocol, cli, fake_env, busy_machine
):
    fake_env()
    out = tmp_path / "r"
    args = contender_args(out, protocol, "--precision", "float32", "--idle-timeout", "1")
    started = time.monotonic()
    result = cli(*args)
    assert result.exit_code == 0, result.output
    # one wait of a second, in vain; the other runs look once while the machine stays busy
    assert time.monotonic() - started < 60
    runs = pd.read_csv(out / "tables" / "runs.csv")
    timed = runs[runs["kind"] == "timed"]
    assert len(timed) == 5 and timed["flagged"].all()
    assert timed["flag_reasons"].str.startswith(sidetables.BUSY).all()
    assert (timed["others_cpu_share_before"] > 0.25).all() and timed["busy_before"].all()
    report = (out / "report.md").read_text()
    assert "## The machine through each run" in report
    # the report counts them with their kind; the configurations' table names each, for tools
    said = f"5 of 5 timed runs flagged: {sidetables.BUSY}"
    assert said in report and "each run and its reason in tables/runs.csv" in report
    first = f"run {timed['run_id'].iloc[0]} flagged: {sidetables.BUSY}"
    assert first not in report and said in (out / "report.html").read_text()
    configs = pd.read_csv(out / "tables" / "configurations.csv")
    assert all(f"run {i} flagged: " in configs["notes"].iloc[0] for i in timed["run_id"])
    assert cli("verify", out).exit_code == 0  # the marks are recomputed from the raw files

    # a directory published before the notes were counted (summary.json's schema 4) names
    # every flagged run in its report, and verifies as it was made
    older = copied(out, tmp_path / "older")
    rd = ResultsDir.open(older)
    t = tables.tables(rd, listing=audit.refuse_if_altered(rd))
    made = publish.render(rd, dataclasses.replace(t, notes={}))  # as that kit made them
    document = json.loads((older / summary.SUMMARY).read_text())
    document[summary.VERSION_KEY] = summary.SCHEMA_OF_SAID_NOTES - 1
    made[summary.SUMMARY] = (json.dumps(document, indent=2) + "\n").encode()
    for rel, data in made.items():
        os.chmod(older / rel, 0o644)  # published files are read-only
        (older / rel).write_bytes(data)
    assert first in (older / "report.md").read_text()
    result = cli("verify", older)
    assert result.exit_code == 0, result.output
    # and this kit's directory with those notes in its report is named
    os.chmod(out / "report.md", 0o644)
    (out / "report.md").write_text((older / "report.md").read_text())
    result = cli("verify", out)
    assert result.exit_code != 0 and "report.md" in result.output, result.output


@pytest.mark.slow
def test_refuse_busy_refuses_a_busy_machine_with_a_fix(
    tmp_path, protocol, cli, fake_env, busy_machine
):
    fake_env()
    args = contender_args(tmp_path / "r", protocol, "--precision", "float32", "--refuse-busy")
    result = cli(*args)
    assert result.exit_code == ExitCode.USER_ERROR, result.output
    assert "error: other processes use" in result.output and "fix:" in result.output
    assert "Traceback" not in result.output


def test_idle_timeout_0_waits_not_at_all(quiet_series):
    # 0 is a value, not a missing one: the manifest keeps it, and a resume reads it back
    options = json.loads((quiet_series / "manifest.json").read_text())["options"]
    assert options["idle_timeout_s"] == 0


def test_past_its_limit_the_section_gives_a_row_per_configuration(quiet_copy, cli, monkeypatch):
    from kit.report import markdown

    out = quiet_copy
    report = (out / "report.md").read_text()
    assert "The machine through each timed run;" in report
    # the same series past the limit (5 timed runs against a limit of 2): a row per configuration
    monkeypatch.setattr(markdown, "MACHINE_ROWS", 2)
    assert cli("publish", out, "--preview").exit_code == 0
    report = (out / "report.md").read_text()
    section = report.split("## The machine through each run", 1)[1].split("\n## ", 1)[0]
    assert "The machine through the timed runs of each configuration;" in section
    assert "With 5 timed runs, a row per configuration" in section
    rows = [line for line in section.splitlines() if line.startswith("| shakespeare-char/")]
    assert len(rows) == 1 and "| 5 " in rows[0], section
    assert cli("verify", out).exit_code == 0  # recomputed the same way


def test_each_runs_conditions_are_kept_in_its_record_and_verify_works_them_out_again(
    quiet_copy, cli, monkeypatch
):
    from kit.results import run_conditions

    out = quiet_copy
    runs = pd.read_csv(out / "tables" / "runs.csv").set_index("run_id")
    records = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert records and all(r["schema_version"] == 4 for r in records)
    sampled = [r for r in records if f"{r['log_dir']}/machine.jsonl" in r["files"]]
    assert sampled and all(r["conditions"] == {} for r in records if r not in sampled)
    for r in sampled:  # a CPU series samples the machine around every run it starts
        machine = r["conditions"]["machine"]
        row = runs.loc[r["run_id"]]
        assert machine["machine_sample_count"] == row["machine_sample_count"] > 0
        assert machine["others_cpu_share"] == pytest.approx(row["others_cpu_share"])
        assert machine["busy_before"] == row["busy_before"] and "card" not in r["conditions"]
    published = (out / "tables" / "runs.csv").read_bytes()

    # the report opens no run's samples: what they come to is in the records
    def unread(*args):
        raise AssertionError("a run's samples were read again")

    with monkeypatch.context() as m:
        m.setattr(run_conditions, "summarize", unread)
        assert cli("publish", out, "--preview").exit_code == 0
    assert (out / "tables" / "runs.csv").read_bytes() == published
    assert cli("verify", out).exit_code == 0

    # a record whose conditions differ from its raw files is named by verify
    lines = (out / "runs.jsonl").read_text().splitlines()
    altered = sampled[-1]
    # a value the run did not have: on a loaded runner a short window's share can be 3/4 exactly
    was = altered["conditions"]["machine"]["others_cpu_share"]
    edited = 0.75 if abs(was - 0.75) > 0.01 else 0.25
    altered["conditions"]["machine"]["others_cpu_share"] = edited
    at = records.index(altered)
    lines[at] = json.dumps(altered)
    (out / "runs.jsonl").write_text("\n".join(lines) + "\n")
    result = cli("verify", out)
    assert result.exit_code != 0
    assert (
        f"run {altered['run_id']}'s conditions' machine.others_cpu_share is {edited}"
        in result.output
    )

    # a directory from a kit that kept no conditions (schema 3) reads its raw files: the same
    older = [{**json.loads(line), "schema_version": 3} for line in lines]
    for r in older:
        del r["conditions"]
    (out / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in older))
    assert cli("verify", out).exit_code == 0
    assert cli("publish", out, "--preview").exit_code == 0
    assert (out / "tables" / "runs.csv").read_bytes() == published

"""`verify` proves the whole directory (D6): each way of altering a finished series is caught,
exit 4, named, never a traceback; `report` refuses what it cannot recompute honestly; and no
reading command writes, whatever the directory holds."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from kit.errors import ExitCode
from kit.results.tablefile import TABLE_SCHEMA
from tests.conftest import (
    ROOT,
    preview_series,
    raw_records,
    records,
    write_protocol,
)

pytestmark = pytest.mark.slow  # the module's series takes seconds; every test copies it


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """One small finished series, copied by each test before it alters the copy."""
    root = tmp_path_factory.mktemp("series")
    protocol = write_protocol(root / "protocol.toml", runs=3)
    return preview_series(root, protocol)[0]


@pytest.fixture
def series(finished: Path, tmp_path: Path, cli) -> Path:
    out = tmp_path / "r"
    shutil.copytree(finished, out, symlinks=True)
    assert cli("verify", out).exit_code == 0  # the copy verifies before it is altered
    return out


def timed(out: Path) -> list[dict]:
    return [r for r in records(out) if r["kind"] == "timed"]


def raw_timed(out: Path) -> list[dict]:
    """The timed runs' records as runs.jsonl holds them, to be written back altered."""
    return [r for r in raw_records(out) if r["run"]["kind"] == "timed"]


def write_records(out: Path, recs: list[dict]) -> None:
    (out / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


def refused(cli, out: Path, *names: str) -> str:
    """`verify` exits 4 and names each of `names`; the text it printed."""
    res = cli("verify", out)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH, res.output
    assert "Traceback" not in res.output
    for name in names:
        assert name in res.output, (name, res.output)
    return res.output


def median_shown(out: Path) -> str:
    configs = pd.read_csv(out / "tables" / "configurations.csv")
    return f"{configs['median_step_s'].iloc[0] * 1e3:.3f}"


def test_an_edited_number_in_report_md_is_caught(series, cli):
    shown = median_shown(series)
    md = series / "report.md"
    assert shown in md.read_text()
    md.write_text(md.read_text().replace(shown, "1.000", 1))
    refused(cli, series, "report.md line", shown, "1.000")


def test_an_edited_number_in_report_html_is_caught(series, cli):
    shown = median_shown(series)
    page = series / "report.html"
    cell = re.compile(rf"(<td[^>]*>){re.escape(shown)}</td>")
    assert cell.search(page.read_text())
    page.write_text(cell.sub(r"\g<1>1.000</td>", page.read_text(), count=1))
    refused(cli, series, "report.html line", shown, "1.000")


def test_a_record_dropped_then_reported_is_caught(series, cli):
    recs = raw_records(series)
    dropped = timed(series)[1]
    write_records(series, [r for r in recs if r["run_id"] != dropped["run_id"]])
    res = cli("report", series)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH and "Traceback" not in res.output
    assert dropped["log_dir"] in res.output and "micakit verify" in res.output
    refused(cli, series, f"{dropped['log_dir']}: run {dropped['run_id']}'s logs, with no record")


def test_a_record_pointed_at_another_runs_logs_is_caught(series, cli):
    recs = raw_records(series)
    a, b = timed(series)[:2]
    for r in recs:
        if r["run_id"] == b["run_id"]:
            r["log_dir"] = a["log_dir"]
    write_records(series, recs)
    refused(cli, series, f"run {b['run_id']}'s record points at {a['log_dir']}")


def test_a_deleted_run_folder_is_caught_by_verify_and_report(series, cli):
    gone = timed(series)[0]
    shutil.rmtree(series / gone["log_dir"])
    refused(cli, series, f"run {gone['run_id']}'s folder {gone['log_dir']} is missing")
    res = cli("report", series)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH and "Traceback" not in res.output
    assert gone["log_dir"] in res.output


def test_a_duplicated_record_is_caught(series, cli):
    recs = raw_records(series)
    twice = raw_timed(series)[2]
    write_records(series, [*recs, twice])
    refused(cli, series, f"run {twice['run_id']}'s record duplicates line")


def test_a_record_outside_the_plan_is_caught(series, cli):
    recs = raw_records(series)
    plan = json.loads((series / "plan.json").read_text())
    extra = {**raw_timed(series)[0], "run_id": len(plan["order"]) + 7}
    write_records(series, [*recs, extra])
    refused(cli, series, f"run {extra['run_id']} is not in plan.json")
    # and a record whose run is planned as another configuration or kind
    first = raw_timed(series)[0]
    other = {**first, "run": {**first["run"], "kind": "profile"}}
    write_records(series, [*recs, other])
    refused(cli, series, f"run {other['run_id']} is planned as timed")


def test_a_changed_raw_log_is_caught(series, cli):
    run = timed(series)[0]
    log = series / run["log_dir"] / "stdout.log"
    text = log.read_text()
    os.chmod(log, 0o644)
    log.write_text(text.replace("loss", "loss ", 1))
    refused(cli, series, f"{run['log_dir']}/stdout.log: raw file changed since run")


def test_a_missing_raw_file_is_caught(series, cli):
    run = timed(series)[0]
    (series / run["log_dir"] / "command.json").unlink()
    refused(cli, series, f"{run['log_dir']}/command.json: raw file missing")


def test_every_table_carries_its_schema_version(series, cli):
    for path in sorted((series / "tables").glob("*.csv")):
        header = path.read_text().splitlines()[0].split(",")
        assert header[0] == "schema_version", path
        column = pd.read_csv(path)["schema_version"]
        assert (column == TABLE_SCHEMA).all(), path


def test_a_table_from_before_schema_versions_is_upgraded(series, cli):
    # an older kit wrote the same columns without the version: read as schema 0, upgraded
    path = series / "tables" / "configurations.csv"
    pd.read_csv(path, dtype=str, keep_default_na=False).drop(columns=["schema_version"]).to_csv(
        path, index=False
    )
    res = cli("verify", series)
    assert res.exit_code == 0, res.output


def test_a_table_from_a_newer_kit_is_refused_by_name(series, cli):
    path = series / "tables" / "runs.csv"
    text = path.read_text().splitlines()
    newer = [re.sub(rf"^{TABLE_SCHEMA},", f"{TABLE_SCHEMA + 1},", t) for t in text[1:]]
    path.write_text("\n".join([text[0], *newer]) + "\n")
    out = refused(cli, series, "tables/runs.csv", f"table schema {TABLE_SCHEMA + 1}")
    assert f"this kit reads table schema {TABLE_SCHEMA}" in out


def test_forked_workers_judge_and_hash_as_a_plain_loop_does(series, cli, monkeypatch):
    """Thousands of runs are judged and hashed by forked workers (kit.results.fanout); forced
    here on a small series, the tables are the same and a changed raw file is still caught."""
    from kit.report import tables
    from kit.results import fanout
    from kit.results.store import ResultsDir

    plain = tables.tables(ResultsDir.open(series))
    monkeypatch.setattr(fanout, "LEAST", 1)
    forked = tables.tables(ResultsDir.open(series))
    for (name, a), (_, b) in zip(plain.items(), forked.items()):
        pd.testing.assert_frame_equal(a, b, obj=name)
    assert cli("verify", series).exit_code == 0
    log = series / timed(series)[-1]["log_dir"] / "stdout.log"
    log.write_bytes(log.read_bytes().replace(b" ", b"  ", 1))
    refused(cli, series, f"{log.relative_to(series)}: raw file changed")
    # the examination judges every run's latest record from the bytes it hashed: none is
    # left for the report to judge again
    from kit.results import audit

    rd = ResultsDir.open(series)
    found = audit.Examination(rd).result()
    latest = {r["run_id"]: i for i, r in enumerate(records(series))}
    assert sorted(found.judged) == sorted(latest.values())


def test_the_reports_survey_forked_reads_as_the_plain_report(series, cli, monkeypatch):
    """`report` and `publish` audit the folders and judge the runs in forked workers while
    their modules load (`audit.Survey`); forced here on a small series, the report is the same
    as the plain loop's, every run's latest record is judged there, and an altered directory
    is still refused."""
    from kit.results import audit, fanout
    from kit.results.store import ResultsDir

    plain = cli("report", series, "--preview")
    assert plain.exit_code == 0, plain.output
    monkeypatch.setattr(fanout, "LEAST", 1)
    forked = cli("report", series, "--preview")
    assert forked.exit_code == 0 and forked.output == plain.output
    listing, judged, read = audit.Survey(ResultsDir.open(series)).refused()
    latest = {r["run_id"]: i for i, r in enumerate(records(series))}
    assert sorted(judged) == sorted(latest.values())
    # each run's fields read in the workers as the report reads them from its record's folder
    lines = records(series)
    assert sorted(read) == sorted(latest.values())
    kept = {i: lines[i]["stderr_bytes"] for i in read if "stderr_bytes" in lines[i]}
    assert kept and all(read[i]["stderr_bytes"] == kept[i] for i in kept)
    assert listing == ResultsDir.open(series).listing()
    gone = timed(series)[0]
    shutil.rmtree(series / gone["log_dir"])
    res = cli("report", series)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH and "Traceback" not in res.output
    assert f"run {gone['run_id']}'s folder {gone['log_dir']} is missing" in res.output


@pytest.mark.parametrize("least", [None, 1], ids=["plain", "forked"])
def test_a_raw_log_that_no_longer_parses_is_named_not_a_traceback(series, cli, monkeypatch, least):
    """A log altered and its record's hash altered to match: the audit passes, the judgement
    cannot, and `verify` says which line, in a plain loop and in forked workers alike."""
    import hashlib

    from kit.results import fanout

    if least is not None:
        monkeypatch.setattr(fanout, "LEAST", least)
    recs = raw_records(series)
    run = next(r for r in recs if r["run"]["kind"] == "timed")
    rel = f"{run['log_dir']}/stdout.log"
    log = series / rel
    log.write_bytes(log.read_bytes() + b"not a stamped line\n")
    run["files"][rel] = hashlib.sha256(log.read_bytes()).hexdigest()
    write_records(series, recs)
    out = refused(cli, series, "cannot recompute", "stdout.log", "not a stamped line")
    assert out.count("cannot recompute") == 1


def test_the_program_ends_with_its_verdict_and_its_whole_output(series):
    """`micakit verify`, `report` and `compare` end their process without freeing what they
    read (kit.cli.program.run): the exit code and every byte of their output still arrive."""

    def program(*args: object) -> subprocess.CompletedProcess:
        argv = [sys.executable, str(ROOT / "run.py"), *map(str, args)]
        return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=300)

    clean = program("verify", series)
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout.endswith(
        "every published number matches its recomputation from the raw logs\n"
    )
    summary = program("report", series, "--json")
    assert summary.returncode == 0, summary.stderr
    assert json.loads(summary.stdout) == json.loads((series / "summary.json").read_text())
    compared = program("compare", series, series, "--json", "--preview")
    assert compared.returncode == 0, compared.stderr
    assert json.loads(compared.stdout)["only_in_a"] == []
    md = series / "report.md"
    md.write_text(md.read_text().replace("Amendment", "Amendmend", 1))
    altered = program("verify", series)
    assert altered.returncode == ExitCode.VERIFY_MISMATCH
    assert "report.md line" in altered.stdout
    assert "differences in" in altered.stderr
    refused_ = program("verify", series / "runs")  # not a results directory: exit 2, said why
    assert refused_.returncode == ExitCode.USER_ERROR
    assert "micakit: error:" in refused_.stderr and "Traceback" not in refused_.stderr


def test_only_a_reading_command_skips_the_work_left_for_exit(series):
    """A series leaves work for the interpreter's exit (the Docker executor removes its
    containers then); only report, verify and compare end without it."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('work at exit'))\n"
        "from kit.cli.program import run\n"
        "sys.argv[1:] = sys.argv[2:]\n"
        "run()\n"
    )

    def program(*args: object) -> str:
        argv = [sys.executable, "-c", code, "micakit", *map(str, args)]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "work at exit" not in program("verify", series)
    assert "work at exit" in program("--version")
    assert "work at exit" in program("publish", series, "--preview")


# -- runs.jsonl read, never written, and every field of a record checked ----------------------

WRITES = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
CHANGES = {"os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.truncate", "os.chmod",
           "os.chown", "os.utime", "os.link", "os.symlink", "shutil.rmtree"}  # fmt: skip
_read_only: list[str] = []  # the folder a read-only mount is played for, while one is


def _as_a_read_only_mount(event: str, args: tuple) -> None:
    """An audit hook: any write under the folder in `_read_only` fails as on a read-only mount
    (EROFS), in this process and in those it forks. The tests run as root, whom no mode bars."""
    if not _read_only:
        return
    if event == "open":
        path, mode, flags = args
        writes = bool(flags & WRITES) if isinstance(flags, int) else False
        writes = writes or (isinstance(mode, str) and any(c in mode for c in "wax+"))
    elif event in CHANGES:
        path, writes = args[0], True
    else:
        return
    if writes and isinstance(path, str | bytes | os.PathLike):
        where = os.path.abspath(os.fsdecode(path))
        if where == _read_only[0] or where.startswith(_read_only[0] + os.sep):
            raise OSError(errno.EROFS, "Read-only file system", where)


sys.addaudithook(_as_a_read_only_mount)


@contextlib.contextmanager
def read_only(root: Path) -> Iterator[None]:
    """`root` as an archived copy mounted read-only: every mode read-only, and every write
    under it refused (`_as_a_read_only_mount`)."""
    modes = {p: p.stat().st_mode for p in [root, *root.rglob("*")] if not p.is_symlink()}
    for p, mode in modes.items():
        p.chmod(mode & 0o555)
    _read_only.append(os.path.abspath(root))
    try:
        yield
    finally:
        _read_only.clear()
        for p, mode in modes.items():
            p.chmod(mode)


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and every file's and folder's mtime."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"", p.stat().st_mtime_ns)
        for p in [root, *root.rglob("*")]
    }


def test_the_read_only_mount_is_played_truly(series):
    # the check below proves nothing unless a write under the folder really fails
    with read_only(series), pytest.raises(OSError, match="Read-only file system"):
        with open(series / "runs.jsonl", "ab"):
            pass
    with read_only(series), pytest.raises(OSError, match="Read-only file system"):
        os.open(series / "runs.jsonl", os.O_RDWR)


def test_a_torn_last_line_is_read_as_absent_and_only_a_writer_cuts_it(
    series, cli, tmp_path, fake_env
):
    lines = (series / "runs.jsonl").read_bytes().splitlines(keepends=True)
    last = json.loads(lines[-1])
    torn = lines[-1][: len(lines[-1]) // 2]  # power lost while the series wrote the last record
    (series / "runs.jsonl").write_bytes(b"".join(lines[:-1]) + torn)
    before = snapshot(series)
    with read_only(series):
        res = cli("report", series)
        assert res.exit_code == 0, res.output
        assert "runs.jsonl ends in a torn record" in res.stderr  # said, beside the report
        # the torn record's run has no record: no report says every separate record is present
        assert f"run {last['run_id']} has no record in runs.jsonl" in res.output
        assert "every separate record is present" not in res.output
        out = refused(cli, series, "runs.jsonl ends in a torn record", "series --resume")
        assert "Read-only" not in out
        compared = cli("compare", series, series, "--json", "--preview")
        assert compared.exit_code == 0, compared.output
        merged = cli("merge", series, "--out", tmp_path / "release")
        assert "Read-only" not in merged.output
        assert merged.exit_code == ExitCode.USER_ERROR and "has not finished" in merged.output
    assert snapshot(series) == before  # nothing written, cut or touched
    # the writer cuts it, and runs its run again
    fake_env(step_ms={"*": 2.0})
    resumed = cli("series", "--resume", series)
    assert resumed.exit_code == 0, resumed.output
    assert (series / "runs.jsonl").read_bytes().endswith(b"\n")
    assert records(series)[-1]["run_id"] == last["run_id"]
    assert cli("verify", series).exit_code == 0


@pytest.mark.parametrize("kind", ["profile", "timed"])
def test_a_dropped_last_record_is_named_even_after_a_publish(series, cli, kind):
    """The series finished; its last record (a profiled run's, here not started for want of
    nsys, or the last timed run's, with every record after it) is dropped and the directory
    published again: the run's folder shows it finished, so no stop explains the gap."""
    recs = raw_records(series)
    cut = max(i for i, r in enumerate(recs) if r["run"]["kind"] == kind)
    dropped = recs[cut]
    write_records(series, recs[:cut])
    published = cli("publish", series, "--preview")
    assert published.exit_code == ExitCode.VERIFY_MISMATCH, published.output
    named = f"{dropped['log_dir']}: run {dropped['run_id']} finished"
    refused(cli, series, named, "holds no record of it")
    res = cli("report", series)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH and "Traceback" not in res.output
    assert named in res.output


@pytest.mark.parametrize(
    ("field", "edit"),
    [
        ("step_s", lambda r: r["judged"].update(step_s=r["judged"]["step_s"] * 1.5)),
        ("status", lambda r: r.update(status="void")),
        ("own_step_s", lambda r: r["judged"].update(own_step_s=None)),
        ("reason", lambda r: r.update(reason="a reason no log gives")),
    ],
)
def test_an_edited_judgement_in_runs_jsonl_is_named_by_its_field(series, cli, field, edit):
    recs = raw_records(series)
    i, run = next((i, r) for i, r in enumerate(recs) if r["run"]["kind"] == "timed")
    edit(run)
    write_records(series, recs)
    refused(cli, series, f"runs.jsonl line {i + 1}: run {run['run_id']}'s {field} is")


@pytest.mark.parametrize("rel", ["plots/step-times.extra.png", "tables/extra.csv"])
def test_a_file_the_report_does_not_make_is_named(series, cli, rel):
    (series / rel).write_bytes(b"not made by the report\n")
    refused(cli, series, f"{rel}: a file the report does not make")


def test_a_plot_an_earlier_preview_made_is_removed_by_the_next_publish(series, cli):
    shown = sorted(p.name for p in (series / "plots").glob("step-times.*.png"))
    assert shown  # the preview drew the step times
    assert cli("publish", series).exit_code == 0  # rule 6 withholds them now
    assert not list((series / "plots").glob("step-times.*.png"))
    assert cli("verify", series).exit_code == 0


def test_a_directory_written_before_schema_2_verifies_clean(series, cli):
    """As a kit before records schema 2 wrote it: each record flat, the judgement's fields after
    its reason, and no note in the folder of a run not started."""
    lines = []
    for r in raw_records(series):
        note = f"{r['log_dir']}/not-run.json"
        if note in r["files"]:
            (series / note).unlink()
            del r["files"][note]
        envelope = {
            k: v
            for k, v in r.items()
            if k not in ("run", "judged", "executor", "files", "schema_version")
        }
        head = list(envelope).index("log_dir")
        flat = dict(list(envelope.items())[:head]) | r["run"] | dict(list(envelope.items())[head:])
        flat |= {**r["judged"], "executor": r["executor"], "files": r["files"], "schema": 1}
        lines.append(json.dumps({"schema": 1, **flat}) + "\n")
    (series / "runs.jsonl").write_text("".join(lines))
    res = cli("verify", series)
    assert res.exit_code == 0, res.output


def test_records_with_their_keys_sorted_verify_clean(series, cli):
    # as `jq -S -c . runs.jsonl` writes them: a record is read by its keys' names
    write_records(series, [json.loads(json.dumps(r, sort_keys=True)) for r in raw_records(series)])
    keys = list(raw_records(series)[0])
    assert keys == sorted(keys) and keys[0] != "schema_version"  # not as the kit wrote them
    res = cli("verify", series)
    assert res.exit_code == 0, res.output


def test_the_tables_are_computed_alone_and_every_caller_audits_first(series, cli, tmp_path):
    """`tables()` computes tables only; report, publish, compare and merge audit the directory
    before they ask for them, and refuse an altered one as they always did."""
    from kit.report import tables
    from kit.results.store import ResultsDir

    other = tmp_path / "other"
    shutil.copytree(series, other, symlinks=True)
    dropped = timed(series)[1]
    write_records(series, [r for r in raw_records(series) if r["run_id"] != dropped["run_id"]])
    t = tables.tables(ResultsDir.open(series))  # no audit inside: the dropped run is not there
    assert dropped["run_id"] not in set(t.runs["run_id"])
    said = f"{dropped['log_dir']}: run {dropped['run_id']}'s logs, with no record"
    for command in (
        ["report", series],
        ["publish", series],
        ["compare", other, series],
        ["merge", series, "--out", tmp_path / "release"],
    ):
        res = cli(*command)
        assert res.exit_code == ExitCode.VERIFY_MISMATCH, (command, res.output)
        assert said in res.output and "Traceback" not in res.output, (command, res.output)

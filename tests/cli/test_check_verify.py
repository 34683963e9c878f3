"""A check is bound to the program it ran and verifiable like a series (§3 rule 6, §7, D6).

A check of another program (the same build name, another SHA-256) gates no series; the gate
recomputes each check's verdict from its raw logs and refuses a record they do not give;
`micakit verify CHECK_DIR` names every difference in its record, tables, plot and
correctness.md; gating.json names the checks behind each status, and `verify` derives it again.
"""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from kit.cli.main import main
from kit.correctness import checks, gate
from kit.errors import ExitCode, UserError
from kit.results import store
from tests.cli.test_correctness_cmd import STAND_IN_MODEL, check_args, nanogpt_tree
from tests.conftest import CONTENDER, FAKES, TEXT_INPUT

pytestmark = pytest.mark.slow  # the module's series and checks take a minute to make

KEY = "shakespeare-char/float32/mica"  # the smoke series' one contender configuration


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A smoke series and its checks, A and B, of its own program; and method B of another
    program with the same build name (the fake contender with one more line: other bytes)."""
    tmp = tmp_path_factory.mktemp("bound")
    tree, protocol = nanogpt_tree(tmp, STAND_IN_MODEL)
    other = tmp / "other" / CONTENDER.name  # beside the fakes' library, as the original
    other.parent.mkdir()
    shutil.copyfile(FAKES / "fakelib.py", other.parent / "fakelib.py")
    other.write_bytes(CONTENDER.read_bytes() + b"\n# another build of the same name\n")
    other.chmod(other.stat().st_mode | stat.S_IXUSR)
    out = {"series": tmp / "series", "a": tmp / "a", "b": tmp / "b", "b_other": tmp / "b-other"}
    with pytest.MonkeyPatch.context() as mp:
        fake = {"step_ms": {"*": 0.2}, "state": str(tmp / "fake-state")}
        mp.setenv("MICAKIT_FAKE", json.dumps(fake))
        mp.setenv("MICAKIT_FAKES", str(FAKES))
        made = run(
            "series", "--out", out["series"], "--protocol", protocol, "--smoke", "--device",
            "cpu", "--executor", "local", "--nanogpt", tree, "--input", TEXT_INPUT,
            "--contender", CONTENDER, "--model", "shakespeare-char", "--precision", "float32",
        )  # fmt: skip
        assert made.exit_code == 0, made.output
        for name, method in (("a", "A"), ("b", "B")):
            result = run(
                *check_args(out[name], protocol, tree, method, "--products", out["series"])
            )
            assert result.exit_code == 0, result.output
        args = check_args(out["b_other"], protocol, tree, "B")
        result = run(*[other if a == CONTENDER else a for a in args])
        assert result.exit_code == 0, result.output
    return {**out, "other": other}


def copied(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


def verified(d: Path) -> tuple[int, list[str]]:
    """`verify`'s exit status and the differences it named (--json)."""
    result = run("verify", d, "--json")
    return result.exit_code, [d["reason"] for d in json.loads(result.stdout)["differences"]]


def sha(path: Path) -> str:
    return store.sha256_file(path)


# -- a check names its program, and gates only a series of that program -----------------------


def test_every_record_names_the_program_it_checked(made):
    for name in ("a", "b"):
        (record,) = checks.load_checks(made[name])
        assert record.contender_sha256 == sha(CONTENDER) and record.contender_image_id == ""
        assert record.contender_build == "mica"
        md = (made[name] / "correctness.md").read_text()
        assert f"| contender program | SHA-256 `{sha(CONTENDER)}` |" in md
    (other,) = checks.load_checks(made["b_other"])
    assert other.contender_sha256 == sha(made["other"]) != sha(CONTENDER)
    assert other.contender_build == "mica" and other.passed is True


def test_a_check_of_another_program_does_not_gate_the_series(made):
    series = made["series"]
    theirs = sha(made["other"])[:12]
    # the same build name, passed: still not this series' check
    assert gate.checks_for_series(series, [made["b_other"]]) == {
        KEY: f"the check ran another program (sha256 {theirs}…)"
    }
    assert gate.checks_for_series(series, [made["a"], made["b_other"]]) == {
        KEY: f"method B on cpu: the check ran another program (sha256 {theirs}…)"
    }
    assert gate.checks_for_series(series, [made["a"], made["b"]]) == {KEY: "passed"}


def test_gating_json_and_the_report_name_each_check_and_its_program(made, tmp_path):
    series = copied(made["series"], tmp_path / "series")
    result = run("publish", series, "--checks", made["a"], "--checks", made["b"])
    assert result.exit_code == 0, result.output
    saved = json.loads((series / gate.GATING).read_text())
    assert saved["contender_sha256"] == sha(CONTENDER)
    assert saved["statuses"] == {KEY: "passed"}
    assert [
        (g["method"], g["check_dir"], g["contender_sha256"]) for g in saved["gated_by"][KEY]
    ] == [
        ("A", str(made["a"].resolve()), sha(CONTENDER)),
        ("B", str(made["b"].resolve()), sha(CONTENDER)),
    ]
    md = (series / "report.md").read_text()
    assert f"this series' contender has SHA-256 `{sha(CONTENDER)}`" in md
    assert f"method B on cpu: `{made['b'].resolve()}` (sha256 {sha(CONTENDER)[:12]}…)" in md
    assert verified(series) == (0, [])
    printed = run("report", series, "--checks", made["a"], "--checks", made["b_other"]).stdout
    theirs = f"the check ran another program (sha256 {sha(made['other'])[:12]}…)"
    assert (
        f"- {KEY}: method B on cpu: {theirs}; gated by method A on cpu: `{made['a'].resolve()}`"
        in (printed)
    )
    # gating.json is derived again from the checks it names: an edited status is named
    saved["statuses"][KEY] = "method B not run on cpu"
    (series / gate.GATING).write_text(json.dumps({"schema": store.SCHEMA, **saved}))
    code, differences = verified(series)
    assert code == ExitCode.VERIFY_MISMATCH
    assert f"gating.json statuses {KEY}: saved 'method B not run on cpu', derived 'passed'" in (
        differences
    )


def test_the_report_says_a_check_of_another_program_withheld_the_verdict(made, tmp_path):
    series = copied(made["series"], tmp_path / "series")
    result = run("publish", series, "--checks", made["b_other"])
    assert result.exit_code == 0, result.output
    said = f"the check ran another program (sha256 {sha(made['other'])[:12]}…)"
    comparison = pd.read_csv(series / "tables" / "comparison.csv")
    assert list(comparison["correctness"]) == [said]
    # (its verdict says so too, where its runs are complete: a loaded machine may void one)
    assert f"- {KEY}: {said}" in (series / "report.md").read_text()
    assert verified(series) == (0, [])


# -- a check verified from its raw logs ------------------------------------------------------


def test_a_clean_check_directory_verifies(made):
    for name in ("a", "b", "b_other"):
        assert verified(made[name]) == (0, []), name
    result = run("verify", made["b"])
    assert result.exit_code == 0 and "every published number matches" in result.output


def flipped(src: Path, dest: Path) -> Path:
    """A copy of a check whose record says the opposite of what its logs give."""
    out = copied(src, dest)
    path = out / checks.CHECKS_FILE
    record = json.loads(path.read_text())
    record["passed"] = not record["passed"]
    path.write_text(json.dumps(record) + "\n")
    return out


def test_an_edited_record_is_named_by_verify_and_refused_by_the_gate(made, tmp_path):
    b = flipped(made["b"], tmp_path / "b")
    code, differences = verified(b)
    assert code == ExitCode.VERIFY_MISMATCH
    assert differences == ["checks.jsonl record 1 passed: recorded False, recomputed True"]
    series = copied(made["series"], tmp_path / "series")
    result = run("publish", series, "--checks", made["a"], "--checks", b)
    assert result.exit_code == ExitCode.USER_ERROR
    assert "its record disagrees with its raw logs: checks.jsonl record 1 passed" in result.output
    assert not (series / gate.GATING).exists()  # nothing gated by it
    with pytest.raises(UserError, match="record disagrees with its raw logs") as e:
        gate.checks_for_series(series, [made["a"], b])
    assert f"micakit verify {b}" in str(e.value.fix)


def test_an_edited_correctness_md_table_or_plot_is_named(made, tmp_path):
    b = copied(made["b"], tmp_path / "b")
    md = b / "correctness.md"
    md.write_text(md.read_text().replace("**passed**", "**failed**: edited", 1))
    table = b / "tables" / "method_b.csv"
    df = pd.read_csv(table, dtype=str, keep_default_na=False)
    df.loc[3, "contender_loss"] = "1.5"
    df.to_csv(table, index=False)
    (b / "method_b.png").write_bytes(b"\x89PNG\r\n\x1a\nnot the plot")
    code, differences = verified(b)
    assert code == ExitCode.VERIFY_MISMATCH
    assert any(
        d.startswith("correctness.md line 7: published '| verdict | **failed**")
        for d in differences
    )
    assert any(
        d.startswith("tables/method_b.csv row 5 column contender_loss: published '1.5'")
        for d in differences
    )
    assert "method_b.png: differs from the plot recomputed from the raw logs" in differences


def test_an_edited_raw_log_is_named_and_not_recomputed(made, tmp_path):
    a = copied(made["a"], tmp_path / "a")
    log = next((a / "runs").glob("*contender.seed1337/attempt-1/stdout.log"))
    log.write_bytes(log.read_bytes().replace(b"val loss", b"val loss ", 1))
    code, differences = verified(a)
    assert code == ExitCode.VERIFY_MISMATCH
    rel = log.relative_to(a).as_posix()
    assert differences[0] == f"{rel}: raw file changed since run 1 wrote it"
    assert differences[-1].startswith("not recomputed")


def test_a_record_of_an_older_kit_is_read_and_never_gates(made, tmp_path):
    a = copied(made["a"], tmp_path / "a")
    path = a / checks.CHECKS_FILE
    record = json.loads(path.read_text())
    for key in ("contender_sha256", "contender_image_id"):
        del record[key]
    path.write_text(json.dumps({**record, "schema": 1}) + "\n")
    (old,) = checks.load_checks(a)
    assert old.contender_sha256 == "" and old.passed is True
    said = "the check names no program (a record of an older kit): run the check again"
    assert gate.checks_for_series(made["series"], [a, made["b"]]) == {KEY: f"method A: {said}"}
    code, differences = verified(a)
    assert code == ExitCode.VERIFY_MISMATCH
    assert differences[0] == (
        "checks.jsonl record 1: the check names no program (a record of an older kit), so it "
        "gates no series; run the check again"
    )

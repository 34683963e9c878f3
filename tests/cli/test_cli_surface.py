"""The command line as other tools and people meet it: reading never writes, --json, -q/-v,
and --help with an example and its defaults."""

from __future__ import annotations

import hashlib
import json

import pytest
from click.testing import CliRunner

from kit.cli.main import main
from tests.conftest import contender_args, copied, series_once, write_protocol


def _tree(root):
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One small series for the module (a whole series takes seconds); each test copies it."""
    root = tmp_path_factory.mktemp("surface")
    protocol = write_protocol(root / "p.toml", runs=2)
    args = contender_args(root / "r", protocol, "--precision", "float32")
    return series_once(root, args, step_ms={"*": 2.0})


@pytest.fixture
def series(finished, tmp_path):
    return copied(finished, tmp_path)


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_report_and_verify_read_and_never_write(series, cli):
    before = _tree(series)
    printed = cli("report", series)
    assert printed.exit_code == 0
    assert printed.output == (series / "report.md").read_text()
    assert cli("report", series, "--preview").exit_code == 0
    as_json = json.loads(cli("report", series, "--json").output)
    assert as_json == json.loads((series / "summary.json").read_text())
    assert cli("verify", series).exit_code == 0
    verified = json.loads(cli("verify", series, "--json").output)
    assert verified["clean"] is True and verified["differences"] == []
    assert _tree(series) == before  # not a byte written, not a file added


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_publish_writes_and_a_preview_is_then_verified(series, cli):
    res = cli("publish", series, "--preview")
    assert res.exit_code == 0
    assert str(series / "report.md") in res.output
    assert "preparation: not a protocol result" in (series / "report.md").read_text()
    assert cli("verify", series).exit_code == 0


def test_verify_json_names_the_differences(series, cli):
    md = series / "report.md"
    md.write_text(md.read_text().replace("contender", "kontender", 1))
    res = CliRunner().invoke(main, ["verify", str(series), "--json"])
    assert res.exit_code == 4
    found = json.loads(res.stdout)
    assert found["schema_version"] == 1 and found["clean"] is False
    (line,) = [d for d in found["differences"] if d["file"] == "report.md"]
    assert line["kind"] == "line" and isinstance(line["line"], int)
    assert "kontender" in line["found"] and "kontender" not in line["expected"]
    assert "contender" in line["expected"] and line["reason"].startswith("report.md line ")
    assert set(line) == {"file", "line", "row", "column", "expected", "found", "kind", "reason"}


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_quiet_says_nothing_on_stderr_and_verbose_is_accepted(tmp_path, fake_env):
    fake_env(step_ms={"*": 2.0})
    protocol = write_protocol(tmp_path / "p.toml", runs=1)
    out = tmp_path / "q"
    res = CliRunner().invoke(main, [*map(str, contender_args(out, protocol)), "-q"])
    assert res.exit_code == 0, res.output
    assert res.stderr == ""
    assert res.stdout.strip() == str(out / "report.md")
    assert CliRunner().invoke(main, ["verify", str(out), "-v"]).exit_code == 0


@pytest.mark.parametrize(
    "command",
    [["series"], ["report"], ["publish"], ["verify"], ["footprint"], ["merge"], ["compare"],
     ["correctness"], ["images", "build"], ["images", "push"]],
)  # fmt: skip
def test_every_command_has_an_example_quiet_and_verbose(command):
    res = CliRunner().invoke(main, [*command, "--help"])
    assert res.exit_code == 0
    assert "Example" in res.output, command
    assert "--quiet" in res.output and "--verbose" in res.output
    for line in res.output.splitlines():
        if line.strip().startswith("--") and not line.strip().startswith("-h"):
            # every option explained: a word of help after the option's name
            assert len(line.strip().split(None, 2)) >= 2, line


def test_series_help_names_the_protocols_models_and_shows_defaults():
    out = CliRunner().invoke(main, ["series", "--help"]).output
    for word in ("shakespeare-char", "gpt2-small", "gpt2-medium", "bfloat16", "float16"):
        assert word in out
    assert "[default:" in out and "60.0]" in out  # the wait for a busy card


def _seam(command: str):
    """A command's click parameters, the type they are read into, the options type, and the
    documented ways the two differ."""
    # lazy: the commands' modules load the engine (start-up speed of the other tests)
    from kit.cli import correctness, series_args, series_cmd
    from kit.results.run_options import CheckOptions, SeriesOptions

    if command == "series":
        cmd, module, opts = series_cmd.series, series_args, SeriesOptions
        args: type = series_args.SeriesArgs
    else:
        cmd, module, opts = correctness.correctness, correctness, CheckOptions
        args = correctness.CheckArgs
    params = {p.name for p in cmd.params if p.expose_value}
    return params, args, opts, module


@pytest.mark.parametrize("command", ["series", "correctness"])
def test_click_options_and_the_options_type_agree_both_ways(command):
    import dataclasses

    params, args, opts, module = _seam(command)
    # click's parameters are read into a type of the same fields, by attribute (mypy checks)
    assert params == {f.name for f in dataclasses.fields(args)}
    # and every parameter but the documented command-line ones is an option of the series or
    # check, by its name or the documented other name; every option but the documented
    # derived ones comes from a parameter
    assert set(module.CLI_ONLY) <= params and set(module.RENAMED) <= params
    given = {module.RENAMED.get(n, n) for n in params - set(module.CLI_ONLY)}
    fields = {f.name for f in dataclasses.fields(opts)}
    assert set(module.DERIVED) <= fields
    assert sorted(given - fields) == [], "click options that no option field takes"
    assert sorted(fields - set(module.DERIVED) - given) == [], "fields no click option gives"


def test_a_renamed_click_option_fails_at_once_not_as_none():
    from kit.cli import series_args

    params, args, _, _ = _seam("series")
    given = {n: None for n in params}
    given["idle_timeout_seconds"] = given.pop("idle_timeout")
    with pytest.raises(TypeError, match="idle_timeout"):
        args(**given)
    assert series_args.SeriesArgs is args

from pathlib import Path

import pytest

from kit.errors import UserError
from kit.protocol.load import DEFAULT_PATH, load
from tests.conftest import write_protocol


def test_reference_protocol_holds_what_rule_1_fixes():
    p = load()
    assert p.timing.steps == 400 and p.timing.window == (100, 400)
    assert p.timing.runs == 5 and p.timing.discarded_runs == 1
    assert p.timing.cross_check_tolerance == 0.01 and p.timing.verdict_margin == 0.05
    assert p.pytorch.modes == ["eager", "default", "reduce-overhead", "max-autotune"]
    assert set(p.models) == {"shakespeare-char", "gpt2-small", "gpt2-medium"}
    assert p.precisions.names == ["float32", "bfloat16", "float16"]
    assert len(p.sha256) == 64
    assert [a.number for a in p.amendments] == list(range(1, 9))


def test_hash_changes_with_the_file(tmp_path: Path):
    a = write_protocol(tmp_path / "a.toml")
    b = write_protocol(tmp_path / "b.toml", runs=4)
    assert load(a).sha256 != load(b).sha256


def test_unknown_key_is_named(tmp_path: Path):
    path = write_protocol(
        tmp_path / "p.toml",
        **{"verdict_margin = 0.05": "verdict_margin = 0.05\nmargin_of_error = 1"},
    )
    with pytest.raises(UserError, match=r"unknown key timing\.margin_of_error"):
        load(path)


def test_wrong_type_is_named(tmp_path: Path):
    path = write_protocol(tmp_path / "p.toml", **{"steps = 100": 'steps = "many"'})
    with pytest.raises(UserError, match=r"timing\.steps must be an integer"):
        load(path)


def test_missing_key_is_named(tmp_path: Path):
    path = write_protocol(tmp_path / "p.toml", **{"verdict_margin = 0.05\n": ""})
    with pytest.raises(UserError, match=r"missing key timing\.verdict_margin"):
        load(path)


def test_bad_regex_and_window(tmp_path: Path):
    path = write_protocol(tmp_path / "p.toml", **{"window = [20, 100]": "window = [20, 200]"})
    with pytest.raises(UserError, match="window"):
        load(path)
    text = DEFAULT_PATH.read_text().replace(
        r"line_regex = '^step (?P<step>\d+)", r"line_regex = '^step (?P<step\d+)"
    )
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(UserError, match="contender.line_regex is not a regular expression"):
        load(bad)


def test_missing_file_and_not_toml(tmp_path: Path):
    with pytest.raises(UserError, match="cannot read the protocol file"):
        load(tmp_path / "nope.toml")
    (tmp_path / "x.toml").write_text("schema = [")
    with pytest.raises(UserError, match="not valid TOML"):
        load(tmp_path / "x.toml")


def test_unknown_model_and_precision():
    p = load()
    with pytest.raises(UserError, match="unknown model 'gpt5'"):
        p.model("gpt5")
    with pytest.raises(UserError, match="unknown precision 'float8'"):
        p.check_precision("float8")


def test_an_out_of_memory_pattern_must_be_a_regular_expression(tmp_path):
    bad = write_protocol(
        tmp_path / "p.toml",
        **{"oom_patterns = ['out of memory']": "oom_patterns = ['out of (memory']"},
    )
    with pytest.raises(UserError, match="contender.oom_patterns"):
        load(bad)

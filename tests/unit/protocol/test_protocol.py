import dataclasses
from pathlib import Path

import pytest

from kit.errors import UserError
from kit.protocol.load import DEFAULT_PATH, load
from tests.conftest import DROP, TEST_TOLERANCE, TEXT_INPUT_SHA256, write_protocol


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


def test_a_test_variant_differs_from_the_shipped_protocol_only_where_asked(tmp_path: Path):
    # the tests' protocols are built by key from the shipped file (tests/conftest.py): fast
    # timing, the shipped text's hash, quiet conditions and the changes named, nothing else
    shipped = load()
    variant = load(write_protocol(tmp_path / "p.toml", runs=3, changes={"pytorch.torch": "0.0.1"}))
    assert variant.timing == dataclasses.replace(
        shipped.timing, steps=100, window=(20, 100), runs=3, discarded_runs=1, log_interval=10,
        cross_check_tolerance=TEST_TOLERANCE, verdict_margin=0.05,
    )  # fmt: skip
    assert variant.data.input_sha256 == TEXT_INPUT_SHA256
    assert variant.pytorch.torch == "0.0.1"
    assert (variant.conditions.cpu_busy_share, variant.conditions.cpu_look_s) == (1.0, 0.05)
    assert (
        dataclasses.replace(
            variant,
            timing=shipped.timing,
            data=shipped.data,
            conditions=shipped.conditions,
            pytorch=dataclasses.replace(variant.pytorch, torch=shipped.pytorch.torch),
        )
        == shipped
    )


def test_unknown_key_is_named(tmp_path: Path):
    path = write_protocol(
        tmp_path / "p.toml",
        changes={"timing.margin_of_error": 1},
    )
    with pytest.raises(UserError, match=r"unknown key timing\.margin_of_error"):
        load(path)


def test_wrong_type_is_named(tmp_path: Path):
    path = write_protocol(tmp_path / "p.toml", changes={"timing.steps": "many"})
    with pytest.raises(UserError, match=r"timing\.steps must be an integer"):
        load(path)


def test_missing_key_is_named(tmp_path: Path):
    path = write_protocol(tmp_path / "p.toml", changes={"timing.verdict_margin": DROP})
    with pytest.raises(UserError, match=r"missing key timing\.verdict_margin"):
        load(path)


def test_bad_regex_and_window(tmp_path: Path):
    path = write_protocol(tmp_path / "p.toml", changes={"timing.window": [20, 200]})
    with pytest.raises(UserError, match="window"):
        load(path)
    line_regex = load(DEFAULT_PATH).contender.line_regex
    assert line_regex.startswith(r"^step (?P<step>\d+)")
    unclosed = line_regex.replace("(?P<step>", "(?P<step", 1)
    bad = write_protocol(tmp_path / "bad.toml", changes={"contender.line_regex": unclosed})
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
        changes={"contender.oom_patterns": ["out of (memory"]},
    )
    with pytest.raises(UserError, match="contender.oom_patterns"):
        load(bad)


def test_diagnostics_threshold_is_read_checked_and_optional(tmp_path: Path):
    assert load().diagnostics.threshold == 0.01
    older = write_protocol(tmp_path / "older.toml", changes={"diagnostics": DROP})
    assert load(older).diagnostics.threshold == 0.01  # a file written before the table
    bad = write_protocol(tmp_path / "bad.toml", changes={"diagnostics.threshold": 1.5})
    with pytest.raises(UserError, match=r"diagnostics\.threshold"):
        load(bad)


def test_diagnostics_table_is_optional_and_bounded(tmp_path: Path):
    # a protocol file from before [diagnostics] reads with its defaults
    older = write_protocol(tmp_path / "older.toml", changes={"diagnostics": DROP})
    assert load(older).diagnostics.throttle_share == 0.05
    assert load().diagnostics.throttle_share == 0.05
    wrong = write_protocol(tmp_path / "p.toml", changes={"diagnostics.throttle_share": 1.5})
    with pytest.raises(UserError, match="diagnostics.throttle_share"):
        load(wrong)

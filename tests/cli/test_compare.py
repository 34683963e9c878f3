"""`micakit compare A B`: two series of the fake contender, recomputed from their raw logs."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import contender_args, steady_series, write_protocol

pytestmark = pytest.mark.slow  # every test runs series to compare: seconds each


def _series(tmp_path, name, protocol, fake_env, cli, step_ms):
    """A contender series of the fake at `step_ms`, made again where the machine stalled a run
    by 3% or more: the gate's tests tell 10% apart from 2%, and one run held up 7% on a loaded
    runner took a 10% slower B's interval down to 0.97 (ambiguous, exit 0)."""
    fake_env(step_ms={"*": step_ms}, state=str(tmp_path / f"state-{name}"))
    out = tmp_path / name

    def make():
        result = cli(*contender_args(out, protocol, "--precision", "float32"))
        assert result.exit_code == 0, result.output
        return out

    return steady_series(make, tries=4, stall=1.03)


def test_compare_two_directories(tmp_path, fake_env, cli):
    protocol = write_protocol(tmp_path / "p.toml", runs=2)
    a = _series(tmp_path, "a", protocol, fake_env, cli, 2.0)
    b = _series(tmp_path, "b", protocol, fake_env, cli, 1.0)
    # rule 6: no correctness check passed, so the times are withheld unless previewed
    withheld = json.loads(cli("compare", a, b, "--json").output)["both"][0]
    assert withheld["a_s"] is None and withheld["state_a"].startswith("withheld")
    result = cli("compare", a, b, "--json", "--preview")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    (entry,) = data["both"]
    assert entry["side"] == "contender" and entry["state_a"] == entry["state_b"] == "complete"
    # A's steps take about twice B's: the ratio is recomputed from the two directories' logs
    # one ratio, B / A (above 1: B slower); two runs a side carry no interval
    ratio = entry["b_s"]["median"] / entry["a_s"]["median"]
    assert entry["ratio_b_over_a"] == pytest.approx(ratio) and 0.33 < ratio < 0.77
    assert "ratio_a_over_b" not in entry and entry["interval_b_over_a"] is None
    assert entry["runs_a"] == entry["runs_b"] == 2 and entry["verdict"] == "faster"
    assert entry["ranges_overlap"] is False
    assert data["only_in_a"] == data["only_in_b"] == []
    md = cli("compare", a, b, "--preview")
    assert md.exit_code == 0
    assert "preparation: not a protocol result" in md.output
    assert "| shakespeare-char | float32 | contender |" in md.output
    assert f"| {ratio:.3f} (2 runs a side: no interval) | faster |" in md.output


def test_compare_refuses_different_protocols_unless_allowed(tmp_path, fake_env, cli):
    a = _series(tmp_path, "a", write_protocol(tmp_path / "p1.toml", runs=2), fake_env, cli, 1.0)
    p2 = write_protocol(tmp_path / "p2.toml", runs=2, tolerance=0.2)
    b = _series(tmp_path, "b", p2, fake_env, cli, 1.0)
    refused = cli("compare", a, b)
    assert refused.exit_code == 2
    assert "different protocols" in refused.output and "--allow-protocol-change" in refused.output
    allowed = cli("compare", a, b, "--allow-protocol-change")
    assert allowed.exit_code == 0
    assert "different protocols" in allowed.output


def test_two_copies_of_one_directory_read_same_and_pass_the_gate(tmp_path, fake_env, cli):
    a = _series(tmp_path, "a", write_protocol(tmp_path / "p.toml", runs=5), fake_env, cli, 2.0)
    b = tmp_path / "copy"
    shutil.copytree(a, b)
    result = cli("compare", a, b, "--json", "--preview", "--fail-slower", "1")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema_version"] == 4 and data["threshold"] == 0.01  # the protocol's [diagnostics]
    assert data["both"] and all(e["verdict"] == "same" for e in data["both"])
    (entry,) = data["both"]
    low, high = entry["interval_b_over_a"]
    assert entry["ratio_b_over_a"] == 1.0 and low <= 1.0 <= high
    assert "within the runs' ranges" in entry["reason"]
    md = cli("compare", a, b, "--preview")
    assert "| B / A (interval) | class | flagged runs | A/A | why |" in md.output
    assert "| 1.000 (" in md.output and "| same | none | — |" in md.output


def test_a_contender_ten_percent_slower_fails_the_gate(tmp_path, fake_env, cli):
    protocol = write_protocol(tmp_path / "p.toml", runs=5)
    a = _series(tmp_path, "a", protocol, fake_env, cli, 4.0)
    b = _series(tmp_path, "b", protocol, fake_env, cli, 4.4)
    result = cli("compare", a, b, "--json", "--preview", "--fail-slower", "2")
    assert result.exit_code == 5, result.output
    (entry,) = json.loads(result.stdout)["both"]
    assert entry["verdict"] == "slower", entry["reason"]
    low, high = entry["interval_b_over_a"]
    assert 1.02 < low <= entry["ratio_b_over_a"] <= high
    assert "B slower than A by more than 2%" in result.stderr
    assert "above 1.02" in result.stderr and "1.0%" not in result.stderr  # the gate's own
    assert json.loads(result.stdout)["gate"]["exit_code"] == 5
    # without the gate compare only reads: exit 0
    assert cli("compare", a, b, "--preview").exit_code == 0


def test_close_noisy_sides_read_same_or_ambiguous(tmp_path, fake_env, cli):
    protocol = write_protocol(tmp_path / "p.toml", runs=3)
    a = _series(tmp_path, "a", protocol, fake_env, cli, 2.0)
    b = _series(tmp_path, "b", protocol, fake_env, cli, 2.006)
    result = cli("compare", a, b, "--json", "--preview", "--threshold", "1", "--fail-slower", "2")
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["both"]
    assert entry["verdict"] in ("same", "ambiguous"), entry["reason"]


def test_a_crashed_b_fails_the_gate_unless_missing_is_allowed(tmp_path, fake_env, cli):
    protocol = write_protocol(tmp_path / "p.toml", runs=2)
    a = _series(tmp_path, "a", protocol, fake_env, cli, 2.0)
    fake_env(step_ms={"*": 2.0}, events={"mica#*": "crash"}, state=str(tmp_path / "state-b"))
    b = tmp_path / "b"
    cli(*contender_args(b, protocol, "--precision", "float32"))  # every run of B fails
    result = cli("compare", a, b, "--preview", "--fail-slower", "10")
    assert result.exit_code == 6, result.output
    assert "B lacks what A has: shakespeare-char · float32 · contender" in result.stderr
    assert "A has a time, B none" in result.stderr and "gate 10%: failed (exit 6)" in result.stderr
    allowed = cli("compare", a, b, "--preview", "--fail-slower", "10", "--allow-missing")
    assert allowed.exit_code == 0 and "--allow-missing: not failed" in allowed.stderr
    # B lacking A's whole configuration: the same
    other = write_protocol(tmp_path / "p2.toml", runs=2, tolerance=0.2)
    c = _series(tmp_path, "c", other, fake_env, cli, 2.0)
    fake_env(step_ms={"*": 2.0}, state=str(tmp_path / "state-d"))
    d = tmp_path / "d"
    assert cli(*contender_args(d, other, "--precision", "bfloat16")).exit_code == 0
    lacks = cli("compare", c, d, "--preview", "--allow-protocol-change", "--fail-slower", "5")
    assert lacks.exit_code == 6 and "B lacks this configuration" in lacks.stderr
    # the gate's options without the gate: one error and its fix
    alone = cli("compare", a, b, "--allow-missing")
    assert alone.exit_code == 2 and "fix:" in alone.output

"""Rule 9: a torch other than the protocol's pin runs only with --allow-torch, as preparation."""

from __future__ import annotations

import json

import pytest

from kit.protocol.load import load
from tests.conftest import edit_protocol, fake_nanogpt_protocol, pytorch_args

pytestmark = pytest.mark.slow  # every test runs a series of both sides: seconds each


def _other_pin(tmp_path):
    protocol = fake_nanogpt_protocol(tmp_path / "p.toml", runs=1)
    assert load(protocol).pytorch.torch == "2.13.0"
    return edit_protocol(protocol, {"pytorch.torch": "0.0.1"})


def test_a_torch_other_than_the_pin_is_refused(tmp_path, fake_env, cli):
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    result = cli(*pytorch_args(out, _other_pin(tmp_path)))
    assert result.exit_code == 2, result.output
    assert "the protocol pins 0.0.1" in result.output
    assert "--allow-torch" in result.output


def test_allow_torch_records_it_and_labels_every_number_preparation(tmp_path, fake_env, cli):
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    result = cli(*pytorch_args(out, _other_pin(tmp_path), "--allow-torch"))
    assert result.exit_code == 0, result.output
    pytorch = json.loads((out / "versions.json").read_text())["pytorch"]
    assert pytorch["torch_pinned"] == "0.0.1"
    assert pytorch["torch_other_allowed"] is True
    label = f"preparation (torch {pytorch['torch']}, not the protocol's 0.0.1, rule 9)"
    assert label in (out / "report.md").read_text().splitlines()[0]
    assert label in (out / "report.html").read_text()
    assert cli("verify", out).exit_code == 0


def test_the_pinned_torch_is_recorded_and_not_preparation(tmp_path, fake_env, cli):
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    protocol = fake_nanogpt_protocol(tmp_path / "p.toml", runs=1)
    assert cli(*pytorch_args(out, protocol)).exit_code == 0
    pytorch = json.loads((out / "versions.json").read_text())["pytorch"]
    assert pytorch["torch_pinned"] == "2.13.0" and "torch_other_allowed" not in pytorch
    assert "preparation" not in (out / "report.md").read_text().splitlines()[0]

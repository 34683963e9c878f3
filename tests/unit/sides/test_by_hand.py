"""A download that fails in the runner image says to mount a copy, never to save one into the
container's cache, which `docker run --rm` throws away."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.errors import UserError
from kit.sides import by_hand, data
from tests.unit.sides.test_data import FakeSession
from tests.unit.sides.test_nanogpt_source import Server, download


@pytest.fixture
def in_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(by_hand.RUNNER_ENV, "1")


@pytest.fixture
def on_a_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(by_hand.RUNNER_ENV, raising=False)


def test_input_in_the_runner_is_mounted(tmp_path: Path, in_runner) -> None:
    with pytest.raises(UserError) as e:
        data.fetch_input(tmp_path / "cache", session=FakeSession(offline=True))
    fix = str(e.value.fix)
    assert data.INPUT_URL in fix and "--input /data/input.txt" in fix
    assert "-v PATH/TO/input.txt:/data/input.txt:ro" in fix
    assert str(tmp_path / "cache") not in fix


def test_input_on_a_machine_goes_into_the_cache(tmp_path: Path, on_a_machine) -> None:
    with pytest.raises(UserError) as e:
        data.fetch_input(tmp_path / "cache", session=FakeSession(offline=True))
    assert str(tmp_path / "cache" / "tinyshakespeare" / "input.txt") in str(e.value.fix)


def test_nanogpt_in_the_runner_is_mounted(tmp_path: Path, in_runner) -> None:
    server = Server()
    server.body = None  # 404
    try:
        with pytest.raises(UserError) as e:
            download(tmp_path / "cache", server)
    finally:
        server.close()
    fix = str(e.value.fix)
    assert "--nanogpt /nanogpt" in fix and "-v PATH/TO/nanoGPT:/nanogpt:ro" in fix
    assert str(tmp_path / "cache") not in fix

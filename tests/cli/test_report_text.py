"""report.md and report.html are written for people: no Python repr ever reaches them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kit.executors.docker import connection
from kit.report import markdown
from kit.results.documents import Versions
from tests.conftest import CONTENDER, fake_nanogpt_protocol, pytorch_args

# what the Docker SDK's client answers (client.version(), client.info()), as recorded
ENGINE_VERSION = {
    "Version": "27.3.1",
    "ApiVersion": "1.47",
    "KernelVersion": "6.8.0-45-generic",
    "Components": [
        {"Name": "Engine", "Version": "27.3.1"},
        {"Name": "containerd", "Version": "1.7.22"},
        {"Name": "runc", "Version": "1.1.14"},
    ],
}
ENGINE_INFO = {
    "OperatingSystem": "Ubuntu 24.04.1 LTS",
    "Driver": "overlay2",
    "Runtimes": {"runc": {}, "nvidia": {}},
    "DefaultRuntime": "runc",
}
# what Python prints of None, a dict or an empty list: never meant for a reader
REPRS = ("None", "{'", "[]")


class _Engine:
    def version(self) -> dict:
        return ENGINE_VERSION

    def info(self) -> dict:
        return ENGINE_INFO


def _docker_recorded(out: Path) -> None:
    """The series' versions as the Docker executor records its engine."""
    path = out / "versions.json"
    found = json.loads(path.read_text())
    found["executor"] = {"name": "docker", **connection.versions(_Engine())}  # type: ignore[arg-type]
    path.write_text(json.dumps(found, indent=2) + "\n")


def test_the_versions_line_names_the_docker_engine_and_skips_what_is_absent() -> None:
    found = {
        "card": {"name": "NVIDIA L4", "driver_version": "550.90.07", "uuid": None},
        "pytorch": {"python": "3.11.7", "torch": "2.13.0", "triton": None, "cudnn": None},
        "executor": {"name": "docker", **connection.versions(_Engine())},  # type: ignore[arg-type]
    }
    line = markdown.versions_line(Versions.from_json(found))
    assert "Docker 27.3.1" in line
    assert "torch 2.13.0" in line and "triton" not in line and "cudnn" not in line
    assert not any(r in line for r in REPRS)


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_reports_carry_no_python_repr_and_the_docker_version(tmp_path, cli, fake_env) -> None:
    protocol = fake_nanogpt_protocol(tmp_path / "p.toml", runs=2)
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    made = cli(*pytorch_args(out, protocol, "--contender", CONTENDER))
    assert made.exit_code == 0, made.output
    _docker_recorded(out)
    assert cli("publish", out).exit_code == 0
    for name in ("report.md", "report.html"):
        text = (out / name).read_text("utf-8")
        # the versions table: Docker in one cell, its version in the next
        assert re.search(r"Docker(\s|\||</td>)+(<td[^>]*>)?27\.3\.1", text), name
        found = {r: text[max(0, text.find(r) - 80) : text.find(r) + 20] for r in REPRS if r in text}
        assert found == {}, name

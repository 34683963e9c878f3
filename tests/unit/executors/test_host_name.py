"""The manifest's host is the machine the runs run on: for the Docker executor the engine's own
name (`docker info`), which inside the runner image is not the container's id."""

from __future__ import annotations

import socket

from kit.executors.docker.executor import DockerExecutor
from kit.executors.local import LocalExecutor


class InfoClient:
    """What the executor asks of the engine for its host's name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def info(self) -> dict:
        return {"Name": self.name, "ID": "a5c3f1e0"}


def test_a_docker_series_names_the_engines_host() -> None:
    ex = DockerExecutor(InfoClient("gpu-box-7"))  # type: ignore[arg-type]
    assert ex.host() == "gpu-box-7" != socket.gethostname()


def test_a_local_series_names_this_machine() -> None:
    assert LocalExecutor().host() == socket.gethostname()

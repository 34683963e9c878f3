"""Where a path of the kit's lies on the host: the runner reads its own container's mounts, so
that what it prints names paths the user's shell sees."""

from __future__ import annotations

from pathlib import Path

from kit.executors.docker.containers import HostPaths
from kit.executors.docker.executor import DockerExecutor
from kit.executors.local import LocalExecutor


def test_the_runner_reads_the_hosts_path_from_its_own_mounts(tmp_path):
    executor = DockerExecutor(client=None)  # type: ignore[arg-type] - no engine is asked
    executor._host_paths = HostPaths("c" * 64, (("/results", "/home/u/results"),))
    assert executor.host_path(Path("/results/L4")) == "/home/u/results/L4"
    assert executor.host_path(Path("/tmp/elsewhere")) is None  # under no mount
    executor._host_paths = HostPaths(container_id=None)  # the kit runs on the host
    assert executor.host_path(Path("/results/L4")) is None
    assert LocalExecutor().host_path(tmp_path) is None

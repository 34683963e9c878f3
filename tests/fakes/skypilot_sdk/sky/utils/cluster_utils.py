"""sky.utils.cluster_utils.SSHConfigHelper: the ssh entries SkyPilot writes (~/.ssh/config's
include of ~/.sky/generated/ssh/CLUSTER), recorded; written too where the machine is this one
over ssh (sky/_loopback.py)."""

from __future__ import annotations

from typing import Any

import sky
from sky import _loopback


class SSHConfigHelper:
    @classmethod
    def add_cluster(
        cls,
        cluster_name: str,
        cluster_name_on_cloud: str,
        ips: list[str],
        auth_config: dict[str, str],
        ports: list[int],
        docker_user: str | None = None,
        ssh_user: str | None = None,
    ) -> None:
        args: dict[str, Any] = {"cluster_name": cluster_name, "ips": ips, "ssh_user": ssh_user}
        state = sky._record("ssh_add_cluster", **args)
        ssh = state["script"].get("ssh")
        if ssh:  # the machine is this one over ssh: the entry is written, as SkyPilot does
            key = auth_config["ssh_private_key"]
            _loopback.write_entry(ssh, cluster_name, ips[0], ports[0], ssh_user or "root", key)

    @classmethod
    def remove_cluster(cls, cluster_name: str) -> None:
        state = sky._record("ssh_remove_cluster", cluster_name=cluster_name)
        if state["script"].get("ssh"):
            _loopback.remove_entry(state["script"]["ssh"], cluster_name)

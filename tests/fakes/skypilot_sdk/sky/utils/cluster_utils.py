"""sky.utils.cluster_utils.SSHConfigHelper: the ssh entries SkyPilot writes (~/.ssh/config's
include of ~/.sky/generated/ssh/CLUSTER), recorded instead of written."""

from __future__ import annotations

from typing import Any

import sky


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
        sky._record("ssh_add_cluster", **args)

    @classmethod
    def remove_cluster(cls, cluster_name: str) -> None:
        sky._record("ssh_remove_cluster", cluster_name=cluster_name)

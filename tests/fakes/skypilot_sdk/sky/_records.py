"""The records SkyPilot answers with: a cluster's handle (sky/backends/cloud_vm_ray_backend.py,
CloudVmRayResourceHandle, the fields the kit reads) and `sky.status`'s lines
(sky/schemas/api/responses.py, StatusResponse)."""

from __future__ import annotations

from typing import Any

import sky


class Where:
    def __init__(self, region: str, zone: str) -> None:
        self.region, self.zone = region, zone


class Handle:
    def __init__(self, where: Where, name: str = "", ssh: dict[str, Any] | None = None) -> None:
        self.launched_resources = where
        self.cluster_name = name
        self.cluster_name_on_cloud = f"{name}-2ea4"
        self.cached_external_ips = ["127.0.0.1"]
        self.cached_external_ssh_ports = [ssh["port"] if ssh else 22]
        self.docker_user = None
        self.ssh_user = "root" if ssh else "gcpuser"


class StatusResponse:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def status(
    state: dict[str, Any], names: list[str] | None, credentials: bool
) -> list[StatusResponse]:
    found = []
    ssh = state["script"].get("ssh")
    key = ssh["key"] if ssh else "~/.sky/key"
    for name, c in state["clusters"].items():
        if names is not None and name not in names:
            continue
        up = c["status"] == "UP"
        found.append(
            StatusResponse(
                name=name,
                status=sky.ClusterStatus[c["status"]],
                labels=c["labels"],
                autostop=c["autostop"],
                to_down=c["to_down"],
                region=c["region"],
                handle=Handle(Where(c["region"], c["zone"]), name, ssh) if up else None,
                credentials={"ssh_user": "gcpuser", "ssh_private_key": key}
                if credentials and up
                else None,
            )
        )
    return found

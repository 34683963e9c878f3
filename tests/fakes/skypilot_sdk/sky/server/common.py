"""sky.server.common: whether SkyPilot's local API server runs (sky/server/common.py,
get_api_server_status and is_api_server_local), from the fake's state: it starts with the
first SDK call (sky._server) and runs until `sky api stop`."""

from __future__ import annotations

import enum
from typing import Any

import sky


class ApiServerStatus(enum.Enum):
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"


class ApiServerInfo:
    def __init__(self, status: ApiServerStatus) -> None:
        self.status = status


def get_api_server_status(endpoint: str | None = None) -> ApiServerInfo:
    up = bool(sky.load().get("api_server"))
    return ApiServerInfo(ApiServerStatus.HEALTHY if up else ApiServerStatus.UNHEALTHY)


def is_api_server_local(endpoint: str | None = None) -> Any:
    return True

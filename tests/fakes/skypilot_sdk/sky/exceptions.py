"""sky.exceptions: the launch failures the kit maps to what the user must fix, with the real
constructors' shapes (SkyPilot 0.14)."""

from __future__ import annotations

from collections.abc import Sequence


class ResourcesUnavailableError(Exception):
    def __init__(
        self, message: str, no_failover: bool = False, failover_history: list | None = None
    ) -> None:
        super().__init__(message)
        self.no_failover = no_failover
        self.failover_history = failover_history or []


class NoCloudAccessError(Exception):
    pass


class CloudUserIdentityError(Exception):
    pass


class ApiServerConnectionError(RuntimeError):
    def __init__(self, server_url: str) -> None:
        super().__init__(
            f"Could not connect to SkyPilot API server at {server_url}. Please ensure that the "
            "server is running. Try: curl " + server_url + "/api/health"
        )
        self.server_url = server_url


class ProvisionPrechecksError(Exception):
    def __init__(self, reasons: Sequence[Exception]) -> None:
        super().__init__()
        self.reasons = list(reasons)

"""sky.exceptions: the errors the kit maps to what the user must fix, with the real classes'
bases and constructors (SkyPilot 0.14's sky/exceptions.py; tests/unit/cloud/
test_sdk_signatures.py holds each against the installed one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class CloudError(Exception):
    def __init__(self, message: str, cloud_provider: str, error_type: str) -> None:
        super().__init__(message)
        self.cloud_provider = cloud_provider
        self.error_type = error_type

    def __str__(self) -> str:
        return f"{self.cloud_provider} error ({self.error_type}): {super().__str__()}"


class ResourcesUnavailableError(Exception):
    def __init__(
        self, message: str, no_failover: bool = False, failover_history: list | None = None
    ) -> None:
        super().__init__(message)
        self.no_failover = no_failover
        self.failover_history = list(failover_history or [])


class ProvisionPrechecksError(Exception):
    def __init__(self, reasons: Sequence[Exception]) -> None:
        super().__init__()
        self.reasons = reasons


class SkyPilotExcludeArgsBaseException(Exception):
    pass


class CommandFailureException(SkyPilotExcludeArgsBaseException):
    def __init__(
        self, command: str, failure: str, error_msg: str, detailed_reason: str | None
    ) -> None:
        self.command, self.failure = command, failure
        self.error_msg, self.detailed_reason = error_msg, detailed_reason
        message = (
            error_msg
            if not command
            else (f"Command {command} {failure}.\n{error_msg}\n{detailed_reason}")
        )
        super().__init__(message)


class CommandError(CommandFailureException):
    def __init__(
        self,
        returncode: int,
        command: str,
        error_msg: str,
        detailed_reason: str | None,
        failure: str | None = None,
    ) -> None:
        self.returncode = returncode
        failure = failure or f"failed with return code {returncode}"
        super().__init__(command, failure, error_msg, detailed_reason)


class ClusterNotUpError(Exception):
    def __init__(self, message: str, cluster_status: Any = None, handle: Any = None) -> None:
        super().__init__(message)
        self.cluster_status = cluster_status
        self.handle = handle


class ClusterDoesNotExist(ValueError):
    pass


class NotSupportedError(Exception):
    pass


class CloudUserIdentityError(Exception):
    pass


class NoCloudAccessError(Exception):
    pass


class RequestCancelled(Exception):
    pass


class ApiServerConnectionError(RuntimeError):
    def __init__(self, server_url: str) -> None:
        super().__init__(
            f"Could not connect to SkyPilot API server at {server_url}. Please ensure that the "
            f"server is running. Try: curl {server_url}/api/health"
        )

"""The connection to the Docker engine: a checked client, and the engine's versions (§6).

The package kit/executors/docker is the only part of the kit that imports `docker`; this module
holds what every other one of its modules needs first: a client that answers.
"""

from __future__ import annotations

import os
import socket

import docker
import docker.constants
import docker.errors
import requests

from kit.errors import UserError

NO_ENGINE_FIX = (
    "start the engine (`sudo dockerd &`, or `sudo systemctl start docker`; on a fresh machine "
    "`bash scripts/ci-setup.sh` installs and starts it), or choose `--executor local`"
)


def connect(host: str | None = None, timeout_s: int = 120) -> docker.DockerClient:
    """A client of the engine at `host` (None: DOCKER_HOST, else the local socket), checked."""
    where = host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"

    def client_of(version: str) -> docker.DockerClient:
        if host:
            return docker.DockerClient(base_url=host, version=version, timeout=timeout_s)
        return docker.from_env(version=version, timeout=timeout_s)

    if where.startswith("unix://"):
        # checked first: the SDK leaks its socket when the connection fails
        reason = _unix_socket_refuses(where[len("unix://") :])
        if reason:
            raise UserError(f"no Docker engine answers at {where} ({reason})", NO_ENGINE_FIX)
    try:
        # a probe at the oldest API the SDK speaks, so that no call happens before the ping
        # (the version's negotiation is one) and its connection is closed whatever happens
        probe = client_of(docker.constants.MINIMUM_DOCKER_API_VERSION)
        try:
            probe.ping()
        finally:
            probe.close()
        return client_of("auto")
    except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
        if "PermissionError" in str(e) or "Permission denied" in str(e):
            raise UserError(
                f"no permission to use the Docker engine at {where}",
                "add yourself to the `docker` group (`sudo usermod -aG docker $USER`, then log "
                "in again), or choose `--executor local`",
            ) from None
        raise UserError(
            f"no Docker engine answers at {where} ({_reason(e)})", NO_ENGINE_FIX
        ) from None


def _unix_socket_refuses(path: str) -> str | None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        try:
            sock.connect(path)
        except FileNotFoundError:
            return f"no socket {path}"
        except PermissionError:
            return None  # the SDK's error names the fix for this one
        except OSError as e:
            return e.strerror or str(e)
    return None


def _reason(e: Exception) -> str:
    text = str(e)
    for hint in ("No such file or directory", "Connection refused", "timed out"):
        if hint in text:
            return hint.lower()
    return text.splitlines()[0][:200] if text else type(e).__name__


def versions(client: docker.DockerClient) -> dict[str, str]:
    """The engine's versions for the series record (§6 "Versions")."""
    v = client.version()
    info = client.info()
    out = {
        "docker_engine": str(v.get("Version", "")),
        "docker_api": str(v.get("ApiVersion", "")),
        "docker_sdk": docker.__version__,
        "docker_os": str(info.get("OperatingSystem", "")),
        "docker_kernel": str(v.get("KernelVersion", "")),
        "docker_storage_driver": str(info.get("Driver", "")),
        "docker_runtimes": ",".join(sorted(info.get("Runtimes") or {})),
        "docker_default_runtime": str(info.get("DefaultRuntime", "")),
    }
    for component in v.get("Components") or []:
        name = str(component.get("Name", "")).lower()
        if name and name != "engine":
            key = name.replace("-", "_")  # containerd, runc, docker_init
            out[key if key.startswith("docker_") else f"docker_{key}"] = str(
                component.get("Version", "")
            )
    return out


def explain(e: docker.errors.APIError) -> str:
    """The engine's own words for a refusal."""
    return str(e.explanation or e)

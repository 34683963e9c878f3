"""One container's run under the outside clock (§5): attached before its start, waited on within
the stall and whole-run limits, its output drained.

On a local engine the attach stream is a socket the reader process reads itself; over SSH it is
a channel of the SDK's transport, relayed to the reader through a pipe.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import docker
import docker.errors
import docker.types
import requests

from kit.errors import UserError
from kit.executors.base import Limits, RunSpec
from kit.executors.docker.building import BUILD_FIX
from kit.executors.docker.failures import user_error
from kit.measure import clock

POLL_S = 1  # how often a running container's output is checked for a stall (seconds)


@dataclass
class AttachedRun:
    """A created container, run to its end; `remove` is the executor's, which forgets it too."""

    api: docker.APIClient
    container: str
    remove: Callable[[str], None]
    stop_grace_s: int = 5  # as the local executor: SIGTERM, then SIGKILL
    drain_s: float = 60.0  # how long the output may trail the exit before it is cut

    def start_and_wait(
        self,
        spec: RunSpec,
        stdout_log: Path,
        stderr_log: Path,
        pending: clock.PendingReader | None = None,
    ) -> tuple[int, int, str | None]:
        """The run's start stamp, exit status and why the kit stopped it (None: it ended)."""
        api, container = self.api, self.container
        # Attached before the start, as `docker run` does, so no line can come before the
        # reader waits, and nothing sits in the HTTP client's buffer when the reader takes over.
        try:
            sock = api.attach_socket(container, params={"stdout": 1, "stderr": 1, "stream": 1})
        except BaseException:
            if pending is not None:
                pending.cancel()
            raise
        if carries_data_on_fd(sock):
            fd = os.dup(sock.fileno())
            try:
                cap = spec.stderr_cap_bytes
                if pending is not None:
                    reader = pending.hand([(fd, "mux")], stdout_log, stderr_log, cap)
                else:
                    reader = clock.start_reader(
                        [(fd, "mux")], stdout_log, stderr_log, stderr_cap=cap
                    )
            finally:
                os.close(fd)  # the reader holds its own copy; the engine closes the stream
                close_socket(sock)
        else:
            if pending is not None:
                pending.cancel()
            reader = relayed_reader(sock, stdout_log, stderr_log, spec.stderr_cap_bytes)
        start_ns = time.monotonic_ns()
        try:
            try:
                api.start(container)
            except docker.errors.APIError as e:
                self.remove(container)  # closes the stream, so the reader ends
                reader.wait()
                raise run_error(spec, e) from None
            status, stopped = self._wait_within(spec, stdout_log, stderr_log)
            self._drain(reader)
            clock.check_written(reader, stdout_log.parent)  # a full disk stops the run, unrecorded
        except UserError:
            raise
        except BaseException:
            # Ctrl-C or SIGTERM (the series turns it into KeyboardInterrupt): end the program,
            # keep what the reader already wrote; the caller removes the container
            self._stop()
            self._drain(reader)
            raise
        return start_ns, exit_code_of(int(status["StatusCode"])), stopped

    def _wait_within(
        self, spec: RunSpec, stdout_log: Path, stderr_log: Path
    ) -> tuple[dict, str | None]:
        """The container's exit; past the stall or whole-run limit it is stopped, and why."""
        api, container = self.api, self.container
        if not spec.stall_s and not spec.limit_s:
            return api.wait(container, timeout=None), None
        limits = Limits(spec, (stdout_log, stderr_log))
        while True:
            try:
                return api.wait(container, timeout=POLL_S), None
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                pass  # still running
            why = limits.check()
            if why:
                self._stop()
                return api.wait(container, timeout=None), why

    def _drain(self, reader: subprocess.Popen) -> None:
        try:
            reader.wait(self.drain_s)
        except subprocess.TimeoutExpired:
            self.remove(self.container)  # an attach stream that never closed: cut it
            reader.wait()

    def _stop(self) -> None:
        try:
            self.api.stop(self.container, timeout=self.stop_grace_s)
        except docker.errors.APIError:
            pass


class _Channel(Protocol):
    """What the relay reads: a socket, or the SDK's SSH channel."""

    def recv(self, size: int, /) -> bytes: ...


def carries_data_on_fd(sock: object) -> bool:
    """A local engine's attach stream is a socket the reader process can read itself; over SSH
    it is a channel of the SDK's SSH transport, whose descriptor carries no data."""
    module = type(sock).__module__
    return not (module.startswith("paramiko") or type(sock).__name__ == "SSHSocket")


def relayed_reader(
    sock: _Channel, stdout_log: Path, stderr_log: Path, stderr_cap: int | None = None
) -> subprocess.Popen:
    """The reader process fed through a pipe by a thread that reads the SSH channel.

    `--docker-host ssh://...` only: the relay adds a thread's wake-up to each chunk's stamp,
    where the network's own delay is larger still; runs on the engine's machine are read as
    they are locally.
    """
    r, w = os.pipe()
    try:
        reader = clock.start_reader([(r, "mux")], stdout_log, stderr_log, stderr_cap=stderr_cap)
    finally:
        os.close(r)

    def relay() -> None:
        try:
            while chunk := sock.recv(1 << 16):
                os.write(w, chunk)
        except OSError:
            pass
        finally:
            os.close(w)
            close_socket(sock)

    threading.Thread(target=relay, name="micakit-attach-relay", daemon=True).start()
    return reader


def close_socket(sock: object) -> None:
    # attach_socket gives the SocketIO under the HTTP response; closing it leaves the socket
    raw = getattr(sock, "_sock", None)
    sock.close()  # type: ignore[attr-defined]
    if raw is not None:
        raw.close()


def run_error(spec: RunSpec, e: docker.errors.APIError) -> UserError:
    if isinstance(e, docker.errors.ImageNotFound):
        return UserError(f"{spec.label}: the image {spec.image} is not built", BUILD_FIX)
    return user_error(e, spec.label)


def exit_code_of(status: int) -> int:
    """The engine reports a death by signal N as 128 + N; the kit, as subprocess does, as -N,
    so a program killed by a signal is never taken for one out of memory (amendment 8)."""
    return -(status - 128) if 128 < status <= 128 + 64 else status


def device_requests(gpu: str | None) -> list[docker.types.DeviceRequest] | None:
    """Docker's request for `gpu`: "all", or indices / UUIDs separated by commas."""
    if gpu is None:
        return None
    if gpu == "all":
        return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    ids = [g.strip() for g in gpu.split(",") if g.strip()]
    return [docker.types.DeviceRequest(device_ids=ids, capabilities=[["gpu"]])]

"""The kit's own death removes its containers: a watchdog that outlives the kit to do it.

A local run's group ends when the kit dies (its reader watches a pipe from the kit); a container
belongs to the engine and outlives the process that created it, so a kit killed with -9 would
leave the measured program on the card until the next start swept it (§5: the card holds no
other program).

The watchdog is `python -m kit.executors.docker.watchdog`, one per series, started in a session
of its own (a signal to the kit's whole group leaves it be) before the series' first container
is created. It reads a pipe whose write end only the kit holds: `+ID` when the kit has created
a container, `-ID` once it has removed it. The pipe ends when the kit exits, however it exits;
the watchdog then removes, by force, every container still named, and ends. Until then it is
blocked in a read, so a measured run pays nothing for it beyond two short writes outside its
clock.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path

import docker
import docker.errors
import requests

READY = b"1"


def left_over(lines: Iterable[str]) -> list[str]:
    """The containers named and not yet removed when the lines end, in the order named."""
    named: dict[str, None] = {}
    for raw in lines:
        line = raw.strip()
        if line.startswith("+") and len(line) > 1:
            named[line[1:]] = None
        elif line.startswith("-"):
            named.pop(line[1:], None)
    return list(named)


def remove_all(ids: Iterable[str], remove: Callable[[str], None]) -> list[str]:
    """Remove each container; returns why any could not be (one already gone is no failure)."""
    failures = []
    for cid in ids:
        try:
            remove(cid)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            if "already in progress" not in str(e.explanation or e):
                failures.append(f"{cid[:12]}: {e.explanation or e}")
        except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
            failures.append(f"{cid[:12]}: {e}")
    return failures


def engine_remover(host: str | None, api_version: str | None) -> Callable[[str], None]:
    """Force-removes a container (and its anonymous volumes) through the engine at `host`.

    A fixed API version, where the kit passes its own, spares the version's negotiation."""
    version = api_version or "auto"
    if host:
        client = docker.DockerClient(base_url=host, version=version, timeout=60)
    else:
        client = docker.from_env(version=version, timeout=60)

    def remove(cid: str) -> None:
        client.api.remove_container(cid, force=True, v=True)

    return remove


class Watchdog:
    """The kit's side: the watchdog process and the only write end of its pipe."""

    def __init__(self, host: str | None, api_version: str | None) -> None:
        argv = [sys.executable, "-m", "kit.executors.docker.watchdog"]
        if host:
            argv += ["--host", host]
        if api_version:
            argv += ["--api-version", api_version]
        # os.pipe's descriptors are not inherited: no program the kit starts holds the write
        # end, so the pipe ends exactly when the kit does
        r, self._w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=r,
                stdout=subprocess.PIPE,
                env=_env(),
                start_new_session=True,
            )
        finally:
            os.close(r)
        assert self.proc.stdout is not None
        with self.proc.stdout as ready:
            # started and its imports done before any container exists, so none of its start-up
            # runs beside a measured program
            if ready.read(1) != READY:
                os.close(self._w)
                self.proc.wait()
                raise RuntimeError(
                    f"the container watchdog failed to start ({self.proc.returncode})"
                )

    def watch(self, container_id: str) -> None:
        self._say(f"+{container_id}\n")

    def forget(self, container_id: str) -> None:
        self._say(f"-{container_id}\n")

    def _say(self, line: str) -> None:
        if self._w < 0:
            return
        try:
            os.write(self._w, line.encode())
        except OSError:
            pass  # the watchdog is gone; the next start's sweep remains

    def close(self, wait_s: float = 30.0) -> None:
        """The series is done: the pipe ends, and the watchdog removes whatever is left."""
        if self._w < 0:
            return
        os.close(self._w)
        self._w = -1
        try:
            self.proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            pass  # it finishes on its own; its session is its own


def _env() -> dict[str, str]:
    env = dict(os.environ)
    kit_root = str(Path(str(resources.files("kit"))).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (kit_root, env.get("PYTHONPATH")) if p)
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kit.executors.docker.watchdog", description=__doc__
    )
    parser.add_argument(
        "--host", default=None, help="the engine (default: DOCKER_HOST, else the local socket)"
    )
    parser.add_argument("--api-version", default=None)
    args = parser.parse_args(argv)
    # a Ctrl-C or a hang-up meant for the kit must not end the one process that cleans up after it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    os.write(1, READY)
    os.close(1)
    left = left_over(sys.stdin)
    if not left:
        return 0  # the kit removed its containers itself
    try:
        failures = remove_all(left, engine_remover(args.host, args.api_version))
    except docker.errors.DockerException as e:
        failures = [f"no engine answers ({e})"]
    for failure in failures:
        try:
            print(
                f"micakit: a container left by the stopped kit was not removed: {failure}",
                file=sys.stderr,
            )
        except OSError:
            pass
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

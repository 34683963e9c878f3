"""The container watchdog: the kit's own death removes the containers it left (README, "The
runner under faults"). A fake engine (an HTTP server that records what it is asked) stands in
for Docker; the kit is a small program killed with -9."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import docker.errors
import pytest
import requests

from kit.executors.docker.watchdog import Watchdog, left_over, remove_all
from tests.conftest import FAKES

API = "1.41"


class _FakeEngine(http.server.ThreadingHTTPServer):
    """Answers DELETE /v1.41/containers/ID: 204 for the containers it holds, else 404."""

    def __init__(self, held: set[str]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.held = held
        self.removed: list[tuple[str, str]] = []  # (id, query)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _FakeEngine

    def do_DELETE(self) -> None:  # noqa: N802 - http.server's name
        path, _, query = self.path.partition("?")
        cid = path.rsplit("/", 1)[-1]
        self.server.removed.append((cid, query))
        if cid in self.server.held:
            self.server.held.discard(cid)
            self.send_response(204)
            self.end_headers()
        else:
            body = b'{"message": "No such container: ' + cid.encode() + b'"}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def engine() -> Iterator[_FakeEngine]:
    server = _FakeEngine({"c-running", "c-created"})
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _host(engine: _FakeEngine) -> str:
    return f"tcp://127.0.0.1:{engine.server_address[1]}"


def test_what_is_left_is_what_was_named_and_not_removed() -> None:
    lines = ["+a\n", "+b\n", "-a\n", "+c\n", "+b\n", "-gone\n", "\n", "+\n"]
    assert left_over(lines) == ["b", "c"]
    assert left_over([]) == []


def test_removing_skips_what_is_gone_and_names_what_failed() -> None:
    asked: list[str] = []

    def remove(cid: str) -> None:
        asked.append(cid)
        if cid == "gone":
            raise docker.errors.NotFound("no such container")
        if cid == "busy":
            raise docker.errors.APIError("removal of container busy is already in progress")
        if cid == "refused":
            raise docker.errors.APIError("the engine said no")
        if cid == "unreachable":
            raise requests.exceptions.ConnectionError("connection refused")

    ids = ["gone", "busy", "refused", "ok", "unreachable"]
    failures = remove_all(ids, remove)
    assert asked == ids  # one failure stops none of the others
    assert [f.split(":")[0] for f in failures] == ["refused", "unreachable"]


def test_a_finished_kit_leaves_the_watchdog_nothing_to_do(engine) -> None:
    watchdog = Watchdog(_host(engine), API)
    watchdog.watch("c-running")
    watchdog.forget("c-running")  # the kit removed it itself
    watchdog.close()
    assert watchdog.proc.returncode == 0
    assert engine.removed == []  # it never even asked the engine


def test_a_kit_killed_with_minus_9_has_its_containers_removed(engine) -> None:
    kit = subprocess.Popen(
        [sys.executable, str(FAKES / "watched_kit.py"), _host(engine), API]
        + ["+c-running", "+c-done", "-c-done", "+c-created"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert kit.stdout is not None
        word, pid = kit.stdout.readline().split()
        assert word == "ready"
        watchdog_pid = int(pid)
        # a session of its own: a signal to the kit's whole group leaves it be
        assert os.getsid(watchdog_pid) == watchdog_pid != os.getsid(kit.pid)
        os.killpg(kit.pid, signal.SIGKILL)
        kit.wait(10)
        deadline = time.monotonic() + 10
        while engine.held and time.monotonic() < deadline:
            time.sleep(0.05)
        assert engine.held == set()
        assert sorted(cid for cid, _ in engine.removed) == ["c-created", "c-running"]
        assert all("force=True" in query and "v=True" in query for _, query in engine.removed)
        # and then it ends
        while time.monotonic() < deadline:
            try:
                os.kill(watchdog_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the watchdog outlived its work")
    finally:
        if kit.poll() is None:
            kit.kill()
            kit.wait()
        if kit.stdout is not None:
            kit.stdout.close()

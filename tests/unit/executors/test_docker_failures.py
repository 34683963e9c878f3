"""No exception of the Docker SDK reaches the user: whatever the engine raises, at any call the
Docker executor or an `images` command makes, becomes a UserError that says what to do (or the
call goes on, where the failure is one it expects), never a traceback."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import docker.errors
import pytest
import requests
from click.testing import CliRunner

from kit.cli.main import main
from kit.errors import UserError
from kit.executors.base import Mount, RunSpec
from kit.executors.docker import connection, executor
from kit.executors.docker.engine_images import DockerImages
from kit.executors.docker.executor import DockerExecutor
from kit.executors.docker.kit_images import PROGRAM_LABEL, PROGRAM_SHA256_LABEL
from tests.fakes.docker_engine import LINK, FakeEngine, FakeImage, api_error

PROGRAM = b"#!/bin/sh\necho mica\n"
# everything the SDK raises, as the engine or the connection would
ERRORS: dict[str, BaseException] = {
    "refused": api_error("something the kit has never seen"),
    "gone": api_error("No such container: c", 404, docker.errors.NotFound),
    "no image": api_error("No such image: m:1", 404, docker.errors.ImageNotFound),
    "no program": api_error(
        "failed to create task for container: OCI runtime create failed: exec: "
        '"/opt/mica/bin/mica": stat /opt/mica/bin/mica: no such file or directory: unknown'
    ),
    "no engine": docker.errors.DockerException("Error while fetching server API version"),
    "connection": requests.exceptions.ConnectionError("Connection aborted."),
    "timeout": requests.exceptions.ReadTimeout("Read timed out. (read timeout=60)"),
    "container": docker.errors.ContainerError("c" * 64, 1, "mica", "m:1", b"boom"),
    "build": docker.errors.BuildError("The command returned a non-zero code: 1", []),
}


def images() -> dict[str, FakeImage]:
    mica = FakeImage(
        labels={
            PROGRAM_LABEL: "/opt/mica/bin/mica",
            PROGRAM_SHA256_LABEL: hashlib.sha256(PROGRAM).hexdigest(),
        },
        files={"/opt/mica/bin/mica": PROGRAM, "/usr/bin/python": LINK.encode() + b"python3"},
    )
    return {"m:1": mica, "ghcr.io/o/m:1": mica}


def run_spec(tmp: Path) -> RunSpec:
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    mounts = (Mount("work", work, read_only=False),)
    argv = ("/opt/mica/bin/mica",)
    return RunSpec("run 1 of m/f32", argv, mounts=mounts, image="m:1", trace_libraries=True)


# each public method of the executor that asks the engine anything, as the kit calls it
CALLS: dict[str, Callable[[DockerExecutor, Path], object]] = {
    "run": lambda ex, tmp: ex.run(run_spec(tmp), tmp / "run"),
    "which": lambda ex, tmp: ex.which("nsys", "m:1", tmp / "which"),
    "profiler": lambda ex, tmp: ex.profiler("m:1", tmp / "nsys"),
    "sweep": lambda ex, tmp: ex.sweep(),
    "finish": lambda ex, tmp: ex.finish(),
    "drop_cache": lambda ex, tmp: ex.drop_cache(),
    "versions": lambda ex, tmp: ex.versions(),
    "host": lambda ex, tmp: ex.host(),
    # the executor's images (kit.executors.docker.engine_images), as the kit calls them
    "images.footprint": lambda ex, tmp: ex.images.footprint("m:1", tmp / "fp", lambda _: None),
    "images.id_of": lambda ex, tmp: ex.images.id_of("m:1"),
    "images.info": lambda ex, tmp: ex.images.info("m:1"),
    "images.labels": lambda ex, tmp: ex.images.labels("m:1"),
    "images.files": lambda ex, tmp: ex.images.files("m:1", ["/opt/mica/bin", "python"]),
    "images.pull": lambda ex, tmp: ex.images.pull("ghcr.io/o/m:1"),
    "images.runner": lambda ex, tmp: ex.images.runner(),
}
# the methods that never reach the engine
ENGINE_FREE = {
    "where",
    "images.footprint_ratio",
    "use_series",
    "close_watchdog",
    "close_readers",
    "running",
    # asks the engine for its own container's mounts, and falls back on any error of it: a path
    # the caller says another way, never a failure (kit.cli.shown)
    "host_path",
}


class _Watchdog:
    """The series' watchdog process (kit.executors.docker.watchdog) left out: nothing here
    outlives the test, and it would ask a real engine to remove fake containers."""

    def __init__(self, host: str | None, api_version: str | None) -> None:
        pass

    def watch(self, container_id: str) -> None:
        pass

    def forget(self, container_id: str) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _no_watchdog(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "Watchdog", _Watchdog)


def test_every_method_that_asks_the_engine_is_in_the_table() -> None:
    public = {n for n, v in vars(DockerExecutor).items() if not n.startswith("_") and callable(v)}
    public |= {"which"}  # the interface's own, which runs a container
    public |= {f"images.{n}" for n, v in vars(DockerImages).items() if not n.startswith("_")}
    assert public == set(CALLS) | ENGINE_FREE


def _escaped(call: Callable[[], object], engine: FakeEngine) -> list[str]:
    """What went wrong with `call` failing at each place it asks the engine, with each error."""
    call()
    places = list(engine.calls)  # none for the profiler, unless the kit runs in a container
    found = []
    for k, place in enumerate(places):
        for name, error in ERRORS.items():
            engine.calls.clear()
            engine.fail_at, engine.error = k, error
            try:
                call()
            except UserError as e:
                if not e.fix or "Traceback" in str(e):
                    found.append(f"{place} (call {k}), {name}: a UserError with no fix: {e}")
            except BaseException as e:  # noqa: BLE001 - what the test looks for
                found.append(f"{place} (call {k}), {name}: {type(e).__name__}: {e}")
    return found


@pytest.mark.parametrize("method", sorted(CALLS))
def test_an_engine_failure_anywhere_in_the_executor_is_a_user_error(
    method: str, tmp_path: Path
) -> None:
    engine = FakeEngine(images())
    ex = DockerExecutor(engine.client(), "s")  # type: ignore[arg-type]
    try:
        escaped = _escaped(lambda: CALLS[method](ex, tmp_path), engine)
    finally:
        ex.close_readers()
    assert not escaped, "\n".join(escaped)


COMMANDS = {
    "images build": lambda tmp: ["images", "build", "--only", "mica", "--contender", tmp / "p"],
    "images push": lambda tmp: ["images", "push", "--registry", "127.0.0.1:5000/ci", "--tag", "t"],
    "footprint": lambda tmp: ["footprint", tmp / "fp", "--pytorch", "m:1", "--mica", "m:1"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_engine_failure_in_an_images_command_is_a_user_error(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "p").write_bytes(PROGRAM)
    monkeypatch.chdir(tmp_path)  # images build writes its statements into ./attestations
    engine = FakeEngine({**images(), "micakit-mica:t": images()["m:1"]})
    monkeypatch.setattr(connection, "connect", lambda host=None, *a: engine.client())
    args = [str(a) for a in COMMANDS[command](tmp_path)]

    def call() -> None:
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        if result.exit_code != 0:
            assert result.exit_code == 2, result.output
            assert "fix:" in result.output, result.output

    escaped = _escaped(call, engine)
    assert not escaped, "\n".join(escaped)

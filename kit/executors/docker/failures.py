"""The engine's failures in the user's words: no exception of the Docker SDK reaches the user.

Whatever the SDK raises (the engine's refusal, an image or container it no longer has, a
connection that broke or timed out) is turned, where it leaves this package, into a `UserError`
that says what went wrong and what to do: `guard` around each of the executor's methods and
each `images` command. A series stopped by one keeps every finished run, and `--resume` goes on.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import docker.errors
import requests

from kit.errors import UserError
from kit.executors.docker.building import BUILD_FIX
from kit.executors.docker.connection import NO_ENGINE_FIX, explain
from kit.executors.docker.containers import engine_error

# everything the SDK raises: its own errors, and those of requests underneath (a broken or
# timed-out connection), which it lets through
ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
RESUME = "then resume (`--resume DIR`): every finished run is kept"
F = TypeVar("F", bound=Callable[..., Any])


def user_error(e: BaseException, doing: str) -> UserError:
    """What the user must fix when the engine failed while the kit was `doing` something."""
    if isinstance(e, docker.errors.ImageNotFound):
        return UserError(
            f"{doing}: the Docker engine has no such image ({_first(explain(e))})",
            f"{BUILD_FIX}, or name a built image (`docker images` lists them)",
        )
    if isinstance(e, docker.errors.NotFound):
        return UserError(
            f"{doing}: the Docker engine no longer has what the kit made ({_first(explain(e))})",
            "let nothing remove micakit's containers or volumes while it runs (`docker rm -f`, "
            f"`docker container prune`, `docker volume prune`), {RESUME}",
        )
    if isinstance(e, docker.errors.APIError):
        text = explain(e)
        known = engine_error(doing, text)
        if known is not None:
            return known
        status = f"; HTTP {e.status_code}" if e.status_code else ""
        return UserError(
            f"{doing}: the Docker engine refused ({_first(text)}{status})",
            "the engine's own words say what is wrong; `docker info` and the engine's log "
            f"(`journalctl -u docker`) say more. Fix it, {RESUME}",
        )
    if isinstance(e, docker.errors.ContainerError):
        said = _first(e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else "")
        return UserError(
            f"{doing}: a container of {e.image} exited with status {e.exit_status} ({said})",
            "its output says why; fix that, then try again",
        )
    if isinstance(e, docker.errors.BuildError):
        return UserError(
            f"{doing}: the image's build failed ({_first(str(e.msg))})",
            "the build's own output says why; fix what it names, then build again",
        )
    if isinstance(e, requests.exceptions.Timeout):
        return UserError(
            f"{doing}: the Docker engine did not answer in time ({_first(str(e))})",
            f"a stuck or overloaded engine: check `docker info` (restart dockerd if it hangs), "
            f"{RESUME}",
        )
    # a broken connection, or the client's own failure (no engine, a bad DOCKER_HOST, TLS)
    return UserError(
        f"{doing}: the Docker engine stopped answering ({_first(str(e)) or type(e).__name__})",
        f"{NO_ENGINE_FIX}; {RESUME}",
    )


def _first(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else ""


@contextlib.contextmanager
def guard(doing: str) -> Iterator[None]:
    """Any SDK exception inside becomes the UserError that says what to do."""
    try:
        yield
    except ENGINE_ERRORS as e:
        raise user_error(e, doing) from None


def guarded(doing: str) -> Callable[[F], F]:
    """`guard` around a whole method."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            with guard(doing):
                return method(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap

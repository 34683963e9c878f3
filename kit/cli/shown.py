"""Paths as the user's shell sees them, for what the kit prints at the end of a command.

On the host a path is the user's own (relative to the working folder where it lies under it).
In the runner image (`docker run ... micakit`, Dockerfile.runner sets MICAKIT_RUNNER) a path
such as /results/L4 exists only in the container: the host's path is given where it can be
known (the executor reads its own container's mounts through the Docker SDK, or
MICAKIT_HOST_RESULTS names the host folder mounted at /results), else the path relative to
the mounted results folder, as the README's `-v "$PWD/results:/results"` makes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from kit.sides.by_hand import in_container

HOST_RESULTS_ENV = "MICAKIT_HOST_RESULTS"  # the host folder the runner mounts at /results
MOUNTED = Path("/results")  # where README's runner line mounts the results folder
HOST_FOLDER = Path("results")  # README's `-v "$PWD/results:/results"`: relative to $PWD


def shown(path: Path | str, host_path: Callable[[Path], str | None] | None = None) -> str:
    """`path` as the user's shell names it; `host_path`: the executor's reading of its mounts."""
    p = Path(path).absolute()
    if in_container():
        found = host_path(p) if host_path else None
        if found:
            return found
        try:
            below = p.relative_to(MOUNTED)
        except ValueError:
            return str(p)  # not under the results folder: only the container has it
        host = os.environ.get(HOST_RESULTS_ENV)
        return str((Path(host) if host else HOST_FOLDER) / below)
    try:
        return str(p.relative_to(Path.cwd().absolute())) or "."
    except ValueError:
        return str(p)


def mapper(host_path: Callable[[Path], str | None] | None = None) -> Callable[[str], str]:
    """`shown` for paths given as text (the options a series recorded)."""
    return lambda path: shown(path, host_path)

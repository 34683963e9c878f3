"""What to do when the kit cannot download a file it needs (nanoGPT, tiny Shakespeare).

On a machine, the fix names the cache file to save it as. In the runner image (`docker run --rm
... micakit`) that cache lives in the container and vanishes with it, so there the fix says to
mount the user's own copy and name the mounted path instead (README "A series on a GPU").
"""

from __future__ import annotations

import os
from pathlib import Path

RUNNER_ENV = "MICAKIT_RUNNER"  # Dockerfile.runner sets it to 1


def in_container() -> bool:
    """Whether the kit runs in its runner image (not merely in some container: a CI machine
    may be one, with a cache that lasts)."""
    return os.environ.get(RUNNER_ENV) == "1"


def input_fix(url: str, cache_path: Path) -> str:
    if in_container():
        return (
            f"download {url} on the host, mount it into the runner (-v "
            "PATH/TO/input.txt:/data/input.txt:ro) and pass --input /data/input.txt: a file "
            "saved in this container's cache vanishes with the container"
        )
    return f"download {url} by hand and save it as {cache_path}, or pass --input PATH naming it"


def nanogpt_fix(url: str, commit: str, cache_path: Path) -> str:
    clone = f"clone https://github.com/karpathy/nanoGPT and check out {commit}"
    if in_container():
        return (
            f"on the host, {clone}; mount it into the runner (-v PATH/TO/nanoGPT:/nanogpt:ro) "
            "and pass --nanogpt /nanogpt: a download saved in this container's cache vanishes "
            "with the container"
        )
    return (
        f"download {url} by hand and save it as {cache_path}, "
        f"or {clone} and pass --nanogpt PATH naming that checkout"
    )

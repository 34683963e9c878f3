"""What each rented machine runs: the runner image by digest, nanoGPT at its pinned commit and
tiny Shakespeare fetched on the machine (kit/files/cloud-series.sh, with its settings here).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kit.errors import UserError
from kit.sides import data, nanogpt

SCRIPT = "cloud-series.sh"  # in kit/files
REMOTE_SCRIPT = "~/.micakit/cloud-series.sh"
REMOTE_CONTENDER = "~/.micakit/contender"
REMOTE_RESULTS = "micakit/results"  # under the machine's home: where each series writes
_DIGEST = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class Images:
    """The runner and PyTorch's measured image, each named by its registry digest."""

    runner: str
    pytorch: str


def images(digests: Path | None, runner: str | None, pytorch: str | None) -> Images:
    """The images by digest: from `images push`'s digests.json, or named one by one."""
    if digests is not None:
        try:
            pushed = json.loads(Path(digests).read_text("utf-8"))["images"]
            runner = runner or pushed["runner"]["pinned"]
            pytorch = pytorch or pushed["pytorch"]["pinned"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise UserError(
                f"{digests} is not a digests.json of `micakit images push` ({e})",
                "name the release's digests.json, or --image and --pytorch-image by digest",
            ) from None
    for option, ref in (("--image", runner), ("--pytorch-image", pytorch)):
        if not ref or not _DIGEST.match(ref):
            raise UserError(
                f"{option} {ref or '(not given)'} does not name an image by digest",
                f"give {option} REPOSITORY@sha256:<64 hex digits> (as `micakit images push` "
                "prints it), or --digests digests.json",
            )
    assert runner is not None and pytorch is not None
    return Images(runner, pytorch)


def script() -> Path:
    """The machine's script, as installed with the kit."""
    return Path(str(resources.files("kit") / "files" / SCRIPT))


def run_command() -> str:
    return f"bash {REMOTE_SCRIPT}"


def environment(
    imgs: Images, name: str, contender: Path | None, series_args: Sequence[str]
) -> dict[str, str]:
    """The script's settings for the series `name`."""
    return {
        "MICAKIT_RUNNER": imgs.runner,
        "MICAKIT_PYTORCH": imgs.pytorch,
        # D2: nanoGPT at its pinned commit; the series checks its files' SHA-256
        "MICAKIT_NANOGPT_URL": nanogpt.ARCHIVE_URL.format(commit=nanogpt.COMMIT),
        "MICAKIT_NANOGPT_COMMIT": nanogpt.COMMIT,
        "MICAKIT_INPUT_URL": data.INPUT_URL,
        "MICAKIT_INPUT_SHA256": data.INPUT_SHA256,
        "MICAKIT_NAME": name,
        "MICAKIT_CONTENDER": REMOTE_CONTENDER if contender else "",
        "MICAKIT_SERIES_ARGS": shlex.join(series_args),
    }


def mounts(contender: Path | None) -> Mapping[str, str]:
    """The files SkyPilot copies onto the machine before the run."""
    found = {REMOTE_SCRIPT: str(script())}
    if contender is not None:
        if not contender.is_file():
            raise UserError(f"the contender program {contender} is not a file", "--contender PATH")
        found[REMOTE_CONTENDER] = str(contender.resolve())
    return found

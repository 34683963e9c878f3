"""The measured images (§8) and the runner image: their build contexts, names and footprints.
The PyTorch image's context (nanoGPT's trees) is the side's: kit.sides.workspace.image_context.

Tags carry the kit's version and the protocol's hash, so an image says what it was built for:
    micakit-pytorch:<version>-<protocol12>   Python, torch and numpy, nanoGPT's two trees, g++
    micakit-mica:<version>-<protocol12>      the contender program and the libraries it opens
    micakit:<version>-<protocol12>           the kit (the runner), entry point `micakit`

`images push` gives them to a registry under the same names (REGISTRY/micakit:TAG, ...) and
records each one's digest, which names it wherever it is pulled.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from kit import __version__
from kit.errors import UserError
from kit.protocol.load import FILES, Protocol
from kit.results.store import sha256_file

PYTORCH, MICA, RUNNER = "pytorch", "mica", "runner"
NAMES = {PYTORCH: "micakit-pytorch", MICA: "micakit-mica", RUNNER: "micakit"}
DOCKERFILES = {PYTORCH: "Dockerfile.pytorch", MICA: "Dockerfile.mica", RUNNER: "Dockerfile.runner"}
MICA_PROGRAM_DIR = "/opt/mica/bin"  # where Dockerfile.mica puts the program
# the labels Dockerfile.mica records the program by: its path in the image, and its SHA-256
PROGRAM_LABEL, PROGRAM_SHA256_LABEL = "org.micakit.program", "org.micakit.program.sha256"
PUSHED_SCHEMA = 1  # the version of `images push`'s record (digests.json)


def tag(protocol: Protocol) -> str:
    return f"{__version__}-{protocol.sha256[:12]}"


def ref(kind: str, protocol: Protocol, suffix: str | None = None) -> str:
    return f"{NAMES[kind]}:{suffix or tag(protocol)}"


def runner_context(dest: Path) -> Path:
    """The runner's build context: the kit's package as installed (its protocol files and
    Dockerfiles inside it), with the project file and README it installs from."""
    package = Path(str(resources.files("kit")))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(package, dest / "kit", ignore=ignore)  # links followed: kit/files whole
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(FILES / name, dest / name)
    return dest


def mica_context(program: Path, libs: Path | None, dest: Path) -> dict[str, str]:
    """The contender program and the NVIDIA libraries it opens (amendment 2's table says which)."""
    if not program.is_file():
        raise UserError(
            f"the contender program {program} is not a file",
            "name it with --contender PATH to build the Mica image",
        )
    shutil.copy2(program, dest / program.name)
    (dest / "libs").mkdir()
    names = []
    if libs:
        for lib in sorted(Path(libs).iterdir()):
            shutil.copy2(lib, dest / "libs" / lib.name, follow_symlinks=True)
            names.append(lib.name)
    return {
        "PROGRAM": program.name,
        "PROGRAM_SHA256": sha256_file(program),
        "LIBS": ",".join(names),
    }

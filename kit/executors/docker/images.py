"""The measured images (§8) and the runner image: their build contexts, names and footprints.

Tags carry the kit's version and the protocol's hash, so an image says what it was built for:
    micakit-pytorch:<version>-<protocol12>   Python, torch and numpy, nanoGPT's two trees, g++
    micakit-mica:<version>-<protocol12>      the contender program and the libraries it opens
    micakit:<version>-<protocol12>           the kit (the runner), entry point `micakit`

`images push` gives them to a registry under the same names (REGISTRY/micakit:TAG, ...) and
records each one's digest, which names it wherever it is pulled.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from kit import __version__
from kit.engine import versions
from kit.errors import UserError
from kit.protocol.load import FILES, Protocol
from kit.sides import nanogpt, workspace

PYTORCH, MICA, RUNNER = "pytorch", "mica", "runner"
NAMES = {PYTORCH: "micakit-pytorch", MICA: "micakit-mica", RUNNER: "micakit"}
DOCKERFILES = {PYTORCH: "Dockerfile.pytorch", MICA: "Dockerfile.mica", RUNNER: "Dockerfile.runner"}
MICA_PROGRAM_DIR = "/opt/mica/bin"  # where Dockerfile.mica puts the program
PUSHED_SCHEMA = 1  # the version of `images push`'s record (digests.json)


def tag(protocol: Protocol) -> str:
    return f"{__version__}-{protocol.sha256[:12]}"


def ref(kind: str, protocol: Protocol, suffix: str | None = None) -> str:
    return f"{NAMES[kind]}:{suffix or tag(protocol)}"


def pytorch_context(protocol: Protocol, checkout: str | None, dest: Path) -> dict[str, str]:
    """nanoGPT's shipped and patched trees, checked, as the image's /opt/nanogpt."""
    src = workspace.source(protocol, checkout)
    tree = dest / "nanogpt"
    nanogpt.copy_run_files(src, tree / workspace.SHIPPED)
    nanogpt.apply_patch(src, protocol.beside(protocol.nanogpt.patch), tree / workspace.PATCHED)
    for sub in (workspace.SHIPPED, workspace.PATCHED):
        for model in protocol.models.values():
            if not (tree / sub / model.config).exists():
                shutil.copyfile(protocol.beside(model.config), tree / sub / model.config)
    shutil.copyfile(protocol.beside(protocol.nanogpt.patch), tree / "train.patch")
    return {
        "TORCH_VERSION": protocol.pytorch.torch,
        "NUMPY_VERSION": protocol.pytorch.numpy,
        "NANOGPT_COMMIT": protocol.nanogpt.commit,
    }


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
    return {"PROGRAM": program.name, "LIBS": ",".join(names)}


def build(
    client,
    protocol: Protocol,
    kinds: list[str],
    *,
    base: str | None = None,
    wheelhouse: Path | None = None,
    contender: Path | None = None,
    libs: Path | None = None,
    nanogpt_checkout: str | None = None,
    suffix: str | None = None,
    on_line: Callable[[str], None] | None = None,
) -> dict[str, str]:
    """Build the images named in `kinds`; returns each image's reference and id."""
    from kit.executors.docker import engine as dockerapi

    built = {}
    for kind in kinds:
        dockerfile = FILES / DOCKERFILES[kind]
        with tempfile.TemporaryDirectory(prefix=f"micakit-{kind}-") as tmp:
            context = Path(tmp)
            if kind == PYTORCH:
                args = pytorch_context(protocol, nanogpt_checkout, context)
            elif kind == MICA:
                if contender is None:
                    raise UserError(
                        "the Mica image holds the contender program, and none was named",
                        "pass --contender PATH (and --libs DIR for the libraries it opens)",
                    )
                args = mica_context(Path(contender), libs, context)
            else:
                # the runner has no .git: the kit's commit travels as a build argument, and
                # becomes a label and MICAKIT_COMMIT, which versions.kit_commit() reads there
                context, args = runner_context(context), {"KIT_COMMIT": versions.kit_commit()}
            if base:
                args["BASE"] = base
            name = ref(kind, protocol, suffix)
            image_id = dockerapi.build_image(
                client, dockerfile, context, name, args, wheelhouse, on_line
            )
            dockerapi.tag_image(client, image_id, NAMES[kind], "latest")
            built[name] = image_id
    return built


def built_kinds(client, protocol: Protocol, suffix: str | None = None) -> list[str]:
    """The images built under this tag, in the order they are built."""
    from kit.executors.docker import engine as dockerapi

    kinds = (PYTORCH, MICA, RUNNER)
    return [k for k in kinds if dockerapi.image_id(client, ref(k, protocol, suffix)) is not None]


def push(
    client,
    protocol: Protocol,
    registry: str,
    kinds: list[str] | None = None,
    *,
    suffix: str | None = None,
    also: tuple[str, ...] = (),
    on_line: Callable[[str], None] | None = None,
) -> dict:
    """Push the images to `registry` (HOST[:PORT]/NAMESPACE) under their tag and the tags in
    `also`; the record of what was pushed, each image with its registry digest.

    `kinds`: default, every image built under the tag (the Mica image only where a contender
    was given to `images build`)."""
    from kit.executors.docker import registry as registry_mod

    registry = registry_mod.check_registry(registry)
    image_tag = registry_mod.check_tag(suffix or tag(protocol))
    tags = list(dict.fromkeys([image_tag, *(registry_mod.check_tag(t) for t in also)]))
    if kinds is None:
        kinds = built_kinds(client, protocol, suffix)
        if not kinds:
            raise UserError(
                f"no image of micakit is built under the tag {image_tag}",
                "build them first: `micakit images build` (scripts/build-images.sh in a "
                "checkout), or name the tag they were built under with --tag",
            )
    pushed = {}
    for kind in kinds:
        local = ref(kind, protocol, suffix)
        repository = f"{registry}/{NAMES[kind]}"
        digest = registry_mod.push(client, local, repository, tags, on_line)
        pushed[kind] = {
            "local": local,
            "image_id": client.api.inspect_image(local)["Id"],
            "repository": repository,
            "tags": tags,
            "digest": digest,
            "pinned": f"{repository}@{digest}",  # what rerun.sh and `docker pull` name
        }
    return {
        "schema": PUSHED_SCHEMA,
        "kit_version": __version__,
        "protocol_sha256": protocol.sha256,
        "registry": registry,
        "images": pushed,
    }

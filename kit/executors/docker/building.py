"""Building the measured images and the runner through the engine, and looking them up.

What goes into each image's build context, and its name, is `kit.executors.docker.kit_images`'s
(the PyTorch image's, `kit.sides.workspace`'s, passed in);
this module sends a context to the engine's builder, streams its output, and explains a
failed build.
"""

from __future__ import annotations

import io
import re
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import docker
import docker.errors
import docker.utils.build

from kit import __version__, kit_commit
from kit.errors import UserError
from kit.executors.docker import kit_images, provenance, registries, sbom_packages
from kit.executors.docker.connection import explain
from kit.protocol.load import FILES, Protocol

BUILD_FIX = "`micakit images build` builds it"
# the command that builds each measured image, as the CLI spells it (PROGRAM: the contender)
BUILD_COMMANDS = {
    "pytorch": "micakit images build --only pytorch",
    "mica": "micakit images build --only mica --contender PROGRAM",
}
_SETUP_FIX = (
    "with no image registry in reach, `bash scripts/ci-setup.sh` builds the local base "
    "micakit-base:bookworm from Debian's archive; pass it as build arg BASE"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the builder colours a step's stderr


def build_image(
    client: docker.DockerClient,
    dockerfile: Path,
    context_dir: Path,
    tag: str,
    buildargs: Mapping[str, str] | None = None,
    wheelhouse: Path | None = None,
    on_line: Callable[[str], None] | None = None,
    nocache: bool = False,
) -> str:
    """Build `dockerfile` with the files of `context_dir` and return the image's id.

    The context honours `context_dir/.dockerignore`; `wheelhouse`, when given, is added as the
    context's `wheelhouse/` folder (any of context_dir's own is left out), so the Dockerfiles
    install from it with no package index; without it, `wheelhouse/` is an empty folder and
    pip uses the index. The build's output goes to `on_line` as it comes; `nocache` builds
    every step again (a rebuild that checks the image is reproducible).
    """
    if not dockerfile.is_file():
        raise UserError(f"no Dockerfile at {dockerfile}")
    if not context_dir.is_dir():
        raise UserError(f"the build context {context_dir} is not a folder")
    buildargs = dict(buildargs or {})
    tail: list[str] = []
    image_id = None
    with tempfile.TemporaryFile(prefix="micakit-context-") as context:
        _write_context(context, dockerfile, context_dir, wheelhouse)
        context.seek(0)
        # the legacy builder (POST /build) is what the API offers: BuildKit needs a session
        error = None
        try:
            stream = client.api.build(
                fileobj=context,
                custom_context=True,
                dockerfile=dockerfile.name,
                tag=tag,
                buildargs=buildargs,
                rm=True,
                forcerm=True,
                nocache=nocache,
                decode=True,
                timeout=None,
                use_config_proxy=False,
            )
        except docker.errors.APIError as e:
            if e.response is not None:
                e.response.close()
            raise _build_failed(client, dockerfile, tag, buildargs, explain(e), tail) from None
        # read to the end whatever comes, so the response closes with its stream
        for item in stream:
            if "stream" in item:
                for line in _ANSI.sub("", item["stream"]).splitlines():
                    if not line.strip():
                        continue  # the builder sends each line's newline on its own
                    tail = (tail + [line])[-40:]
                    if on_line is not None:
                        on_line(line)
            elif "aux" in item and "ID" in item["aux"]:
                image_id = item["aux"]["ID"]
            elif "error" in item and error is None:
                error = str(item["error"])
        if error is not None:
            raise _build_failed(client, dockerfile, tag, buildargs, error, tail)
    return image_id or client.api.inspect_image(tag)["Id"]


def _write_context(
    f: IO[bytes], dockerfile: Path, context_dir: Path, wheelhouse: Path | None
) -> None:
    patterns = []
    ignore = context_dir / ".dockerignore"
    if ignore.is_file():
        lines = (line.strip() for line in ignore.read_text().splitlines())
        patterns = [line for line in lines if line and not line.startswith("#")]
    included = docker.utils.build.exclude_paths(str(context_dir), patterns)
    with tarfile.open(fileobj=f, mode="w") as tar:
        for rel in sorted(included):
            top = rel.split("/", 1)[0]
            if top == "wheelhouse" or rel == dockerfile.name:
                continue
            tar.add(context_dir / rel, arcname=rel, recursive=False)
        tar.add(dockerfile.resolve(), arcname=dockerfile.name)  # kit/files holds links to it
        info = tarfile.TarInfo("wheelhouse")
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
        if wheelhouse is not None:
            if not wheelhouse.is_dir():
                raise UserError(
                    f"the wheelhouse {wheelhouse} is not a folder",
                    "`bash scripts/ci-setup.sh` fills wheelhouse/ with the wheels the images need",
                )
            for wheel in sorted(wheelhouse.glob("*.whl")):
                tar.add(wheel, arcname=f"wheelhouse/{wheel.name}")


def _build_failed(
    client: docker.DockerClient,
    dockerfile: Path,
    tag: str,
    buildargs: Mapping[str, str],
    error: str,
    tail: list[str],
) -> UserError:
    shown = "\n".join(f"    {line}" for line in tail[-20:]) or "    (no output)"
    message = f"building {tag} from {dockerfile.name} failed: {error.strip()}\n{shown}"
    base = buildargs.get("BASE") or _default_base(dockerfile)
    at_from = any(line.startswith("Step 1/") for line in tail[-3:]) or not tail
    if base and at_from and not image_exists(client, base):
        return UserError(
            f"building {tag}: the base image {base} is not here and could not be pulled "
            f"({error.strip()})",
            _SETUP_FIX,
        )
    return UserError(message, "the lines above are the build's own; fix what they name")


def _default_base(dockerfile: Path) -> str | None:
    m = re.search(r"^ARG BASE=(\S+)", dockerfile.read_text(), re.MULTILINE)
    return m.group(1) if m else None


def _base(client: docker.DockerClient, ref: str) -> dict[str, str]:
    """The base image a build used: its reference, id and registry digests (none where it
    was built here)."""
    try:
        found = client.api.inspect_image(ref)
    except docker.errors.ImageNotFound:
        return {"ref": ref}
    return {"ref": ref, "id": found["Id"], "repo_digests": " ".join(found.get("RepoDigests") or [])}


def _debian(client: docker.DockerClient, ref: str) -> set[str]:
    """The purls of the Debian packages installed in image `ref` (none where it has no dpkg,
    or is not here), read from a container created from it and never started."""
    if not ref or not image_exists(client, ref):
        return set()
    container = client.api.create_container(
        ref, entrypoint=["/micakit-never-started"], network_disabled=True
    )["Id"]
    texts = {}
    try:
        for path in (sbom_packages.DPKG_STATUS, *sbom_packages.OS_RELEASE):
            try:
                chunks, _ = client.api.get_archive(container, path)
            except docker.errors.NotFound:
                continue
            with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
                member = tar.next()  # a link (/etc/os-release) is read at its target
                f = tar.extractfile(member) if member is not None and member.isfile() else None
                if f is not None:
                    texts[path] = f.read().decode("utf-8", "replace")
    finally:
        client.api.remove_container(container, force=True)
    return {p.purl for p in sbom_packages.debian(texts, {})}


def image_exists(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.api.inspect_image(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


def tag_image(client: docker.DockerClient, image_id: str, repository: str, tag: str) -> None:
    """Give a built image a second name (e.g. `latest` beside the versioned tag)."""
    client.api.tag(image_id, repository, tag)


def image_id(client: docker.DockerClient, ref: str) -> str | None:
    """The id of the image `ref` names, or None where the engine has no such image."""
    try:
        return client.api.inspect_image(ref)["Id"]
    except docker.errors.ImageNotFound:
        return None


def build_images(
    client: docker.DockerClient,
    protocol: Protocol,
    kinds: list[str],
    *,
    base: str | None = None,
    wheelhouse: Path | None = None,
    contender: Path | None = None,
    libs: Path | None = None,
    pytorch_context: Callable[[Path], dict[str, str]] | None = None,
    suffix: str | None = None,
    on_line: Callable[[str], None] | None = None,
    attestations: Path | None = None,
    rebuild: bool = False,
) -> dict[str, str]:
    """Build the images named in `kinds`; returns each image's reference and id.

    `pytorch_context` writes the PyTorch image's context into a folder and returns its build
    arguments (kit.sides.workspace.image_context: nanoGPT's trees are the side's to make).
    `attestations`: the folder each image's provenance statement is written to. `rebuild`:
    every step built again, and no `latest` tag moved (the second build of a reproducibility
    check)."""
    built = {}
    for kind in kinds:
        dockerfile = FILES / kit_images.DOCKERFILES[kind]
        with tempfile.TemporaryDirectory(prefix=f"micakit-{kind}-") as tmp:
            context = Path(tmp)
            if kind == kit_images.PYTORCH:
                if pytorch_context is None:
                    raise ValueError("the PyTorch image's context was not given")
                args = pytorch_context(context)
            elif kind == kit_images.MICA:
                if contender is None:
                    raise UserError(
                        "the Mica image holds the contender program, and none was named",
                        "pass --contender PATH (and --libs DIR for the libraries it opens)",
                    )
                args = kit_images.mica_context(Path(contender), libs, context)
            else:
                # the runner has no .git: the kit's commit travels as a build argument, and
                # becomes a label and MICAKIT_COMMIT, which kit.kit_commit() reads there
                context, args = (
                    kit_images.runner_context(context),
                    {"KIT_COMMIT": kit_commit()},
                )
            if base:
                args["BASE"] = base
            name = kit_images.ref(kind, protocol, suffix)
            started = datetime.now(UTC)
            image_id = build_image(
                client, dockerfile, context, name, args, wheelhouse, on_line, rebuild
            )
            if not rebuild:
                tag_image(client, image_id, kit_images.NAMES[kind], "latest")
            built[name] = image_id
            if attestations is not None:
                base_ref = args.get("BASE") or _default_base(dockerfile) or ""
                wheels = sorted(wheelhouse.glob("*.whl")) if wheelhouse else []
                # the Debian packages the build fetched: in the image, not in its base
                apt = _debian(client, image_id) - _debian(client, base_ref)
                document = provenance.statement(
                    name, image_id, dockerfile, context, args, _base(client, base_ref), wheels,
                    started, apt,
                )  # fmt: skip
                path = attestations / provenance.file_name(kit_images.NAMES[kind])
                provenance.write(path, document)
    return built


def built_kinds(
    client: docker.DockerClient, protocol: Protocol, suffix: str | None = None
) -> list[str]:
    """The images built under this tag, in the order they are built."""
    kinds = (kit_images.PYTORCH, kit_images.MICA, kit_images.RUNNER)
    return [k for k in kinds if image_id(client, kit_images.ref(k, protocol, suffix)) is not None]


def push(
    client: docker.DockerClient,
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
    registry = registries.check_registry(registry)
    image_tag = registries.check_tag(suffix or kit_images.tag(protocol))
    tags = list(dict.fromkeys([image_tag, *(registries.check_tag(t) for t in also)]))
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
        local = kit_images.ref(kind, protocol, suffix)
        repository = f"{registry}/{kit_images.NAMES[kind]}"
        digest = registries.push(client, local, repository, tags, on_line)
        pushed[kind] = {
            "local": local,
            "image_id": client.api.inspect_image(local)["Id"],
            "repository": repository,
            "tags": tags,
            "digest": digest,
            "pinned": f"{repository}@{digest}",  # what rerun.sh and `docker pull` name
        }
    return {
        "schema_version": kit_images.PUSHED_SCHEMA,
        "kit_version": __version__,
        "protocol_sha256": protocol.sha256,
        "registry": registry,
        "images": pushed,
    }

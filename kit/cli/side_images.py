"""Each side's measured image, checked before any run (§8): it must be on the engine (pulled
where its name names a registry) and hold the program the side runs; what is wrong names the
command that builds the right one."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from kit.errors import UserError
from kit.executors.base import Images
from kit.executors.docker import kit_images
from kit.protocol.load import DEFAULT_PATH, Protocol
from kit.results import store
from kit.results.run_options import SideInputs


class ImageUnfit(UserError):
    """A side's measured image missing, or not holding the program the side runs (§8)."""


def image(
    images: Images,
    kind: str,
    p: Protocol,
    o: SideInputs,
    say: Callable[[str], None] | None = None,
) -> str:
    """The measured image of a side, which must exist; its id is recorded with the versions."""
    ref = (o.pytorch_image if kind == "pytorch" else o.mica_image) or kit_images.ref(kind, p)
    # an image that names its registry (ghcr.io/OWNER/micakit-pytorch:TAG) is pulled, as
    # `docker run` does
    if images.id_of(ref) is None and images.pull(ref, say) is None:
        raise ImageUnfit(
            f"the {kind} side's image {ref} is not on this Docker engine",
            f"build it with `{_build_command(kind, ref, p, o)}` (add --base "
            f"micakit-base:bookworm where no registry answers), or name another with "
            f"--{kind}-image, or use --executor local",
        )
    return ref


def pytorch_in_image(images: Images, ref: str, python: str, p: Protocol, o: SideInputs) -> None:
    """Before any run: every run of the PyTorch side starts `python` from its image's PATH
    (nanoGPT's trees are mounted), so the image must hold it."""
    if not images.files(ref, [python]):
        raise ImageUnfit(
            f"the pytorch side's image {ref} holds no `{python}` on its PATH, which every run "
            "of the side starts",
            f"build PyTorch's image with `{_build_command('pytorch', ref, p, o)}`, or name one "
            "that holds it with --pytorch-image",
        )


def contender_in_image(images: Images, ref: str, program: Path, p: Protocol, o: SideInputs) -> str:
    """Before any run: the contender's image must hold the program --contender names, the same
    by SHA-256; where the image holds it. Its build recorded the program in labels; an image
    built otherwise (by hand, or by an older kit) has its program folder read instead."""
    want = store.sha256_file(program)
    labels = images.labels(ref)
    path, recorded = (
        labels.get(kit_images.PROGRAM_LABEL),
        labels.get(kit_images.PROGRAM_SHA256_LABEL),
    )
    held = (
        {path: recorded} if path and recorded else images.files(ref, [kit_images.MICA_PROGRAM_DIR])
    )
    usual = f"{kit_images.MICA_PROGRAM_DIR}/{program.name}"
    same = sorted(where for where, sha in held.items() if sha == want)
    if same:
        # the same program under another name runs as the image holds it
        return usual if usual in same else same[0]
    holds = ", ".join(
        f"{where} {sha}" if sha.startswith("->") else f"{where} (SHA-256 {sha[:12]}…)"
        for where, sha in sorted(held.items())
    )
    holds = holds or f"nothing under {kit_images.MICA_PROGRAM_DIR}"
    raise ImageUnfit(
        f"the mica side's image {ref} does not hold the program --contender names, {program} "
        f"(SHA-256 {want[:12]}…): it holds {holds}",
        f"build the image from that program (with --libs DIR, the libraries it opens): "
        f"`{_build_command('mica', ref, p, o)}`, or name the program the image holds with "
        "--contender",
    )


def _build_command(kind: str, ref: str, p: Protocol, o: SideInputs) -> str:
    """The command that builds the image a series names for a side, under the name it uses
    (or, for a name of the user's own, the kit's name and the `docker tag` that gives it)."""
    words = ["micakit", "images", "build", "--only", kind]
    if kind == "mica":
        words += ["--contender", o.contender or "PROGRAM"]
    if p.path.resolve() != DEFAULT_PATH.resolve():
        words += ["--protocol", str(p.path)]  # the images' tag carries the protocol's hash
    name, _, tag = ref.rpartition(":")
    if name == kit_images.NAMES[kind] and tag != kit_images.tag(p):
        words += ["--tag", tag]
    if name != kit_images.NAMES[kind] and ref != kit_images.ref(kind, p):
        return f"{shlex.join(words)} && docker tag {kit_images.ref(kind, p)} {ref}"
    return shlex.join(words)

"""Before any run, each side's measured image must exist and hold the program the side runs:
for the contender, the program --contender names, compared by SHA-256 (§8). A mismatch is the
user's to fix, with the command that builds the right image."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kit.cli import assemble
from kit.errors import UserError
from kit.executors.docker.executor import DockerExecutor
from kit.executors.docker.kit_images import PROGRAM_LABEL, PROGRAM_SHA256_LABEL
from kit.protocol.load import load
from kit.results import documents
from kit.results.run_options import SideInputs
from kit.sides.side import ContenderSide
from tests.conftest import FAKE_NANOGPT, TEXT_INPUT, fake_nanogpt_protocol, write_protocol
from tests.fakes.docker_engine import LINK, FakeEngine, FakeImage

PROGRAM = b"#!/bin/sh\necho the contender\n"
OTHER = b"#!/bin/sh\necho another build\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _inputs(tmp_path: Path, **given: object) -> SideInputs:
    """A series' side inputs for shakespeare-char on the shipped text, with `given`."""
    shared = {"models": ("shakespeare-char",), "data_dir": str(tmp_path / "data")}
    return SideInputs(**shared, input=str(TEXT_INPUT), **given)  # type: ignore[arg-type]


def contender(tmp_path: Path, image: FakeImage, name: str = "mica") -> ContenderSide:
    program = tmp_path / name
    program.write_bytes(PROGRAM)
    p = load(write_protocol(tmp_path / "protocol.toml"))
    o = _inputs(tmp_path, sides=("contender",), contender=str(program), mica_image="m:1")
    ex = DockerExecutor(FakeEngine({"m:1": image}).client(), "s")  # type: ignore[arg-type]
    (side,) = assemble.build_sides(p, o, tmp_path / "work", ex)
    assert isinstance(side, ContenderSide)
    return side


def labelled(path: str, data: bytes) -> FakeImage:
    labels = {PROGRAM_LABEL: path, PROGRAM_SHA256_LABEL: sha(data)}
    return FakeImage(labels=labels, files={path: data})


def test_the_program_the_image_recorded_is_the_one_named(tmp_path: Path) -> None:
    side = contender(tmp_path, labelled("/opt/mica/bin/mica", PROGRAM))
    assert side.image_program == "/opt/mica/bin/mica"


def test_the_same_program_under_another_name_runs_as_the_image_holds_it(tmp_path: Path) -> None:
    # built from mica-v2, named as /results/mica: the same bytes, so the image's path runs
    side = contender(tmp_path, labelled("/opt/mica/bin/mica-v2", PROGRAM))
    assert side.image_program == "/opt/mica/bin/mica-v2"
    # an image built otherwise (no labels) has its program folder read
    unlabelled = FakeImage(files={"/opt/mica/bin/mica-v2": PROGRAM})
    assert contender(tmp_path, unlabelled).image_program == "/opt/mica/bin/mica-v2"


@pytest.mark.parametrize(
    ("image", "holds"),
    [
        (labelled("/opt/mica/bin/mica", OTHER), f"/opt/mica/bin/mica (SHA-256 {sha(OTHER)[:12]}"),
        (FakeImage(files={"/opt/mica/bin/mica-old": OTHER}), "/opt/mica/bin/mica-old (SHA-256"),
        (FakeImage(files={"/usr/bin/python3": b"x"}), "nothing under /opt/mica/bin"),
    ],
)
def test_an_image_of_another_program_is_refused_before_any_run(
    tmp_path: Path, image: FakeImage, holds: str
) -> None:
    with pytest.raises(UserError) as e:
        contender(tmp_path, image)
    assert "does not hold the program --contender names" in e.value.message
    assert sha(PROGRAM)[:12] in e.value.message and holds in e.value.message
    program = tmp_path / "mica"
    build = f"micakit images build --only mica --contender {program} --protocol "
    assert build in (e.value.fix or "")


def test_a_pytorch_image_without_python_is_refused_before_any_run(tmp_path: Path) -> None:
    p = load(fake_nanogpt_protocol(tmp_path / "protocol.toml"))
    o = _inputs(
        tmp_path, sides=("pytorch",), nanogpt=str(FAKE_NANOGPT), pytorch_image="micakit-pytorch:t"
    )
    bare = FakeImage(files={"/usr/bin/sh": LINK.encode() + b"dash"})
    ex = DockerExecutor(FakeEngine({"micakit-pytorch:t": bare}).client(), "s")  # type: ignore[arg-type]
    with pytest.raises(UserError) as e:
        assemble.build_sides(p, o, tmp_path / "work", ex)
    assert "holds no `python` on its PATH" in e.value.message
    assert "micakit images build --only pytorch --protocol" in (e.value.fix or "")
    assert "--tag t" in (e.value.fix or "")
    held = FakeImage(files={"/usr/local/bin/python": LINK.encode() + b"python3"})
    ex = DockerExecutor(FakeEngine({"micakit-pytorch:t": held}).client(), "s")  # type: ignore[arg-type]
    (side,) = assemble.build_sides(p, o, tmp_path / "work", ex)
    assert side.image == "micakit-pytorch:t"


OLD, NEW = "sha256:" + "1" * 64, "sha256:" + "3" * 64
DIGEST = "ghcr.io/o/micakit-mica@sha256:" + "2" * 64


def versions_of(image_id: str, program: bytes, digests: list[str]) -> dict:
    image = {"image": "micakit-mica:t", "image_id": image_id, "repo_digests": digests}
    side = {"program_sha256": sha(program), "identity": image_id}
    return {"contender": side, "images": {"contender": image}}


def test_a_resume_refused_for_a_rebuilt_image_says_how_to_get_the_old_one_back() -> None:
    recorded = versions_of(OLD, PROGRAM, [])
    # rebuilt from the same program: said so, and the engine still holds the old image
    with pytest.raises(UserError) as e:
        documents.check_unchanged(recorded, versions_of(NEW, PROGRAM, []), {OLD: OLD}.get)
    said = e.value.message
    assert f"the contender image micakit-mica:t is {NEW[:19]}… now" in said
    assert f"started with {OLD[:19]}…" in said
    assert f"the program in it is the same (SHA-256 {sha(PROGRAM)[:12]}…)" in said
    assert f"`docker tag {OLD} micakit-mica:t`" in (e.value.fix or "")
    assert "micakit series --out NEW_DIR" in (e.value.fix or "")
    # from another program, and gone from the engine: its registry digest brings it back
    with pytest.raises(UserError) as e:
        documents.check_unchanged(
            versions_of(OLD, PROGRAM, [DIGEST]), versions_of(NEW, OTHER, []), {}.get
        )
    assert "the program in it is the same" not in e.value.message
    assert f"`docker pull {DIGEST} && docker tag {DIGEST} micakit-mica:t`" in (e.value.fix or "")
    # on no registry and no longer here: said so
    with pytest.raises(UserError) as e:
        documents.check_unchanged(recorded, versions_of(NEW, OTHER, []), {}.get)
    assert "cannot be had back" in (e.value.fix or "")

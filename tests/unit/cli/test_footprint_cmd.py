"""`micakit footprint`: all or nothing, and a missing image's error names the command that builds
it (§8). The engine is a small recorded stand-in: the images it holds and their file lists."""

from __future__ import annotations

import io
import json
import os
import shlex
import stat
import tarfile
from pathlib import Path

import click
import docker.errors
import pytest

from kit.cli.images import images_build
from kit.cli.main import main
from kit.errors import UserError
from kit.executors.docker import building, inventory


def tar_of(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


class FakeAPI:
    """The calls footprint makes: images by reference, each with its file list as a tar."""

    def __init__(self, images: dict[str, dict[str, bytes]], broken: str | None = None) -> None:
        self.images = images
        self.broken = broken  # an image whose export fails half-way
        self.containers: dict[str, str] = {}

    def inspect_image(self, ref: str) -> dict:
        if ref not in self.images:
            raise docker.errors.ImageNotFound(f"No such image: {ref}")
        size = sum(len(b) for b in self.images[ref].values())
        return {"Id": "sha256:" + ref.encode().hex().ljust(64, "0")[:64], "Size": size}

    def history(self, ref: str) -> list:
        return []

    def create_container(self, image_id: str, **kw) -> dict:
        cid = f"c{len(self.containers)}"
        self.containers[cid] = kw["labels"]["micakit.footprint"]
        return {"Id": cid}

    def export(self, cid: str, chunk_size: int):
        ref = self.containers[cid]
        data = tar_of(self.images[ref])
        yield data[:512]
        if ref == self.broken:
            raise docker.errors.APIError("the engine went away")
        yield data[512:]

    def remove_container(self, cid: str, force: bool) -> None:
        del self.containers[cid]


class FakeClient:
    def __init__(self, api: FakeAPI) -> None:
        self.api = api


REFS = {"pytorch": "micakit-pytorch:t", "mica": "micakit-mica:t"}
IMAGES = {
    "micakit-pytorch:t": {"usr/lib/libtorch.so": b"x" * 3000, "opt/nanogpt/train.py": b"y" * 10},
    "micakit-mica:t": {"opt/mica/bin/mica": b"z" * 1000},
}


def test_both_footprints_and_their_ratio(tmp_path: Path) -> None:
    api = FakeAPI(IMAGES)
    ratio = inventory.measure_footprints(FakeClient(api), REFS, tmp_path / "footprint")
    assert ratio["pytorch_over_mica"] == 3010 / 1000
    got = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert got == [
        "footprint",
        "footprint/mica",
        "footprint/mica/files.tsv",
        "footprint/mica/footprint.json",
        "footprint/mica/sbom.cdx.json",
        "footprint/pytorch",
        "footprint/pytorch/files.tsv",
        "footprint/pytorch/footprint.json",
        "footprint/pytorch/sbom.cdx.json",
        "footprint/ratio.json",
    ]
    assert json.loads((tmp_path / "footprint" / "ratio.json").read_text()) == ratio
    assert api.containers == {}


def test_a_missing_image_names_the_command_that_builds_it(tmp_path: Path) -> None:
    api = FakeAPI({"micakit-pytorch:t": IMAGES["micakit-pytorch:t"]})
    with pytest.raises(UserError) as e:
        inventory.measure_footprints(FakeClient(api), REFS, tmp_path / "footprint")
    assert "micakit-mica:t" in e.value.message
    assert "`micakit images build --only mica --contender PROGRAM`" in str(e.value.fix)
    assert list(tmp_path.iterdir()) == []  # PyTorch's image was not measured either


@pytest.mark.parametrize("side", ["pytorch", "mica"])
def test_the_fix_is_a_command_the_cli_accepts(tmp_path: Path, side: str) -> None:
    program = tmp_path / "mica"
    program.write_text("#!/bin/sh\n")
    words = shlex.split(building.BUILD_COMMANDS[side].replace("PROGRAM", str(program)))
    assert words[:3] == ["micakit", "images", "build"]
    group = main.get_command(click.Context(main), "images")  # a lazy command: loaded on demand
    assert group is not None and group.commands["build"] is images_build  # type: ignore[attr-defined]
    ctx = images_build.make_context("build", words[3:])  # parses, or raises click's error
    assert ctx.params["kinds"] == (side,)
    assert ctx.params["contender"] == (program if side == "mica" else None)


def test_a_failure_half_way_leaves_no_partial_footprint(tmp_path: Path) -> None:
    out = tmp_path / "footprint"
    with pytest.raises(docker.errors.APIError):
        inventory.measure_footprints(
            FakeClient(FakeAPI(IMAGES, broken="micakit-mica:t")), REFS, out
        )
    assert list(tmp_path.iterdir()) == []
    # an earlier complete footprint survives a failed measurement untouched
    inventory.measure_footprints(FakeClient(FakeAPI(IMAGES)), REFS, out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(docker.errors.APIError):
        inventory.measure_footprints(
            FakeClient(FakeAPI(IMAGES, broken="micakit-mica:t")), REFS, out
        )
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["footprint"]


def test_footprint_files_are_world_readable_under_umask_077(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        inventory.measure_footprints(FakeClient(FakeAPI(IMAGES)), REFS, tmp_path / "footprint")
    finally:
        os.umask(old)
    for p in (tmp_path / "footprint").rglob("*"):
        assert stat.S_IMODE(p.stat().st_mode) == (0o755 if p.is_dir() else 0o644), p

"""The Executor interface: what the engine calls on every executor, local and Docker."""

from __future__ import annotations

import inspect
import io
import tarfile
from pathlib import Path

import docker.errors
import pytest

from kit.errors import UserError
from kit.executors import base
from kit.executors.docker import footprint
from kit.executors.docker.executor import DockerExecutor
from kit.executors.local import LocalExecutor

MICA = {"image": "m:1", "size_bytes": 100}
PYTORCH = {"image": "p:1", "size_bytes": 900}


def test_the_interface_declares_what_the_engine_calls() -> None:
    declared = set(dir(base.Executor))
    for name in (
        "run", "where", "footprint", "footprint_ratio", "image_id", "use_series",
        "image_labels", "image_files",
    ):  # fmt: skip
        assert name in declared
        for cls in (LocalExecutor, DockerExecutor):
            # the same arguments in every executor, so the engine never asks which it holds
            assert inspect.signature(getattr(cls, name)).parameters.keys() == (
                inspect.signature(getattr(base.Executor, name)).parameters.keys()
            ), (cls.__name__, name)


def test_the_local_executor_has_no_images_and_says_so(tmp_path) -> None:
    ex = LocalExecutor()
    assert ex.uses_images is False and ex.image_id("anything:1") is None
    ex.use_series("s1")  # nothing to name: local runs keep nothing between runs
    with pytest.raises(UserError, match="runs no image") as e:
        ex.footprint("p:1", tmp_path / "fp")
    assert "--executor docker" in e.value.fix
    with pytest.raises(UserError, match="no footprint ratio"):
        ex.footprint_ratio(MICA, PYTORCH)
    assert not (tmp_path / "fp").exists()


class _Api:
    def inspect_image(self, ref: str) -> dict:
        if ref != "p:1":
            raise docker.errors.ImageNotFound(ref)
        return {"Id": "sha256:" + "a" * 64}


class _Client:
    api = _Api()


def test_docker_footprint_ratio_returns_the_record_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ex = DockerExecutor(_Client())  # type: ignore[arg-type]
    ratio = ex.footprint_ratio(MICA, PYTORCH)
    assert ratio == footprint.footprint_ratio(MICA, PYTORCH)
    assert ratio["pytorch_over_mica"] == 9.0
    assert list(tmp_path.iterdir()) == []  # the engine writes footprint/ratio.json


def test_docker_image_id_asks_the_engine() -> None:
    ex = DockerExecutor(_Client())  # type: ignore[arg-type]
    assert ex.uses_images is True
    assert ex.image_id("p:1") == "sha256:" + "a" * 64
    assert ex.image_id("q:1") is None


def test_an_image_export_in_chunks_reads_as_a_tar_stream() -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, size in (("usr/lib/libtorch.so", 5000), ("etc/passwd", 10)):
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(b"x" * size))
    data = buffer.getvalue()
    chunks = iter([data[i : i + 777] for i in range(0, len(data), 777)])  # not block-aligned
    with tarfile.open(fileobj=footprint.ChunkReader(chunks), mode="r|") as tar:
        assert [(m.name, m.size) for m in tar] == [
            ("usr/lib/libtorch.so", 5000),
            ("etc/passwd", 10),
        ]


def test_the_local_executor_hands_a_run_absolute_paths(tmp_path, monkeypatch) -> None:
    """A program that changes its folder still finds what it was handed (amendments 2, 4.3)."""
    monkeypatch.chdir(tmp_path)
    where = LocalExecutor().where(base.Mount("work", Path("r") / "work"))
    assert where == str(tmp_path / "r" / "work")

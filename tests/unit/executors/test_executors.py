"""The Executor interface: what the engine calls on every executor, local and Docker."""

from __future__ import annotations

import inspect
import io
import tarfile
from pathlib import Path

import docker.errors

from kit.executors import base
from kit.executors.docker import footprint
from kit.executors.docker.engine_images import DockerImages
from kit.executors.docker.executor import DockerExecutor
from kit.executors.local import LocalExecutor

MICA = {"image": "m:1", "size_bytes": 100}
PYTORCH = {"image": "p:1", "size_bytes": 900}


def test_the_interface_declares_what_the_engine_calls() -> None:
    declared = set(dir(base.Executor))
    for name in ("run", "where", "use_series", "which", "profiler"):
        assert name in declared
        for cls in (LocalExecutor, DockerExecutor):
            # the same arguments in every executor, so the engine never asks which it holds
            assert inspect.signature(getattr(cls, name)).parameters.keys() == (
                inspect.signature(getattr(base.Executor, name)).parameters.keys()
            ), (cls.__name__, name)


def test_the_local_executor_has_no_images() -> None:
    ex = LocalExecutor()
    assert ex.images is None  # the series measures no footprint and looks up no image
    ex.use_series("s1")  # nothing to name: local runs keep nothing between runs


def test_the_docker_executor_provides_every_image_method_of_the_interface() -> None:
    ex = DockerExecutor(_Client())  # type: ignore[arg-type]
    assert isinstance(ex.images, base.Images)
    for name in base.Images.__abstractmethods__:
        assert inspect.signature(getattr(DockerImages, name)).parameters.keys() == (
            inspect.signature(getattr(base.Images, name)).parameters.keys()
        ), name
    # images apart from running: the executor's interface names no image method
    named = {n for n in dir(base.Executor) if "image" in n or "footprint" in n}
    assert named == {"images"}


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
    ratio = ex.images.footprint_ratio(MICA, PYTORCH)
    assert ratio == footprint.footprint_ratio(MICA, PYTORCH)
    assert ratio["pytorch_over_mica"] == 9.0
    assert list(tmp_path.iterdir()) == []  # the engine writes footprint/ratio.json


def test_docker_image_id_asks_the_engine() -> None:
    ex = DockerExecutor(_Client())  # type: ignore[arg-type]
    assert ex.images.id_of("p:1") == "sha256:" + "a" * 64
    assert ex.images.id_of("q:1") is None


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

"""The Docker executor's images (kit.executors.docker.engine_images): a measured image's
footprint and its base's beside it (§8 told whole), each measured once, also across a resume."""

from __future__ import annotations

import json
from pathlib import Path

import docker.errors

from kit.executors.docker.engine_images import DockerImages
from kit.executors.docker.footprint import BASE, BASE_LABEL, JSON_NAME
from tests.unit.executors.test_sbom import LABELS, FakeAPI, FakeClient


class _BasedAPI(FakeAPI):
    """`inventory.footprint`'s calls (test_sbom's FakeAPI) for an image whose build names its
    base (Dockerfile.mica's LABEL org.micakit.base) and for that base, if `base_exists`."""

    def __init__(self, base_exists: bool = True) -> None:
        super().__init__()
        self.base_exists = base_exists
        self.inspected: list[str] = []

    def inspect_image(self, ref: str) -> dict:
        self.inspected.append(ref)
        if ref == "b:1" and not self.base_exists:
            raise docker.errors.ImageNotFound(f"No such image: {ref}")
        labels = {**LABELS, BASE_LABEL: "b:1"} if ref == "m:1" else {}
        return {**super().inspect_image(ref), "Config": {"Labels": labels}}


def _images(api: _BasedAPI) -> DockerImages:
    return DockerImages(FakeClient(api), dict, lambda: None)  # type: ignore[arg-type]


def test_an_image_and_its_base_are_measured_once_across_a_resume(tmp_path: Path) -> None:
    api, said = _BasedAPI(), []
    out = tmp_path / "footprint" / "contender"
    _images(api).footprint("m:1", out, said.append)
    assert json.loads((out / JSON_NAME).read_text())["labels"][BASE_LABEL] == "b:1"
    assert (out / BASE / JSON_NAME).exists()
    assert said == ["footprint of m:1 (§8)", "footprint of b:1, the base of m:1 (§8)"]
    # stopped after the image, before its base: the resume measures the base alone
    for f in (out / BASE).iterdir():
        f.unlink()
    said.clear()
    _images(api).footprint("m:1", out, said.append)
    assert said == ["footprint of b:1, the base of m:1 (§8)"]
    said.clear()
    _images(api).footprint("m:1", out, said.append)
    assert said == []  # all measured: nothing again


def test_a_base_no_longer_on_the_engine_is_said_and_the_image_measured(tmp_path: Path) -> None:
    said: list[str] = []
    out = tmp_path / "contender"
    _images(_BasedAPI(base_exists=False)).footprint("m:1", out, said.append)
    assert (out / JSON_NAME).exists() and not (out / BASE / JSON_NAME).exists()
    assert said[-1].startswith("b:1: ") and said[-1].endswith("what m:1 adds is not told")

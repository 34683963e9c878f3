"""The runner image carries the kit's commit: `images build` passes KIT_COMMIT, and
Dockerfile.runner turns it into a label and MICAKIT_COMMIT, which the kit reads without .git."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kit
from kit.executors.docker import building
from kit.protocol.load import load
from tests.conftest import ROOT


def test_images_build_passes_the_kits_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, dict] = {}

    def build_image(client, dockerfile, context, name, args, wheelhouse, on_line, nocache=False):
        seen[Path(dockerfile).name] = dict(args)
        return "sha256:" + "0" * 64

    monkeypatch.setattr(building, "build_image", build_image)
    monkeypatch.setattr(building, "tag_image", lambda *a: None)
    monkeypatch.setattr(building, "kit_commit", lambda: "c0ffee" * 6 + "abcd")
    building.build_images(None, load(), ["runner"], base="micakit-base:bookworm")
    assert seen == {
        "Dockerfile.runner": {"KIT_COMMIT": "c0ffee" * 6 + "abcd", "BASE": "micakit-base:bookworm"}
    }


def test_the_runner_dockerfile_labels_and_exports_it() -> None:
    text = (ROOT / "Dockerfile.runner").read_text()
    final = text[text.rindex("\nFROM ") :]  # the image's own stage, not the install stage
    assert re.search(r"^ARG KIT_COMMIT=", final, re.M)
    assert re.search(r"^LABEL .*micakit\.commit=\$\{KIT_COMMIT\}", final, re.M)
    assert re.search(r"^ENV .*MICAKIT_COMMIT=\$\{KIT_COMMIT\}", final, re.M)


def test_without_git_the_kit_reads_micakit_commit(tmp_path, monkeypatch) -> None:
    package = tmp_path / "kit"
    package.mkdir()
    monkeypatch.setattr(kit, "_here", lambda: package)  # no .git beside it
    monkeypatch.setenv("MICAKIT_COMMIT", "feed" * 10)
    assert kit.kit_commit() == "feed" * 10

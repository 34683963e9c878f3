"""What the integration tests share: a client of this machine's Docker engine, or a skip."""

from __future__ import annotations

import os
import zipapp
from collections.abc import Iterator
from pathlib import Path

import pytest

from kit.errors import UserError
from kit.executors.docker import building, connection
from tests.conftest import FAKES


@pytest.fixture(scope="session")
def client() -> Iterator:
    try:
        c = connection.connect(timeout_s=600)
    except UserError as e:
        pytest.skip(f"no Docker engine answers: {e.message}")
    yield c
    c.close()


def base_image(client) -> str:
    """The local base image the images build on, or a skip saying how to make it."""
    base = os.environ.get("MICAKIT_BASE_IMAGE", "micakit-base:bookworm")
    if building.image_id(client, base) is None:
        pytest.skip(f"no base image {base}: `bash scripts/ci-setup.sh` builds it")
    return base


def fake_contender_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake contender (its code and fakelib) as one executable zip: a one-file program, as
    a compiled contender is."""
    src = tmp_path_factory.mktemp("zipsrc")
    (src / "__main__.py").write_text((FAKES / "contender.py").read_text())
    (src / "fakelib.py").write_text((FAKES / "fakelib.py").read_text())
    program = tmp_path_factory.mktemp("prog") / "mica-fake"
    zipapp.create_archive(src, program, interpreter="/usr/bin/env python3")
    program.chmod(0o755)
    return program

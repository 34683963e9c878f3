"""What the integration tests share: a client of this machine's Docker engine, or a skip."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kit.errors import UserError
from kit.executors.docker import connection


@pytest.fixture(scope="session")
def client() -> Iterator:
    try:
        c = connection.connect(timeout_s=600)
    except UserError as e:
        pytest.skip(f"no Docker engine answers: {e.message}")
    yield c
    c.close()

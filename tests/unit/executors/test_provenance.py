"""An image's provenance statement (kit.executors.docker.provenance): an in-toto Statement v1
with a SLSA v1 provenance predicate, naming the built image by id and, once pushed, by its
registry digest, and every input by SHA-256; one for another build is refused."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest

from kit import __version__
from kit.errors import UserError
from kit.executors.docker import provenance

IMAGE_ID = "sha256:" + "1" * 64
DIGEST = "sha256:" + "2" * 64


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def statement(tmp_path):
    dockerfile = tmp_path / "Dockerfile.mica"
    dockerfile.write_bytes(b"FROM base\n")
    context = tmp_path / "context"
    (context / "libs").mkdir(parents=True)
    (context / "mica").write_bytes(b"program")
    (context / "libs" / "libcublas.so.12").write_bytes(b"cublas")
    wheel = tmp_path / "torch-2.13.0-cp311-none-any.whl"
    wheel.write_bytes(b"wheel")
    base = {"ref": "debian:bookworm-slim", "id": "sha256:" + "3" * 64,
            "repo_digests": "debian@sha256:" + "4" * 64}  # fmt: skip
    return provenance.statement(
        "micakit-mica:t", IMAGE_ID, dockerfile, context, {"PROGRAM": "mica"}, base, [wheel],
        datetime.now(UTC),
    )  # fmt: skip


def test_the_statement_names_the_image_and_every_input_by_sha256(statement):
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert statement["subject"] == [{"name": "micakit-mica:t", "digest": {"sha256": "1" * 64}}]
    build = statement["predicate"]["buildDefinition"]
    inputs = {d["name"]: d["digest"]["sha256"] for d in build["resolvedDependencies"]}
    assert inputs == {
        "Dockerfile:Dockerfile.mica": sha(b"FROM base\n"),
        "base:debian:bookworm-slim": "3" * 64,
        f"base:debian@sha256:{'4' * 64}": "4" * 64,
        "context:mica": sha(b"program"),
        "context:libs/libcublas.so.12": sha(b"cublas"),
        "wheelhouse/torch-2.13.0-cp311-none-any.whl": sha(b"wheel"),
    }
    assert build["externalParameters"]["buildargs"] == {"PROGRAM": "mica"}
    builder = statement["predicate"]["runDetails"]["builder"]
    assert builder["version"]["micakit"] == __version__
    assert builder["id"] == f"urn:micakit:{__version__}:{builder['version']['commit']}"


def test_a_push_adds_the_registry_digest_and_a_statement_for_another_build_is_refused(
    statement, tmp_path
):
    path = tmp_path / provenance.file_name("micakit-mica")
    provenance.write(path, statement)
    read = provenance.read(path, IMAGE_ID)
    pushed = provenance.with_registry_digest(read, "ghcr.io/o/micakit-mica", DIGEST)
    assert pushed["subject"][1] == {
        "name": "ghcr.io/o/micakit-mica",
        "digest": {"sha256": "2" * 64},
    }
    assert provenance.with_registry_digest(pushed, "ghcr.io/o/micakit-mica", DIGEST) == pushed
    with pytest.raises(UserError) as e:
        provenance.read(path, "sha256:" + "9" * 64)
    assert "another build" in e.value.message and "micakit images build" in str(e.value.fix)
    with pytest.raises(UserError) as e:
        provenance.read(tmp_path / "none.intoto.json", IMAGE_ID)
    assert "no provenance statement" in e.value.message

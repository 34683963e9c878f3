"""An image's provenance statement (kit.executors.docker.provenance): an in-toto Statement v1
with a SLSA v1 provenance predicate, naming the built image by id and, once pushed, by its
registry digest, the source by repository and commit, every input by a uri and a digest, and
the builder: the workflow on GitHub Actions (the run's URL its invocation), the kit's own id
for a local build, said so; one for another build is refused."""

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
        datetime.now(UTC), [GPP], environ=GITHUB,
    )  # fmt: skip


GPP = "pkg:deb/debian/g++@4:12.2.0-3?arch=amd64&distro=debian-12&upstream=gcc-defaults"
# the variables GitHub Actions sets in every job (docs.github.com, "Variables reference")
GITHUB = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_SERVER_URL": "https://github.com",
    "GITHUB_REPOSITORY": "o/micakit",
    "GITHUB_WORKFLOW_REF": "o/micakit/.github/workflows/images.yml@refs/tags/v1.0.0",
    "GITHUB_SHA": "5" * 40,
    "GITHUB_RUN_ID": "123",
    "GITHUB_RUN_ATTEMPT": "2",
}


def test_the_statement_names_the_image_and_every_input_by_a_uri_and_digest(statement):
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert statement["subject"] == [{"name": "micakit-mica:t", "digest": {"sha256": "1" * 64}}]
    build = statement["predicate"]["buildDefinition"]
    resolved = {d["name"]: d for d in build["resolvedDependencies"]}
    inputs = {n: d["digest"]["sha256"] for n, d in resolved.items() if "digest" in d}
    assert inputs == {
        "Dockerfile:Dockerfile.mica": sha(b"FROM base\n"),
        "base:debian:bookworm-slim": "3" * 64,
        f"base:debian@sha256:{'4' * 64}": "4" * 64,
        "context:mica": sha(b"program"),
        "context:libs/libcublas.so.12": sha(b"cublas"),
        "wheelhouse/torch-2.13.0-cp311-none-any.whl": sha(b"wheel"),
    }
    assert all(d.get("uri") for d in resolved.values())  # every one has a uri
    source = f"git+https://github.com/o/micakit@{'5' * 40}"
    assert resolved["Dockerfile:Dockerfile.mica"]["uri"] == f"{source}#kit/files/Dockerfile.mica"
    assert resolved["base:debian:bookworm-slim"]["uri"] == "docker-image://debian:bookworm-slim"
    assert resolved["wheelhouse/torch-2.13.0-cp311-none-any.whl"]["uri"] == (
        "pkg:pypi/torch@2.13.0?file_name=torch-2.13.0-cp311-none-any.whl"
    )
    assert resolved["apt:g++"] == {"name": "apt:g++", "uri": GPP}  # by name and version
    assert build["externalParameters"]["buildargs"] == {"PROGRAM": "mica"}
    assert build["externalParameters"]["source"] == {
        "repository": "https://github.com/o/micakit",
        "commit": "5" * 40,
    }
    details = statement["predicate"]["runDetails"]
    assert details["builder"]["id"] == (
        "https://github.com/o/micakit/.github/workflows/images.yml@refs/tags/v1.0.0"
    )
    assert details["builder"]["version"]["micakit"] == __version__
    assert details["metadata"]["invocationId"] == (
        "https://github.com/o/micakit/actions/runs/123/attempts/2"
    )


def test_a_local_build_names_the_kit_as_its_builder_and_says_so(tmp_path):
    dockerfile = tmp_path / "Dockerfile.runner"
    dockerfile.write_bytes(b"FROM base\n")
    (tmp_path / "context").mkdir()
    made = provenance.statement(
        "micakit:t", IMAGE_ID, dockerfile, tmp_path / "context", {}, {"ref": "b"}, [],
        datetime.now(UTC), environ={},
    )  # fmt: skip
    predicate = made["predicate"]
    builder = predicate["runDetails"]["builder"]
    assert builder["id"] == f"urn:micakit:{__version__}:{builder['version']['commit']}"
    assert predicate["buildDefinition"]["internalParameters"]["builder"].startswith("local: ")
    assert "invocationId" not in predicate["runDetails"].get("metadata", {})
    commit = predicate["buildDefinition"]["externalParameters"]["source"]["commit"]
    assert commit == builder["version"]["commit"]


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

"""What the kit says of an image it built, against a real engine: the provenance statement's
digests are the built image's and its inputs'; the SBOM of the image matches its footprint;
a rebuild from the same inputs holds the same files (`images build --check-reproducible`).
The image is the smallest the kit builds: the Mica image with a one-file program."""

from __future__ import annotations

import json
import uuid

import pytest

from kit import __version__
from kit.executors.docker import building, inventory, kit_images, reproducible
from kit.executors.docker.footprint import read_files
from kit.protocol.load import FILES, load
from kit.report import sbom_tie
from kit.results.store import sha256_file
from tests.integration.conftest import base_image, fake_contender_program

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def mica(client, tmp_path_factory):
    """The Mica image built by `build_images` with its statement; its reference, id, program
    and the statement's folder."""
    base = base_image(client)
    program = fake_contender_program(tmp_path_factory)
    attestations = tmp_path_factory.mktemp("attestations")
    tag = f"att-{uuid.uuid4().hex[:8]}"
    built = building.build_images(
        client, load(), [kit_images.MICA], base=base, contender=program, suffix=tag,
        attestations=attestations,
    )  # fmt: skip
    [(ref, image_id)] = built.items()
    yield ref, image_id, program, attestations
    client.api.remove_image(image_id, force=True)


def test_the_statements_digests_are_the_built_images_and_its_inputs(client, mica):
    ref, image_id, program, attestations = mica
    statement = json.loads((attestations / "micakit-mica.intoto.json").read_text())
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
    assert statement["subject"] == [{"name": ref, "digest": {"sha256": image_id.split(":")[1]}}]
    predicate = statement["predicate"]
    inputs = {d["name"]: d for d in predicate["buildDefinition"]["resolvedDependencies"]}
    dockerfile = FILES / "Dockerfile.mica"
    assert inputs["Dockerfile:Dockerfile.mica"]["digest"]["sha256"] == sha256_file(dockerfile)
    assert inputs[f"context:{program.name}"]["digest"]["sha256"] == sha256_file(program)
    base = base_image(client)
    base_id = client.api.inspect_image(base)["Id"]
    assert inputs[f"base:{base}"]["digest"]["sha256"] == base_id.split(":")[1]
    args = predicate["buildDefinition"]["externalParameters"]["buildargs"]
    assert args["PROGRAM_SHA256"] == sha256_file(program) and args["BASE"] == base
    builder = predicate["runDetails"]["builder"]
    assert builder["version"]["micakit"] == __version__
    assert len(builder["version"]["commit"]) == 40 or builder["version"]["commit"] == "unknown"
    # the image the engine holds under the name is the one the statement names
    assert client.api.inspect_image(ref)["Id"] == image_id


def test_the_sbom_of_a_small_image_matches_its_footprint(client, mica, tmp_path):
    ref, _, program, _ = mica
    folder = tmp_path / "footprint" / "contender"
    inventory.footprint(client, ref, folder)
    assert sbom_tie.differences(tmp_path / "footprint") == []
    doc = json.loads((folder / "sbom.cdx.json").read_text())
    by_name = {c["name"]: c for c in doc["components"]}
    contender = by_name[program.name]
    assert contender["hashes"][0]["content"] == sha256_file(program)
    rows = {r["path"]: r for r in read_files(folder / "files.tsv")}
    row = rows[f"/opt/mica/bin/{program.name}"]
    assert row["owner"] == contender["bom-ref"] and row["sha256"] == sha256_file(program)
    assert by_name["libc6"]["purl"].startswith("pkg:deb/debian/libc6@")
    assert "distro=debian-12" in by_name["libc6"]["purl"]


def test_a_rebuild_from_the_same_inputs_holds_the_same_files(client, mica):
    ref, image_id, program, _ = mica
    tag = ref.split(":", 1)[1]

    def build(**kw):
        return building.build_images(
            client, load(), [kit_images.MICA], base=base_image(client), contender=program, **kw
        )

    assert reproducible.check(client, {ref: image_id}, build) == []
    assert building.image_id(client, f"micakit-mica:{tag}-{reproducible.REBUILD}") is None

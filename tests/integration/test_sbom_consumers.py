"""A real image's SBOM as the tools that read SBOMs read it (tests/unit/executors/
test_sbom_consumers.py says which, and what each checks): schema-valid, NTIA conformant, a
package for each Debian package dpkg says is installed (asked in a container of the image),
each purl parsed with `distro`, tied to the footprint, under 2 MB.

The images are the suite's own (the Mica image with a one-file program), or, where
MICAKIT_RELEASE_TAG names a tag, the images `images build` made under it: the release holds
the very images it pushes to this test (.github/workflows/images.yml)."""

from __future__ import annotations

import os
import uuid

import pytest

from kit.executors.docker import building, inventory, kit_images, sbom
from kit.executors.docker.footprint import read_files
from kit.protocol.load import load
from kit.report import sbom_tie
from tests.integration.conftest import base_image, fake_contender_program
from tests.unit.executors.test_sbom_consumers import consumers_read

pytestmark = [
    pytest.mark.docker,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),  # lib4sbom's
]
RELEASE_TAG = os.environ.get("MICAKIT_RELEASE_TAG", "")
MAX_BYTES = 2_000_000  # under GitHub's attestation limit (16 MiB) with room to spare


def _release_refs(client) -> list[str]:
    refs = [f"{kit_images.NAMES[k]}:{RELEASE_TAG}" for k in kit_images.NAMES]
    found = [r for r in refs if building.image_exists(client, r)]
    if not found:
        pytest.fail(f"MICAKIT_RELEASE_TAG={RELEASE_TAG}: no image of micakit under that tag")
    return found


@pytest.fixture(scope="module")
def images(client, tmp_path_factory):
    """The references of the images to read: the release's, or the Mica image built here."""
    if RELEASE_TAG:
        yield _release_refs(client)
        return
    program = fake_contender_program(tmp_path_factory)
    built = building.build_images(
        client, load(), [kit_images.MICA], base=base_image(client), contender=program,
        suffix=f"sbom-{uuid.uuid4().hex[:8]}",
    )  # fmt: skip
    yield list(built)
    for image_id in built.values():
        client.api.remove_image(image_id, force=True)


def _installed(client, ref: str) -> int:
    """How many Debian packages dpkg says are installed in the image (a container of it)."""
    out = client.containers.run(
        ref,
        ["dpkg-query", "-W", "-f", "${db:Status-Status}\\n"],
        entrypoint=[],
        remove=True,
        network_disabled=True,
    )
    return out.decode().split().count("installed")


def test_the_consumers_read_each_images_sbom(client, images, tmp_path):
    for ref in images:
        folder = tmp_path / "footprint" / ref.replace(":", "_").replace("/", "_")
        record = inventory.footprint(client, ref, folder)
        path = folder / sbom.SBOM_NAME
        assert path.stat().st_size < MAX_BYTES, f"{ref}: {path.stat().st_size} bytes"
        assert sbom_tie.differences(tmp_path / "footprint") == []
        got = consumers_read(path)
        assert got.schema_errors == "", f"{ref}: {got.schema_errors}"
        assert got.ntia_conformant, ref
        debs = [p for p in got.purls.values() if p.type == "deb"]
        installed = _installed(client, ref)
        assert len(debs) == installed, ref
        assert all((p.qualifiers or {}).get("distro") == "debian-12" for p in debs), ref  # type: ignore[union-attr]
        # a package per Debian package, Python distribution (a METADATA in the file list),
        # program and NVIDIA library (the Mica image's), and the OS: lib4sbom's count
        paths = [str(r["path"]) for r in read_files(folder / "files.tsv")]
        distributions = sum(p.endswith(".dist-info/METADATA") for p in paths)
        program = 1 if record["labels"].get("org.micakit.program") else 0
        libs = sum(p.startswith("/opt/mica/lib/") and p.count("/") == 4 for p in paths)
        assert got.packages == installed + distributions + program + libs + 1, ref

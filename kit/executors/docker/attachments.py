"""What a release attaches beside each pushed image: its provenance statement (written when the
kit built it, now with its registry digest) and its bill of materials (measured here, as a
series measures it: kit.executors.docker.inventory), named in `images push`'s record.

Kept apart from `building.push` because the SBOM is the footprint's, and the footprint's module
looks images up through `building`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import docker

from kit.executors.docker import building, inventory, kit_images, provenance, sbom

SBOM_SUFFIX = ".cdx.json"
PREDICATE_SUFFIX = ".predicate.json"


def refuse_unready(client: docker.DockerClient, refs: dict[str, str], folder: Path) -> None:
    """Before anything is pushed: each image (kind: local reference) has its statement in
    `folder`, naming that very image (a UserError saying how to write it otherwise)."""
    for kind, ref in refs.items():
        image_id = building.image_id(client, ref)
        if image_id is not None:  # one not built is the push's to name
            provenance.read(folder / provenance.file_name(kit_images.NAMES[kind]), image_id)


def attach(
    client: docker.DockerClient,
    record: dict,
    folder: Path,
    on_line: Callable[[str], None] | None = None,
) -> dict:
    """For each image in `record` (building.push's): its statement in `folder` gains the
    registry digest, and its SBOM is measured into `folder`; the record names both, by file
    name in `folder`, under each image's `attachments`."""
    for kind, image in record["images"].items():
        name = kit_images.NAMES[kind]
        path = folder / provenance.file_name(name)
        statement = provenance.read(path, image["image_id"])
        pushed = provenance.with_registry_digest(statement, image["repository"], image["digest"])
        provenance.write(path, pushed)
        # the predicate alone, as an attestation action takes it to sign for the pushed digest
        provenance.write(folder / (name + PREDICATE_SUFFIX), pushed["predicate"])
        if on_line is not None:
            on_line(f"the bill of materials of {image['local']} (§8: every file, measured)")
        measured = folder / name
        shutil.rmtree(measured, ignore_errors=True)
        inventory.footprint(client, image["local"], measured)
        shutil.copyfile(measured / sbom.SBOM_NAME, folder / (name + SBOM_SUFFIX))
        image["attachments"] = {
            "provenance": path.name,
            "predicate": name + PREDICATE_SUFFIX,
            "sbom": name + SBOM_SUFFIX,
            "footprint": f"{name}/",  # footprint.json and files.tsv, which the SBOM is tied to
        }
    return record

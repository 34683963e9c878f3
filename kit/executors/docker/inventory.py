"""An image's footprint read from the engine (§8): its size, layers and full file list.

`kit.executors.docker.footprint` turns what this module reads into the records; nothing there
talks to the engine.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import shutil
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

import docker
import docker.errors

from kit.errors import UserError
from kit.executors.docker import sbom
from kit.executors.docker.building import BUILD_COMMANDS, BUILD_FIX, image_exists
from kit.executors.docker.footprint import (
    BASE,
    BASE_LABEL,
    ChunkReader,
    FootprintWriter,
    footprint_ratio,
    write_record,
)
from kit.results import store


def footprint(
    client: docker.DockerClient, image_ref: str, out_dir: Path, with_sbom: bool = True
) -> dict:
    """Measure an image (§8): its size, id, digests, layers and full file list, into out_dir.

    The size is the engine's (all layers, unpacked). The file list is read from the flattened
    filesystem of a container created from the image and never started, as a tar stream.
    Writes `footprint.json`, `files.tsv` (each entry with its SHA-256 and the component that
    owns it) and the image's bill of materials, `sbom.cdx.json` (kit.executors.docker.sbom: a
    component per package), into out_dir, so give each image its own folder. `with_sbom=False`
    leaves the owners and the SBOM out (benchmarks/kit/sbom.py: what they cost).
    """
    api = client.api
    try:
        image = api.inspect_image(image_ref)
    except docker.errors.ImageNotFound:
        raise UserError(f"no image {image_ref} to measure", BUILD_FIX) from None
    history = api.history(image_ref)
    writer, contents = FootprintWriter(out_dir), sbom.Contents()
    container = api.create_container(
        image["Id"],
        entrypoint=["/micakit-footprint-never-started"],
        labels={"micakit.footprint": image_ref},
        network_disabled=True,
    )["Id"]
    try:
        chunks = api.export(container, chunk_size=1 << 20)
        with tarfile.open(fileobj=ChunkReader(chunks), mode="r|") as tar:
            for member in tar:
                writer.add(member)
                contents.add(member, tar)  # the same pass hashes each file for files.tsv
    finally:
        api.remove_container(container, force=True)
    if not with_sbom:
        record = writer.finish(image_ref, image, history, contents.sha256)
        return record
    rows = writer.rows()
    labels = dict((image.get("Config") or {}).get("Labels") or {})
    found, owner = sbom.owners(rows, labels, contents)
    record = writer.finish(image_ref, image, history, contents.sha256, owner)
    # footprint.json names its SBOM and the SBOM's hash: `verify` finds one removed or edited
    written = sbom.write(out_dir, record, found, owner, rows, contents.texts)
    record["sbom"] = {"file": sbom.SBOM_NAME, "sha256": written}
    write_record(out_dir, record)
    return record


def measure_footprints(client: docker.DockerClient, refs: Mapping[str, str], out_dir: Path) -> dict:
    """Both measured images' footprints into out_dir/<side>/ and their ratio into
    out_dir/ratio.json (§8); returns the ratio. All or nothing: every image is looked up before
    any is measured, and the measurements land in a sibling folder renamed into place at the
    end, so a failure leaves no partial footprint (and an earlier complete one untouched)."""
    for side, ref in refs.items():
        if not image_exists(client, ref):
            raise UserError(
                f"no {side} image {ref} to measure",
                f"`{BUILD_COMMANDS[side]}` builds it (add --tag T where its tag is not the "
                f"kit's), or name a built image with --{side} REF",
            )
    partial = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        found = {side: footprint(client, ref, partial / side) for side, ref in refs.items()}
        for side, info in found.items():
            base = info.get("labels", {}).get(BASE_LABEL)
            if base and image_exists(client, base):
                # what the image adds beyond its side's minimum is told against its base (§8)
                footprint(client, base, partial / side / BASE)
        ratio = footprint_ratio(found["mica"], found["pytorch"])
        store.write_json(partial / "ratio.json", ratio)
        store.publish_modes(partial)
        shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(partial, out_dir)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return ratio


def image_files(
    client: docker.DockerClient, ref: str, paths: Sequence[str], labels: Mapping[str, str]
) -> dict[str, str]:
    """What image `ref` holds at each of `paths` (a folder: every file under it), by path, with
    its SHA-256 (a link: "-> TARGET"); a bare name is looked for on the image's PATH.

    Read from a container created from the image and never started, as `footprint` reads its
    file list: the check costs no run, and no program of the image runs."""
    api = client.api
    image = api.inspect_image(ref)
    env = dict(e.partition("=")[::2] for e in (image.get("Config") or {}).get("Env") or [])
    search = [d for d in env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(":") if d]
    wanted: list[str] = []
    for path in paths:
        wanted += [path] if "/" in path else [posixpath.join(d, path) for d in search]
    container = api.create_container(
        image["Id"],
        entrypoint=["/micakit-never-started"],
        labels=dict(labels),
        network_disabled=True,
    )["Id"]
    found: dict[str, str] = {}
    try:
        for path in wanted:
            try:
                chunks, _ = api.get_archive(container, path, chunk_size=1 << 20)
            except docker.errors.NotFound:
                continue  # not there
            parent = posixpath.dirname(path.rstrip("/"))
            with tarfile.open(fileobj=ChunkReader(chunks), mode="r|") as tar:
                for member in tar:
                    where = posixpath.join(parent, member.name)
                    if member.issym() or member.islnk():
                        found[where] = f"-> {member.linkname}"
                    elif member.isfile():
                        found[where] = _sha256(tar.extractfile(member))
    finally:
        api.remove_container(container, force=True)
    return found


def _sha256(f: IO[bytes] | None) -> str:
    assert f is not None  # tarfile gives a reader for every regular file's member
    h = hashlib.sha256()
    while chunk := f.read(1 << 20):
        h.update(chunk)
    return h.hexdigest()

"""Whether an image rebuilt from the same inputs holds the same files (`images build
--check-reproducible`): each image is built a second time, every step again, and both are
measured as a series measures them (kit.executors.docker.inventory: the file list with each
file's SHA-256); every path whose entry, size or content differs is named.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import docker

from kit.executors.docker import inventory
from kit.executors.docker.footprint import FILES_NAME, read_files

REBUILD = "rebuild"  # the second build's tag: <tag>-rebuild, removed once compared


def check(
    client: docker.DockerClient,
    built: Mapping[str, str],
    build: Callable[..., dict[str, str]],
) -> list[str]:
    """Build every image of `built` (reference: id, all under one tag) again with `build`
    (building.build_images with the first build's inputs) under the tag <tag>-rebuild, and
    compare; each difference as a line naming the image."""
    tag = next(iter(built)).rpartition(":")[2]
    again = build(suffix=f"{tag}-{REBUILD}", rebuild=True, attestations=None)
    out = []
    try:
        with tempfile.TemporaryDirectory(prefix="micakit-rebuild-") as tmp:
            for (ref, first_id), (_, second_id) in zip(built.items(), again.items()):
                if first_id == second_id:
                    continue  # the same image: the builder made each layer the same
                first, second = Path(tmp) / "first", Path(tmp) / "second"
                inventory.footprint(client, first_id, first)
                inventory.footprint(client, second_id, second)
                out += [f"{ref}: {line}" for line in differences(first, second)]
    finally:
        for ref, second_id in again.items():
            if second_id not in built.values():
                client.api.remove_image(ref, force=True)
    return out


def differences(first: Path, second: Path) -> list[str]:
    """Every path whose entry (kind, mode, link), size or content differs between two measured
    images' folders (the files.tsv of each)."""
    rows = [{str(r["path"]): r for r in read_files(f / FILES_NAME)} for f in (first, second)]
    out = []
    for path in sorted(rows[0].keys() | rows[1].keys()):
        a, b = rows[0].get(path), rows[1].get(path)
        if a is None or b is None:
            out.append(f"{path}: only in the {'second' if a is None else 'first'} build")
            continue
        for key in ("type", "mode", "link", "size_bytes"):
            if a[key] != b[key]:
                out.append(f"{path}: {key} {a[key]} in the first build, {b[key]} in the second")
        if a["size_bytes"] == b["size_bytes"] and a.get("sha256") != b.get("sha256"):
            out.append(f"{path}: the same size, other content")
    return out

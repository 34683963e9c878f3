"""`verify`'s check of each image's bill of materials against its footprint (§8).

The SBOM (footprint/<side>/sbom.cdx.json, kit.executors.docker.sbom) claims what an image holds;
the footprint (files.tsv) is what the kit measured in it. footprint.json's hashes of files.tsv
and of the SBOM must match the files, and the SBOM must describe the measured image. Then, for
a file list of version 2 (footprint.json's `files.version`): every entry other than a folder
has an owner in files.tsv, a component of the SBOM or `unowned:` with what it is; every regular
file has its SHA-256; and each component's file count and total size are those of the entries
files.tsv gives it. A version 1 list (no `files.version`) came with an SBOM that nests every
file in its owner: its files are the footprint's entries, size for size and kind for kind,
each listed once. A footprint written by a kit before SBOMs names none, and none is asked.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from kit.executors.docker.footprint import FILES_NAME, JSON_NAME, UNOWNED, read_files
from kit.executors.docker.sbom import FILES, SIZE

SHOWN = 20  # differences named one by one per image; the rest are counted
SHA256 = re.compile(r"[0-9a-f]{64}")


def differences(footprints: Path) -> list[str]:
    """Every difference between each SBOM under `footprints` (a results directory's
    footprint/) and the footprint beside it."""
    problems: list[str] = []
    for record_path in sorted(footprints.rglob(JSON_NAME)):
        problems += folder_differences(record_path.parent, footprints.parent)
    return problems


def folder_differences(folder: Path, root: Path) -> list[str]:
    """The differences of one image's folder (footprint.json, files.tsv, its SBOM)."""
    where = folder.relative_to(root).as_posix()
    record = json.loads((folder / JSON_NAME).read_text(encoding="utf-8"))
    named = record.get("sbom")
    if not named:
        return []  # an earlier kit's footprint: no SBOM was written, none is asked
    problems = []
    listed = (record.get("files") or {}).get("list_sha256")
    files_path, sbom_path = folder / FILES_NAME, folder / str(named["file"])
    if not files_path.exists():
        return [f"{where}/{FILES_NAME}: missing (footprint.json names it)"]
    if listed and _sha256(files_path) != listed:
        problems.append(f"{where}/{FILES_NAME}: differs from the list footprint.json hashed")
    if not sbom_path.exists():
        return [*problems, f"{where}/{named['file']}: missing (footprint.json names it)"]
    if _sha256(sbom_path) != named.get("sha256"):
        problems.append(f"{where}/{named['file']}: differs from the SBOM footprint.json hashed")
    try:
        doc = json.loads(sbom_path.read_text(encoding="utf-8"))
        image = ((doc.get("metadata") or {}).get("component") or {}).get("version")
    except (ValueError, AttributeError) as e:
        return [*problems, f"{where}/{named['file']}: not a CycloneDX document the kit reads ({e})"]
    if image != record.get("id"):
        problems.append(f"{where}/{named['file']}: describes image {image}, not {record.get('id')}")
    rows = read_files(files_path)
    version = int((record.get("files") or {}).get("version") or 1)
    tie = _tie if version >= 2 else _tie_nested
    return problems + _shown(f"{where}/{named['file']}", tie(rows, doc))


def _tie(rows: list[dict], doc: dict) -> list[str]:
    """Version 2: files.tsv's owners against the SBOM's components, count and size."""
    components = {}
    for c in doc.get("components") or []:
        props = {p.get("name"): p.get("value") for p in c.get("properties") or []}
        if FILES in props:
            components[str(c.get("bom-ref", ""))] = (int(props[FILES]), int(props.get(SIZE, -1)))
    held: dict[str, list[int]] = {}
    named = []
    for row in rows:
        if row["type"] == "dir":
            continue
        path, owner = row["path"], str(row.get("owner", ""))
        if row["type"] == "file" and not SHA256.fullmatch(str(row.get("sha256", ""))):
            named.append(f"{path}: no SHA-256 in {FILES_NAME}")
        if not owner:
            named.append(f"{path}: belongs to no component and is not listed as unowned")
        elif not owner.startswith(UNOWNED):
            if owner not in components:
                named.append(f"{path}: belongs to {owner}, which the SBOM does not list")
            count = held.setdefault(owner, [0, 0])
            count[0] += 1
            count[1] += int(row["size_bytes"])
    for ref, (files, size) in sorted(components.items()):
        got = held.get(ref, [0, 0])
        if (files, size) != tuple(got):
            named.append(
                f"{ref}: {files} files of {size} bytes in the SBOM, "
                f"{got[0]} files of {got[1]} bytes in {FILES_NAME}"
            )
    return named


def _tie_nested(rows: list[dict], doc: dict) -> list[str]:
    """Version 1: the SBOM's nested file components against the footprint's entries."""
    entries = _nested_files(doc)
    measured = {str(r["path"]): r for r in rows if r["type"] != "dir"}
    named = []
    for path in sorted(measured.keys() | entries.keys()):
        row, listed = measured.get(path), entries.get(path, [])
        if row is None:
            named.append(f"{path}: in the SBOM, not in the footprint")
        elif not listed:
            named.append(f"{path}: in the footprint, not in the SBOM")
        elif len(listed) > 1:
            named.append(f"{path}: listed {len(listed)} times in the SBOM")
        else:
            size, kind, sha, owned = listed[0]
            if size != row["size_bytes"]:
                named.append(f"{path}: {size} bytes in the SBOM, {row['size_bytes']} measured")
            if kind != row["type"]:
                named.append(
                    f"{path}: a {kind or 'file of no kind'} in the SBOM, a {row['type']} measured"
                )
            if row["type"] == "file" and not sha:
                named.append(f"{path}: no SHA-256 in the SBOM")
            if not owned:
                named.append(f"{path}: belongs to no component and is not listed as unowned")
    return named


def _nested_files(doc: dict) -> dict[str, list[tuple[int, str, str, bool]]]:
    """A version 1 SBOM's files by path: size, kind, SHA-256, and whether a component owns it
    or it is marked unowned (a path listed twice holds two entries)."""
    files: dict[str, list[tuple[int, str, str, bool]]] = {}

    def walk(components: list[dict], owner: str) -> None:
        for c in components:
            if c.get("type") == "file":
                props = {p.get("name"): p.get("value", "") for p in c.get("properties") or []}
                hashes = c.get("hashes") or []
                sha = next((h["content"] for h in hashes if h.get("alg") == "SHA-256"), "")
                owned = bool(owner or props.get("micakit:unowned"))
                entry = (int(props.get(SIZE) or -1), str(props.get("micakit:type", "")), sha, owned)
                files.setdefault(str(c.get("name", "")), []).append(entry)
            walk(c.get("components") or [], str(c.get("bom-ref", "")))

    walk(doc.get("components") or [], "")
    return files


def _shown(sbom: str, named: list[str]) -> list[str]:
    out = [f"{sbom}: {n}" for n in named[:SHOWN]]
    if len(named) > SHOWN:
        out.append(f"{sbom}: and {len(named) - SHOWN} more differences")
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()

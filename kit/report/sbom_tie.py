"""`verify`'s check of each image's bill of materials against its footprint (§8).

The SBOM (footprint/<side>/sbom.cdx.json, kit.executors.docker.sbom) claims what an image holds;
the footprint (files.tsv) is what the kit measured in it. They are tied when the SBOM's files
are the footprint's entries other than folders, size for size and kind for kind, each listed
once, each nested in the component that owns it or marked unowned with what it is; and when
footprint.json's hashes of files.tsv and of the SBOM match the files. A footprint written by
an earlier kit names no SBOM, and none is asked of it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from kit.executors.docker.footprint import FILES_NAME, JSON_NAME, read_files
from kit.executors.docker.sbom import read

SHOWN = 20  # differences named one by one per image; the rest are counted


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
        metadata, entries = read(sbom_path)
    except (ValueError, TypeError, KeyError) as e:
        return [*problems, f"{where}/{named['file']}: not a CycloneDX document the kit reads ({e})"]
    image = (metadata.get("component") or {}).get("version")
    if image != record.get("id"):
        problems.append(f"{where}/{named['file']}: describes image {image}, not {record.get('id')}")
    return problems + _tie(f"{where}/{named['file']}", read_files(files_path), entries)


def _tie(sbom: str, rows: list[dict], entries: dict) -> list[str]:
    """The SBOM's files against the footprint's entries, path by path."""
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
            e = listed[0]
            if e.size_bytes != row["size_bytes"]:
                named.append(
                    f"{path}: {e.size_bytes} bytes in the SBOM, {row['size_bytes']} measured"
                )
            if e.kind != row["type"]:
                kind = e.kind or "file of no kind"
                named.append(f"{path}: a {kind} in the SBOM, a {row['type']} measured")
            if row["type"] == "file" and not e.sha256:
                named.append(f"{path}: no SHA-256 in the SBOM")
            if not e.owner and not e.unowned:
                named.append(f"{path}: belongs to no component and is not listed as unowned")
    out = [f"{sbom}: {n}" for n in named[:SHOWN]]
    if len(named) > SHOWN:
        out.append(f"{sbom}: and {len(named) - SHOWN} more differences")
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()

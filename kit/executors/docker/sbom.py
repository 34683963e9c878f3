"""An image's bill of materials (CycloneDX 1.6), made from what the footprint measured (§8).

`inventory.footprint` reads every member of the image's flattened filesystem once; this module
takes each member as it passes (`Contents.add`: the SHA-256 of every regular file, and the texts
that say who owns what, kit.executors.docker.sbom_packages), and `write` turns the owners into
`sbom.cdx.json`:

- a component per Debian package (its purl with `arch`, `distro` and, where the source package
  is another, `upstream`; supplier from its Maintainer; licenses from its machine-readable
  copyright file), per Python distribution (licenses and author from its METADATA), the
  contender program and each NVIDIA library the Mica image holds (by SHA-256), and the base
  operating system; each with its file count and total size as properties;
- the dependency graph: the image on the operating system and what lies beside it, the
  operating system on its Debian packages, each package on what dpkg's Depends or the
  distribution's Requires-Dist names.

Files are not components: each file's SHA-256 and owner are columns of files.tsv (`owners`),
whose hash footprint.json records; `kit.report.sbom_tie` checks in `verify` that each
component's files are there, count and size. The JSON is written directly: the schema is held
in the tests (tests/unit/executors/test_sbom_consumers.py), not checked on every footprint.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from kit import __version__
from kit.executors.docker.footprint import INIT_LAYER, NAMED_PARTS, UNOWNED, absolute
from kit.executors.docker.sbom_packages import Package, is_text, operating_system, packages

SBOM_NAME = "sbom.cdx.json"
FILES, SIZE = "micakit:files", "micakit:size_bytes"  # each component's files in files.tsv
# what the kit's images add that no package lists, by folder: named, not left anonymous
KIT_ADDITIONS = {
    **{path: "Docker's init layer, in every container (empty)" for path in INIT_LAYER},
    **NAMED_PARTS,
    "/opt/venv": "the virtual environment the PyTorch image makes (Dockerfile.pytorch)",
}
NOBODY = "no package lists it"
IMAGE_REF = "image"


@dataclass
class Contents:
    """What an image's members say beyond their list: each regular file's SHA-256, and the
    texts of the files that name owners (kept whole; they are small)."""

    sha256: dict[str, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)

    def add(self, member: tarfile.TarInfo, tar: tarfile.TarFile) -> None:
        """Hash a regular file as the stream passes it; a hardlink takes its target's hash."""
        path = absolute(member.name)
        if member.islnk():
            target = absolute(member.linkname)
            if target in self.sha256:
                self.sha256[path] = self.sha256[target]
            return
        if not member.isfile():
            return
        f = tar.extractfile(member)
        assert f is not None  # tarfile gives a reader for every regular file's member
        h, keep = hashlib.sha256(), is_text(path)
        kept = []
        while chunk := f.read(1 << 20):
            h.update(chunk)
            if keep:
                kept.append(chunk)
        self.sha256[path] = h.hexdigest()
        if keep:
            self.texts[path] = b"".join(kept).decode("utf-8", "replace")


def owners(
    rows: list[dict[str, str | int]], labels: Mapping[str, str], contents: Contents
) -> tuple[list[Package], dict[str, str]]:
    """Every owner the image names, and each entry's owner as files.tsv's column: the bom-ref
    of the first component that lists it, or UNOWNED and what it is; folders have none."""
    links = {str(r["path"]): str(r["link"]) for r in rows if r["type"] == "symlink"}
    files = [str(r["path"]) for r in rows if r["type"] != "dir"]
    found = packages(labels, contents.texts, contents.sha256, files, links)
    present = set(files)
    column: dict[str, str] = {}
    for package in found:
        for path in package.files:
            if path in present and path not in column:
                column[path] = package.ref
    for path in files:
        if path not in column:
            column[path] = UNOWNED + addition(path)
    return found, column


def addition(path: str) -> str:
    """What an unowned file is: one of the kit's own additions, or no package's."""
    for root, what in KIT_ADDITIONS.items():
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return what
    return NOBODY


def write(
    out_dir: Path,
    record: Mapping,
    found: list[Package],
    column: Mapping[str, str],
    rows: list[dict[str, str | int]],
    texts: Mapping[str, str],
) -> str:
    """Write out_dir/sbom.cdx.json for the footprint `record` (its files.tsv's `rows`, each
    entry's owner in `column`); its SHA-256."""
    held: dict[str, list[int]] = {}
    for row in rows:
        owner = column.get(str(row["path"]), "")
        if owner and not owner.startswith(UNOWNED):
            count = held.setdefault(owner, [0, 0])
            count[0] += 1
            count[1] += int(row["size_bytes"])
    components = [_component(p, held.get(p.ref, [0, 0])) for p in found]
    release = operating_system(texts)
    if release.get("ID"):
        os_ref = f"os:{release['ID']}@{release.get('VERSION_ID', '')}"
        components.insert(0, _operating_system(os_ref, release))
    else:
        os_ref = ""
    files = record["files"]
    doc = {
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        # one document per image and file list: the same measurement names the same serial
        "serialNumber": uuid.uuid5(
            uuid.NAMESPACE_URL, f"{record['id']}/{files['list_sha256']}"
        ).urn,
        "version": 1,
        "metadata": {
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {
                "components": [{"type": "application", "name": "micakit", "version": __version__}]
            },
            "authors": [{"name": f"micakit {__version__}"}],
            "component": {
                "type": "container",
                "bom-ref": IMAGE_REF,
                "name": str(record["image"]),
                "version": str(record["id"]),
                "hashes": [{"alg": "SHA-256", "content": str(record["id"]).split(":")[-1]}],
            },
            "properties": _unowned(files, column),
        },
        "components": components,
        "dependencies": _graph(found, os_ref),
    }
    # one line: json's C encoder serves only unindented output, the indented one is Python's
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n"
    (out_dir / SBOM_NAME).write_text(text, encoding="utf-8")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _unowned(files: Mapping, column: Mapping[str, str]) -> list[dict[str, str]]:
    """The file list the SBOM is tied to, and how many files no component owns, by what."""
    unowned: dict[str, int] = {}
    for owner in column.values():
        if owner.startswith(UNOWNED):
            unowned[owner[len(UNOWNED) :]] = unowned.get(owner[len(UNOWNED) :], 0) + 1
    listed = [
        {"name": "micakit:files_list", "value": str(files["list"])},
        {"name": "micakit:files_list_sha256", "value": str(files["list_sha256"])},
    ]
    return listed + [
        {"name": f"micakit:unowned_files:{what}", "value": str(n)}
        for what, n in sorted(unowned.items())
    ]


def _graph(found: list[Package], os_ref: str) -> list[dict]:
    """The image on the operating system and what lies beside it, the operating system on its
    Debian packages, each package on what it names (every component once, as CycloneDX asks)."""
    debs = [p.ref for p in found if p.purl.startswith("pkg:deb/")]
    top = [p.ref for p in found if not p.purl.startswith("pkg:deb/")]
    out = [{"ref": IMAGE_REF, "dependsOn": [os_ref, *top] if os_ref else [*top, *debs]}]
    if os_ref:
        out.append({"ref": os_ref, "dependsOn": debs})
    return out + [{"ref": p.ref, "dependsOn": list(p.depends)} for p in found]


def _operating_system(ref: str, release: Mapping[str, str]) -> dict:
    supplier: dict = {"name": release.get("NAME") or release["ID"]}
    if release.get("HOME_URL"):
        supplier["url"] = [release["HOME_URL"]]
    out = {
        "type": "operating-system",
        "bom-ref": ref,
        "supplier": supplier,
        "name": release["ID"],
        "version": release.get("VERSION_ID", "") or release.get("VERSION_CODENAME", ""),
        "description": release.get("PRETTY_NAME", ""),
    }
    return {k: v for k, v in out.items() if v}


def _component(p: Package, held: list[int]) -> dict:
    out: dict = {"type": p.kind, "bom-ref": p.ref}
    if p.supplier or p.supplier_url:
        supplier: dict = {"name": p.supplier or p.supplier_url}
        if "@" in p.supplier_email:
            supplier["contact"] = [{"email": p.supplier_email}]
        if p.supplier_url:
            supplier["url"] = [p.supplier_url]
        out["supplier"] = supplier
    if p.purl.startswith("pkg:pypi/") and p.supplier:
        author: dict = {"name": p.supplier}
        if "@" in p.supplier_email:
            author["email"] = p.supplier_email
        out["authors"] = [author]
    out["name"] = p.name
    if p.version:
        out["version"] = p.version
    if p.sha256:
        out["hashes"] = [{"alg": "SHA-256", "content": p.sha256}]
    if p.expression:
        out["licenses"] = [{"expression": p.expression}]
    elif p.licenses:
        out["licenses"] = [{"license": _license(name)} for name in p.licenses]
    if p.purl:
        out["purl"] = p.purl
    out["properties"] = [
        {"name": FILES, "value": str(held[0])},
        {"name": SIZE, "value": str(held[1])},
    ]
    return out


def _license(name: str) -> dict[str, str]:
    # lazy: the report reads this module's names, and CycloneDX's SPDX list loads slowly
    from cyclonedx.spdx import is_supported_id

    return {"id": name} if is_supported_id(name) else {"name": name}

"""An image's bill of materials (CycloneDX), made from what the footprint measured (§8).

`inventory.footprint` reads every member of the image's flattened filesystem once; this module
takes each member as it passes (`Contents.add`: the SHA-256 of every regular file, and the texts
that say who owns what: dpkg's status and file lists, each Python distribution's METADATA and
RECORD), and `write` turns them, with the footprint's own files.tsv, into `sbom.cdx.json`:

- a component per Debian package, Python distribution, the contender program and each NVIDIA
  library the Mica image holds, each with its files nested in it;
- every entry of files.tsv that is not a folder, exactly once, as a component of type `file`
  with its size (`micakit:size_bytes`) and, for a regular file, its SHA-256; a file that no
  package lists stands at the top level, marked `micakit:unowned` with what it is (Docker's
  init layer, nanoGPT's files, or that no package lists it).

So the SBOM's files are the footprint's, size for size: `kit.report.sbom_tie` checks that tie
again in `verify`. Nothing here talks to the engine.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import tarfile
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

from cyclonedx.model import HashAlgorithm, HashType, Property
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

from kit.executors.docker.footprint import INIT_LAYER, NAMED_PARTS, absolute, read_files

SBOM_NAME = "sbom.cdx.json"
SIZE, KIND, LINK, UNOWNED = "micakit:size_bytes", "micakit:type", "micakit:link", "micakit:unowned"
FILE_REF = "file:"  # a file component's bom-ref is FILE_REF + its path
DPKG_STATUS, DPKG_INFO = "/var/lib/dpkg/status", "/var/lib/dpkg/info/"
MICA_LIBS = "/opt/mica/lib/"  # Dockerfile.mica: the NVIDIA libraries the contender opens
PROGRAM_LABEL, PROGRAM_SHA256_LABEL = "org.micakit.program", "org.micakit.program.sha256"
# what the kit's images add that no package lists, by folder: named, not left anonymous
KIT_ADDITIONS = {
    **{path: "Docker's init layer, in every container (empty)" for path in INIT_LAYER},
    **NAMED_PARTS,
    "/opt/venv": "the virtual environment the PyTorch image makes (Dockerfile.pytorch)",
}
NOBODY = "no package lists it"


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
        h, keep = hashlib.sha256(), _names_owners(path)
        kept = []
        while chunk := f.read(1 << 20):
            h.update(chunk)
            if keep:
                kept.append(chunk)
        self.sha256[path] = h.hexdigest()
        if keep:
            self.texts[path] = b"".join(kept).decode("utf-8", "replace")


def _names_owners(path: str) -> bool:
    if path == DPKG_STATUS or (path.startswith(DPKG_INFO) and path.endswith(".list")):
        return True
    folder, name = posixpath.split(path)
    return folder.endswith(".dist-info") and name in ("METADATA", "RECORD")


@dataclass(frozen=True)
class Package:
    """A component that owns files: what it is, and the paths of its files in the image."""

    name: str
    version: str
    kind: ComponentType
    purl: PackageURL | None
    files: tuple[str, ...]
    sha256: str = ""  # the program's own, where a label records it


def packages(
    labels: Mapping[str, str],
    texts: Mapping[str, str],
    paths: Iterable[str],
    links: Mapping[str, str],
) -> list[Package]:
    """Every owner the image names, in the order a file is given to one: the contender
    program, the NVIDIA libraries beside it, the Python distributions, the Debian packages."""
    present = set(paths)
    out = []
    program = labels.get(PROGRAM_LABEL, "")
    if program in present:
        out.append(
            Package(
                posixpath.basename(program),
                "",
                ComponentType.APPLICATION,
                None,
                (program,),
                labels.get(PROGRAM_SHA256_LABEL, ""),
            )
        )
    libs = (p for p in present if p.startswith(MICA_LIBS) and "/" not in p[len(MICA_LIBS) :])
    for path in sorted(libs):
        out.append(Package(posixpath.basename(path), "", ComponentType.LIBRARY, None, (path,)))
    out += _python(texts)
    out += _debian(texts, links)
    return out


def _python(texts: Mapping[str, str]) -> list[Package]:
    out = []
    for path, text in sorted(texts.items()):
        if not path.endswith(".dist-info/METADATA"):
            continue
        info = posixpath.dirname(path)
        meta = HeaderParser().parsestr(text)
        name, version = str(meta.get("Name", "")), str(meta.get("Version", ""))
        site = posixpath.dirname(info)
        record = texts.get(f"{info}/RECORD", "")
        files = [
            posixpath.normpath(posixpath.join(site, line.rsplit(",", 2)[0]))
            for line in record.splitlines()
            if line.strip()
        ]
        purl = PackageURL("pypi", None, name.lower().replace("_", "-"), version)
        out.append(Package(name, version, ComponentType.LIBRARY, purl, tuple(files)))
    return out


def _debian(texts: Mapping[str, str], links: Mapping[str, str]) -> list[Package]:
    out = []
    for block in texts.get(DPKG_STATUS, "").split("\n\n"):
        fields = HeaderParser().parsestr(block)
        name = str(fields.get("Package", ""))
        if not name or not str(fields.get("Status", "")).endswith(" installed"):
            continue
        arch, version = str(fields.get("Architecture", "")), str(fields.get("Version", ""))
        listed = texts.get(f"{DPKG_INFO}{name}:{arch}.list") or texts.get(
            f"{DPKG_INFO}{name}.list", ""
        )
        files = [_resolved(line.strip(), links) for line in listed.splitlines() if line.strip()]
        purl = PackageURL("deb", "debian", name, version, {"arch": arch} if arch else None)
        out.append(Package(name, version, ComponentType.LIBRARY, purl, tuple(files)))
    return out


def _resolved(path: str, links: Mapping[str, str]) -> str:
    """`path` with its folders' symlinks followed (Debian lists /bin/ls; merged /usr holds it
    at /usr/bin/ls); the last part is kept, a package may ship a link of its own."""
    parts = path.strip("/").split("/")
    for _ in range(40):  # a loop of links ends here, unresolved
        here = "/"
        for i, part in enumerate(parts[:-1]):
            at = posixpath.join(here, part)
            if at in links:  # a relative target is read from the link's own folder
                target = posixpath.normpath(posixpath.join(here, links[at]))
                parts = target.strip("/").split("/") + parts[i + 1 :]
                break
            here = at
        else:
            return posixpath.join(here, parts[-1])
    return path


def owners(rows: list[dict[str, str | int]], found: list[Package]) -> dict[str, int]:
    """Each file's owner, an index into `found`: the first that lists it."""
    files = {str(r["path"]) for r in rows if r["type"] != "dir"}
    out: dict[str, int] = {}
    for index, package in enumerate(found):
        for path in package.files:
            if path in files and path not in out:
                out[path] = index
    return out


def addition(path: str) -> str:
    """What an unowned file is: one of the kit's own additions, or no package's."""
    for root, what in KIT_ADDITIONS.items():
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return what
    return NOBODY


def write(out_dir: Path, record: Mapping, contents: Contents) -> str:
    """Write out_dir/sbom.cdx.json from the footprint there (files.tsv, `record`) and what the
    stream said (`contents`); its SHA-256."""
    rows = read_files(out_dir / "files.tsv")
    links = {str(r["path"]): str(r["link"]) for r in rows if r["type"] == "symlink"}
    labels = dict(record.get("labels") or {})
    found = packages(labels, contents.texts, (str(r["path"]) for r in rows), links)
    owner = owners(rows, found)
    nested: dict[int, list[Component]] = {}
    unowned = []
    for row in rows:
        if row["type"] == "dir":
            continue  # folders are the footprint's; the SBOM lists what they hold
        path = str(row["path"])
        component = _file(row, contents.sha256.get(path, ""))
        if path in owner:
            nested.setdefault(owner[path], []).append(component)
        else:
            component.properties.add(Property(name=UNOWNED, value=addition(path)))
            unowned.append(component)
    components = [_package(p, nested.get(i, [])) for i, p in enumerate(found)]
    image = Component(
        type=ComponentType.CONTAINER,
        name=str(record["image"]),
        version=str(record["id"]),
        bom_ref="image",
    )
    bom = Bom(components=[*components, *unowned])
    bom.metadata.component = image
    bom.register_dependency(image, [*components, *unowned])
    text = JsonV1Dot6(bom).output_as_string(indent=None) + "\n"
    (out_dir / SBOM_NAME).write_text(text, encoding="utf-8")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _file(row: Mapping[str, str | int], sha256: str) -> Component:
    path = str(row["path"])
    props = [
        Property(name=SIZE, value=str(row["size_bytes"])),
        Property(name=KIND, value=str(row["type"])),
    ]
    if row["link"]:
        props.append(Property(name=LINK, value=str(row["link"])))
    hashes = [HashType(alg=HashAlgorithm.SHA_256, content=sha256)] if sha256 else []
    return Component(
        type=ComponentType.FILE, name=path, bom_ref=FILE_REF + path, hashes=hashes, properties=props
    )


def _package(p: Package, files: list[Component]) -> Component:
    ref = p.purl.to_string() if p.purl else f"{p.kind.value}:{p.files[0]}"
    hashes = [HashType(alg=HashAlgorithm.SHA_256, content=p.sha256)] if p.sha256 else []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an empty version is the library's to warn of
        return Component(
            type=p.kind,
            name=p.name,
            version=p.version or None,
            purl=p.purl,
            bom_ref=ref,
            hashes=hashes,
            components=files,
        )


@dataclass(frozen=True)
class FileEntry:
    """A file as an SBOM lists it: its size, kind, SHA-256, link, and owner or why none."""

    size_bytes: int
    kind: str
    sha256: str
    link: str
    owner: str  # the component's bom-ref, "" at the top level
    unowned: str  # what a top-level file is (micakit:unowned), "" where not said


def read(path: Path) -> tuple[dict, dict[str, list[FileEntry]]]:
    """The SBOM's metadata and its files, by path (a path listed twice holds two entries)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    files: dict[str, list[FileEntry]] = {}

    def walk(components: list[dict], owner: str) -> None:
        for c in components:
            if c.get("type") == "file":
                props = {p.get("name"): p.get("value", "") for p in c.get("properties") or []}
                sha = next(
                    (h["content"] for h in c.get("hashes") or [] if h.get("alg") == "SHA-256"), ""
                )
                entry = FileEntry(
                    int(props.get(SIZE) or -1),
                    str(props.get(KIND, "")),
                    sha,
                    str(props.get(LINK, "")),
                    owner,
                    str(props.get(UNOWNED, "")),
                )
                files.setdefault(str(c.get("name", "")), []).append(entry)
            walk(c.get("components") or [], str(c.get("bom-ref", "")))

    walk(doc.get("components") or [], "")
    return doc.get("metadata") or {}, files

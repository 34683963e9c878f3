"""An image's bill of materials (kit.executors.docker.sbom) and its tie to the footprint
(kit.report.sbom_tie): a component per package with what scanners match it by, the dependency
graph, each file's SHA-256 and owner in files.tsv, and `verify`'s check that each component's
files are there, count and size. The engine is a small recorded stand-in: one image's members
as a tar, with dpkg's status, lists and copyright files, os-release, Python distributions'
METADATA and RECORD, merged /usr's links, a hardlink, the contender program and a library, and
files no package lists."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from kit.executors.docker import inventory, reproducible, sbom
from kit.executors.docker.footprint import read_files
from kit.report import sbom_tie

PROGRAM = b"\x7fELF the contender"
# as Debian 12's dpkg writes them: a package built from a source of another name (libssl3 from
# openssl), a dependency through an alternative and a virtual package, a removed package
STATUS = (
    "Package: coreutils\nEssential: yes\nStatus: install ok installed\n"
    "Maintainer: Michael Stone <mstone@debian.org>\nArchitecture: amd64\nVersion: 9.1-1\n"
    "Pre-Depends: libc6 (>= 2.34), libssl3 (>= 3.0.0)\n\n"
    "Package: libssl3\nStatus: install ok installed\n"
    "Maintainer: Debian OpenSSL Team <pkg-openssl-devel@alioth-lists.debian.net>\n"
    "Architecture: amd64\nSource: openssl\nVersion: 3.0.17-1~deb12u2\n"
    "Depends: libc6 (>= 2.34), gawk | awk\n\n"
    "Package: libc6\nStatus: install ok installed\nMaintainer: GNU Libc Maintainers "
    "<debian-glibc@lists.debian.org>\nArchitecture: amd64\nSource: glibc\nVersion: 2.36-9+deb12u10\n"
    "Depends: libgcc-s1\n\n"
    "Package: mawk\nStatus: install ok installed\nMaintainer: Boyuan Yang <byang@debian.org>\n"
    "Architecture: amd64\nVersion: 1.3.4.20200120-3.1\nProvides: awk\n\n"
    "Package: gone\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 1\n"
)
DEP5 = (
    "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
    "Upstream-Name: coreutils\n\nFiles: *\nCopyright: 1984-2022 Free Software Foundation\n"
    "License: GPL-3+\n\nFiles: debian/*\nCopyright: 2004 Michael Stone\nLicense: GPL-3+\n\n"
    "License: GPL-3+\n This program is free software\n"
)
OS_RELEASE = (
    'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\n'
    'VERSION="12 (bookworm)"\nID=debian\nHOME_URL="https://www.debian.org/"\n'
)
SITE = "opt/venv/lib/python3.11/site-packages"
NUMPY_META = (
    "Metadata-Version: 2.4\nName: numpy\nVersion: 2.4.6\n"
    "Maintainer-Email: NumPy Developers <numpy-discussion@python.org>\n"
    "License-Expression: BSD-3-Clause AND 0BSD AND MIT AND Zlib AND CC0-1.0\n\n"
)
TORCH_META = (
    "Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\nAuthor: PyTorch Team\n"
    "Author-email: packages@pytorch.org\nLicense: BSD-3-Clause\n"
    "Classifier: License :: OSI Approved :: BSD License\n"
    "Requires-Dist: numpy\nRequires-Dist: filelock\n"
    'Requires-Dist: opt-einsum>=3.3; extra == "opt-einsum"\n\n'
)
MEMBERS: list[tuple[str, str, bytes | str]] = [  # (path, kind, body or link target)
    ("bin", "symlink", "usr/bin"),
    ("usr/bin/ls", "file", b"ls" * 50),
    ("usr/bin/dir", "hardlink", "usr/bin/ls"),
    ("usr/lib/x86_64-linux-gnu/libssl.so.3", "file", b"ssl" * 30),
    ("usr/lib/x86_64-linux-gnu/libc.so.6", "file", b"libc" * 40),
    ("usr/bin/mawk", "file", b"mawk" * 5),
    ("usr/lib/os-release", "file", OS_RELEASE.encode()),
    ("etc/os-release", "symlink", "../usr/lib/os-release"),
    ("usr/share/doc/coreutils/copyright", "file", DEP5.encode()),
    ("usr/share/doc/libssl3/copyright", "file", b"This is free text, not DEP-5.\n"),
    ("var/lib/dpkg/status", "file", STATUS.encode()),
    (
        "var/lib/dpkg/info/coreutils.list",
        "file",
        b"/.\n/bin\n/bin/ls\n/usr/bin/dir\n/usr/share/doc/coreutils/copyright\n",
    ),
    (
        "var/lib/dpkg/info/libssl3:amd64.list",
        "file",
        b"/usr/lib/x86_64-linux-gnu/libssl.so.3\n/usr/share/doc/libssl3/copyright\n",
    ),
    ("var/lib/dpkg/info/libc6:amd64.list", "file", b"/usr/lib/x86_64-linux-gnu/libc.so.6\n"),
    ("var/lib/dpkg/info/mawk.list", "file", b"/usr/bin/mawk\n"),
    (f"{SITE}/numpy/__init__.py", "file", b"import sys\n"),
    (f"{SITE}/numpy-2.4.6.dist-info/METADATA", "file", NUMPY_META.encode()),
    (
        f"{SITE}/numpy-2.4.6.dist-info/RECORD",
        "file",
        b"numpy/__init__.py,sha256=x,11\nnumpy-2.4.6.dist-info/METADATA,,\n"
        b"numpy-2.4.6.dist-info/RECORD,,\n../../../bin/f2py,,\n",
    ),
    (f"{SITE}/torch/__init__.py", "file", b"import numpy\n"),
    (f"{SITE}/torch-2.13.0.dist-info/METADATA", "file", TORCH_META.encode()),
    (
        f"{SITE}/torch-2.13.0.dist-info/RECORD",
        "file",
        b"torch/__init__.py,,\ntorch-2.13.0.dist-info/METADATA,,\ntorch-2.13.0.dist-info/RECORD,,\n",
    ),
    ("opt/venv/bin/f2py", "file", b"#!/opt/venv/bin/python\n"),
    ("opt/venv/pyvenv.cfg", "file", b"home = /usr/bin\n"),
    ("opt/mica/bin/mica", "file", PROGRAM),
    ("opt/mica/lib/libcublas.so.12", "file", b"cublas" * 100),
    ("opt/nanogpt/train.py", "file", b"print('train')\n"),
    (".dockerenv", "file", b""),
    ("etc/ld.so.cache", "file", b"cache"),
]
LABELS = {
    "org.micakit.program": "/opt/mica/bin/mica",
    "org.micakit.program.sha256": hashlib.sha256(PROGRAM).hexdigest(),
}


def image_tar(edit: dict[str, bytes] | None = None) -> bytes:
    """The image's filesystem; `edit`: other bytes at some paths."""
    edit = edit or {}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        folders = sorted({str(Path(p).parent) for p, _, _ in MEMBERS} - {"."})
        for folder in folders:
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, kind, body in MEMBERS:
            info = tarfile.TarInfo(path)
            if kind == "file":
                body = edit.get("/" + path, body)
                assert isinstance(body, bytes)
                info.size = len(body)
                tar.addfile(info, io.BytesIO(body))
                continue
            info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
            info.linkname = str(body)
            tar.addfile(info)
    return buf.getvalue()


class FakeAPI:
    """The calls `inventory.footprint` makes, for one image."""

    def __init__(self, edit: dict[str, bytes] | None = None) -> None:
        self.edit = edit

    def inspect_image(self, ref: str) -> dict:
        return {"Id": "sha256:" + "ab" * 32, "Size": 4096, "Config": {"Labels": LABELS}}

    def history(self, ref: str) -> list:
        return []

    def create_container(self, image_id: str, **kw) -> dict:
        return {"Id": "c0"}

    def export(self, cid: str, chunk_size: int):
        data = image_tar(self.edit)
        yield from (data[i : i + 700] for i in range(0, len(data), 700))

    def remove_container(self, cid: str, force: bool) -> None:
        pass


class FakeClient:
    def __init__(self, api: FakeAPI | None = None) -> None:
        self.api = api or FakeAPI()


@pytest.fixture
def measured(tmp_path: Path) -> Path:
    folder = tmp_path / "footprint" / "contender"
    inventory.footprint(FakeClient(), "micakit-mica:t", folder)  # type: ignore[arg-type]
    return folder


def components(folder: Path) -> dict[str, dict]:
    doc = json.loads((folder / sbom.SBOM_NAME).read_text())
    return {c["name"]: c for c in doc["components"]}


def test_a_component_per_package_with_its_purl_supplier_and_licenses(measured):
    text = (measured / sbom.SBOM_NAME).read_text()
    # a document of CycloneDX 1.6's published schema (jsonschema, the dev extra's)
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    assert doc["metadata"]["component"]["version"] == "sha256:" + "ab" * 32
    assert doc["metadata"]["tools"]["components"][0]["name"] == "micakit"
    assert not [c for c in doc["components"] if c["type"] == "file"]  # files are not components
    by_name = components(measured)
    assert sorted(by_name) == [
        "coreutils", "debian", "libc6", "libcublas.so.12", "libssl3", "mawk", "mica", "numpy",
        "torch",
    ]  # fmt: skip
    coreutils = by_name["coreutils"]
    assert coreutils["purl"] == "pkg:deb/debian/coreutils@9.1-1?arch=amd64&distro=debian-12"
    assert coreutils["supplier"] == {
        "name": "Michael Stone",
        "contact": [{"email": "mstone@debian.org"}],
    }
    assert coreutils["licenses"] == [{"license": {"id": "GPL-3.0-or-later"}}]  # DEP-5's GPL-3+
    # the source package, where it is another: what scanners match Debian's advisories by
    libssl3 = by_name["libssl3"]
    assert libssl3["purl"] == (
        "pkg:deb/debian/libssl3@3.0.17-1~deb12u2?arch=amd64&distro=debian-12&upstream=openssl"
    )
    assert "licenses" not in libssl3  # its copyright file is free text: no license claimed
    assert by_name["debian"]["type"] == "operating-system"
    assert by_name["debian"]["version"] == "12"
    numpy = by_name["numpy"]
    assert numpy["purl"] == "pkg:pypi/numpy@2.4.6"
    assert numpy["licenses"] == [{"expression": NUMPY_META.split("License-Expression: ")[1][:-2]}]
    assert numpy["supplier"]["name"] == "NumPy Developers"
    torch = by_name["torch"]
    assert torch["authors"] == [{"name": "PyTorch Team", "email": "packages@pytorch.org"}]
    assert torch["licenses"] == [{"license": {"id": "BSD-3-Clause"}}]
    program = by_name["mica"]
    assert program["type"] == "application"
    assert program["hashes"][0]["content"] == LABELS["org.micakit.program.sha256"]
    assert by_name["libcublas.so.12"]["hashes"][0]["content"] == (
        hashlib.sha256(b"cublas" * 100).hexdigest()
    )
    assert by_name["libcublas.so.12"]["supplier"]["name"] == "NVIDIA Corporation"


def test_the_dependency_graph_is_dpkgs_and_the_distributions(measured):
    doc = json.loads((measured / sbom.SBOM_NAME).read_text())
    by_ref = {c["bom-ref"]: c["name"] for c in doc["components"]}
    by_ref["image"] = "image"
    graph = {
        by_ref[d["ref"]]: sorted(by_ref[t] for t in d["dependsOn"]) for d in doc["dependencies"]
    }
    assert graph["image"] == ["debian", "libcublas.so.12", "mica", "numpy", "torch"]
    assert graph["debian"] == ["coreutils", "libc6", "libssl3", "mawk"]
    assert graph["coreutils"] == ["libc6", "libssl3"]  # Pre-Depends
    assert graph["libssl3"] == ["libc6", "mawk"]  # gawk | awk: mawk provides awk
    assert graph["libc6"] == []  # libgcc-s1 is not installed here
    assert graph["torch"] == ["numpy"]  # filelock is absent; opt-einsum only for an extra


def test_files_tsv_holds_each_files_sha256_and_owner(measured):
    rows = {r["path"]: r for r in read_files(measured / "files.tsv")}
    record = json.loads((measured / "footprint.json").read_text())
    assert record["files"]["version"] == 2
    coreutils = "pkg:deb/debian/coreutils@9.1-1?arch=amd64&distro=debian-12"
    # Debian lists /bin/ls; merged /usr holds it at /usr/bin/ls (and /bin, a folder in the
    # package, is a link in the image)
    owned = sorted(p for p, r in rows.items() if r["owner"] == coreutils)
    assert owned == ["/bin", "/usr/bin/dir", "/usr/bin/ls", "/usr/share/doc/coreutils/copyright"]
    assert rows["/usr/bin/ls"]["sha256"] == hashlib.sha256(b"ls" * 50).hexdigest()
    assert rows["/usr/bin/dir"]["sha256"] == rows["/usr/bin/ls"]["sha256"]  # a hardlink
    assert rows["/opt/venv/bin/f2py"]["owner"] == "pkg:pypi/numpy@2.4.6"
    props = {p["name"]: p["value"] for p in components(measured)["coreutils"]["properties"]}
    assert props == {"micakit:files": "4", "micakit:size_bytes": str(100 + len(DEP5))}
    assert rows["/.dockerenv"]["owner"].startswith("unowned: Docker's init layer")
    assert rows["/opt/nanogpt/train.py"]["owner"].startswith("unowned: nanoGPT's files")
    assert rows["/opt/venv/pyvenv.cfg"]["owner"].startswith("unowned: the virtual environment")
    assert rows["/etc/ld.so.cache"]["owner"] == "unowned: " + sbom.NOBODY
    assert rows["/opt"]["owner"] == "" if "/opt" in rows else True  # folders: the footprint's


def test_the_sbom_is_tied_to_the_footprint(measured):
    assert sbom_tie.differences(measured.parent) == []
    record = json.loads((measured / "footprint.json").read_text())
    text = (measured / sbom.SBOM_NAME).read_bytes()
    assert record["sbom"] == {"file": sbom.SBOM_NAME, "sha256": hashlib.sha256(text).hexdigest()}


def _edit(folder: Path, name: str, edit) -> None:
    """Change the SBOM (`edit(doc)`) or files.tsv (`edit(text)`) and re-record its hash, as
    one who edits both would."""
    path = folder / name
    record = json.loads((folder / "footprint.json").read_text())
    if name == sbom.SBOM_NAME:
        doc = json.loads(path.read_text())
        edit(doc)
        path.write_text(json.dumps(doc))
        record["sbom"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    else:
        path.write_text(edit(path.read_text()))
        record["files"]["list_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (folder / "footprint.json").write_text(json.dumps(record))


def test_a_component_dropped_or_a_size_changed_is_named(measured):
    def drop_and_grow(doc: dict) -> None:
        doc["components"] = [c for c in doc["components"] if c["name"] != "mawk"]
        numpy = next(c for c in doc["components"] if c["name"] == "numpy")
        numpy["properties"][1]["value"] = "12"

    _edit(measured, sbom.SBOM_NAME, drop_and_grow)
    where = "footprint/contender/sbom.cdx.json"
    mawk = "pkg:deb/debian/mawk@1.3.4.20200120-3.1?arch=amd64&distro=debian-12"
    numpy_bytes = 11 + 23 + len(NUMPY_META) + len(MEMBERS[17][2])
    assert sbom_tie.differences(measured.parent) == [
        f"{where}: /usr/bin/mawk: belongs to {mawk}, which the SBOM does not list",
        f"{where}: pkg:pypi/numpy@2.4.6: 4 files of 12 bytes in the SBOM, "
        f"4 files of {numpy_bytes} bytes in files.tsv",
    ]


def test_a_file_whose_size_owner_or_hash_is_edited_in_the_list_is_named(measured):
    def edit(text: str) -> str:
        lines = text.splitlines()
        for i, line in enumerate(lines):
            f = line.split("\t")
            if f[0] == "/usr/bin/mawk":
                f[1] = "21"  # one byte more
            if f[0] == "/etc/ld.so.cache":
                f[6] = ""  # neither owned nor unowned
            if f[0] == "/usr/bin/ls":
                f[5] = ""
            lines[i] = "\t".join(f)
        return "\n".join(lines) + "\n"

    _edit(measured, "files.tsv", edit)
    where = "footprint/contender/sbom.cdx.json"
    mawk = "pkg:deb/debian/mawk@1.3.4.20200120-3.1?arch=amd64&distro=debian-12"
    assert sbom_tie.differences(measured.parent) == [
        f"{where}: /etc/ld.so.cache: belongs to no component and is not listed as unowned",
        f"{where}: /usr/bin/ls: no SHA-256 in files.tsv",
        f"{where}: {mawk}: 1 files of 20 bytes in the SBOM, 1 files of 21 bytes in files.tsv",
    ]


def test_an_edited_sbom_a_removed_one_or_an_edited_file_list_is_named(measured):
    path = measured / sbom.SBOM_NAME
    path.write_text(path.read_text().replace("Michael Stone", "Someone Else"))
    assert sbom_tie.differences(measured.parent) == [
        "footprint/contender/sbom.cdx.json: differs from the SBOM footprint.json hashed"
    ]
    path.unlink()
    assert sbom_tie.differences(measured.parent) == [
        "footprint/contender/sbom.cdx.json: missing (footprint.json names it)"
    ]
    files = measured / "files.tsv"
    kept = [line for line in files.read_text().splitlines() if "/etc/ld.so.cache" not in line]
    files.write_text("\n".join(kept) + "\n")
    assert sbom_tie.differences(measured.parent)[0] == (
        "footprint/contender/files.tsv: differs from the list footprint.json hashed"
    )


def test_an_earlier_kits_footprints_still_verify_and_their_ties_still_hold(tmp_path: Path):
    fixtures = Path(__file__).parents[2] / "fixtures"
    assert sbom_tie.differences(fixtures / "footprint") == []  # recorded before SBOMs
    # recorded by the kit whose SBOM nested every file in its owner (files.tsv, version 1)
    earlier = tmp_path / "footprint"
    shutil.copytree(fixtures / "sbom-v1" / "footprint", earlier)
    assert sbom_tie.differences(earlier) == []
    folder = earlier / "contender"

    def drop_ls(doc: dict) -> None:
        coreutils = next(c for c in doc["components"] if c["name"] == "coreutils")
        coreutils["components"] = [f for f in coreutils["components"] if f["name"] != "/usr/bin/ls"]

    _edit(folder, sbom.SBOM_NAME, drop_ls)
    assert sbom_tie.differences(earlier) == [
        "footprint/contender/sbom.cdx.json: /usr/bin/ls: in the footprint, not in the SBOM"
    ]


def test_a_rebuild_check_names_each_file_that_differs(tmp_path: Path):
    inventory.footprint(FakeClient(), "a", tmp_path / "first")  # type: ignore[arg-type]
    other = FakeAPI(edit={"/usr/bin/ls": b"LS" * 50, "/etc/ld.so.cache": b"cache, longer"})
    inventory.footprint(FakeClient(other), "b", tmp_path / "second")  # type: ignore[arg-type]
    assert reproducible.differences(tmp_path / "first", tmp_path / "first") == []
    assert reproducible.differences(tmp_path / "first", tmp_path / "second") == [
        "/etc/ld.so.cache: size_bytes 5 in the first build, 13 in the second",
        "/usr/bin/dir: the same size, other content",  # a hardlink to /usr/bin/ls
        "/usr/bin/ls: the same size, other content",
    ]

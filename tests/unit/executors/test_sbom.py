"""An image's bill of materials (kit.executors.docker.sbom) and its tie to the footprint
(kit.report.sbom_tie): every file once, size for size, by the package that owns it or marked
unowned with what it is. The engine is a small recorded stand-in: one image's members as a tar,
with dpkg's status and lists, a Python distribution's METADATA and RECORD, merged /usr's links,
a hardlink, the contender program and a library, and files no package lists."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from kit.executors.docker import inventory, reproducible, sbom
from kit.report import sbom_tie

PROGRAM = b"\x7fELF the contender"
STATUS = (
    "Package: coreutils\nStatus: install ok installed\nArchitecture: amd64\nVersion: 9.1-1\n\n"
    "Package: gone\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 1\n"
)
SITE = "opt/venv/lib/python3.11/site-packages"
MEMBERS: list[tuple[str, str, bytes | str]] = [  # (path, kind, body or link target)
    ("bin", "symlink", "usr/bin"),
    ("usr/bin/ls", "file", b"ls" * 50),
    ("usr/bin/dir", "hardlink", "usr/bin/ls"),
    ("var/lib/dpkg/status", "file", STATUS.encode()),
    ("var/lib/dpkg/info/coreutils.list", "file", b"/.\n/bin\n/bin/ls\n/usr/bin/dir\n"),
    (f"{SITE}/numpy/__init__.py", "file", b"import sys\n"),
    (f"{SITE}/numpy-2.4.6.dist-info/METADATA", "file", b"Name: numpy\nVersion: 2.4.6\n\n"),
    (
        f"{SITE}/numpy-2.4.6.dist-info/RECORD",
        "file",
        b"numpy/__init__.py,sha256=x,11\nnumpy-2.4.6.dist-info/METADATA,,\n"
        b"numpy-2.4.6.dist-info/RECORD,,\n../../../bin/f2py,,\n",
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


def test_each_file_lies_in_the_package_that_owns_it_with_its_size_and_sha256(measured):
    text = (measured / sbom.SBOM_NAME).read_text()
    # a document of CycloneDX 1.6's published schema (jsonschema, the dev extra's)
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    assert doc["bomFormat"] == "CycloneDX" and doc["specVersion"] == "1.6"
    assert doc["metadata"]["component"]["version"] == "sha256:" + "ab" * 32
    by_name = components(measured)
    coreutils = by_name["coreutils"]
    assert coreutils["purl"] == "pkg:deb/debian/coreutils@9.1-1?arch=amd64"
    # Debian lists /bin/ls; merged /usr holds it at /usr/bin/ls (and /bin, a folder in the
    # package, is a link in the image)
    names = sorted(f["name"] for f in coreutils["components"])
    assert names == ["/bin", "/usr/bin/dir", "/usr/bin/ls"]
    ls = next(f for f in coreutils["components"] if f["name"] == "/usr/bin/ls")
    assert ls["hashes"] == [{"alg": "SHA-256", "content": hashlib.sha256(b"ls" * 50).hexdigest()}]
    assert {p["name"]: p["value"] for p in ls["properties"]}["micakit:size_bytes"] == "100"
    dir_ = next(f for f in coreutils["components"] if f["name"] == "/usr/bin/dir")
    assert dir_["hashes"] == ls["hashes"]  # a hardlink: its file's bytes
    assert "gone" not in by_name  # removed, only its configuration files left
    numpy = by_name["numpy"]
    assert numpy["purl"] == "pkg:pypi/numpy@2.4.6"
    assert f"/{SITE}/numpy/__init__.py" in {f["name"] for f in numpy["components"]}
    assert "/opt/venv/bin/f2py" in {f["name"] for f in numpy["components"]}
    program = by_name["mica"]
    assert program["type"] == "application"
    assert program["hashes"][0]["content"] == LABELS["org.micakit.program.sha256"]
    assert [f["name"] for f in by_name["libcublas.so.12"]["components"]] == [
        "/opt/mica/lib/libcublas.so.12"
    ]


def test_what_no_package_lists_is_marked_unowned_and_the_kits_additions_are_named(measured):
    by_name = components(measured)

    def why(path: str) -> str:
        props = {p["name"]: p["value"] for p in by_name[path]["properties"]}
        return props["micakit:unowned"]

    assert why("/.dockerenv").startswith("Docker's init layer")
    assert why("/opt/nanogpt/train.py").startswith("nanoGPT's files")
    assert why("/opt/venv/pyvenv.cfg").startswith("the virtual environment")
    assert why("/etc/ld.so.cache") == sbom.NOBODY


def test_the_sbom_is_tied_to_the_footprint(measured):
    assert sbom_tie.differences(measured.parent) == []
    record = json.loads((measured / "footprint.json").read_text())
    text = (measured / sbom.SBOM_NAME).read_bytes()
    assert record["sbom"] == {"file": sbom.SBOM_NAME, "sha256": hashlib.sha256(text).hexdigest()}
    _, files = sbom.read(measured / sbom.SBOM_NAME)
    rows = (measured / "files.tsv").read_text().splitlines()[1:]
    assert set(files) == {r.split("\t")[0] for r in rows if r.split("\t")[2] != "dir"}


def _edit_sbom(folder: Path, edit) -> None:
    """Change the SBOM and re-record its hash, as one who edits both would."""
    path = folder / sbom.SBOM_NAME
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    record = json.loads((folder / "footprint.json").read_text())
    record["sbom"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (folder / "footprint.json").write_text(json.dumps(record))


def test_a_file_dropped_from_the_sbom_or_a_size_changed_is_named(measured):
    def drop_and_grow(doc: dict) -> None:
        coreutils = next(c for c in doc["components"] if c["name"] == "coreutils")
        coreutils["components"] = [f for f in coreutils["components"] if f["name"] != "/usr/bin/ls"]
        numpy = next(c for c in doc["components"] if c["name"] == "numpy")
        for f in numpy["components"]:
            for p in f["properties"]:
                if f["name"].endswith("__init__.py") and p["name"] == "micakit:size_bytes":
                    p["value"] = "12"

    _edit_sbom(measured, drop_and_grow)
    got = sbom_tie.differences(measured.parent)
    where = "footprint/contender/sbom.cdx.json"
    assert got == [
        f"{where}: /{SITE}/numpy/__init__.py: 12 bytes in the SBOM, 11 measured",
        f"{where}: /usr/bin/ls: in the footprint, not in the SBOM",
    ]


def test_an_edited_sbom_a_removed_one_or_an_edited_file_list_is_named(measured):
    path = measured / sbom.SBOM_NAME
    path.write_text(path.read_text().replace("9.1-1", "9.9-9"))
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


def test_a_file_at_the_top_level_neither_owned_nor_unowned_is_named(measured):
    def unmark(doc: dict) -> None:
        top = next(c for c in doc["components"] if c["name"] == "/etc/ld.so.cache")
        top["properties"] = [p for p in top["properties"] if p["name"] != "micakit:unowned"]

    _edit_sbom(measured, unmark)
    assert sbom_tie.differences(measured.parent) == [
        "footprint/contender/sbom.cdx.json: /etc/ld.so.cache: belongs to no component and is not listed "
        "as unowned"
    ]


def test_an_earlier_kits_footprint_without_an_sbom_asks_for_none(measured):
    record = json.loads((measured / "footprint.json").read_text())
    del record["sbom"]
    (measured / "footprint.json").write_text(json.dumps(record))
    (measured / sbom.SBOM_NAME).unlink()
    assert sbom_tie.differences(measured.parent) == []
    fixture = Path(__file__).parents[2] / "fixtures" / "footprint"
    assert sbom_tie.differences(fixture) == []  # recorded before SBOMs were written


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

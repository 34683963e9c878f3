"""An image's footprint (§8): its size, identity, layers and full file list, and the ratio of
two footprints. `kit.executors.docker.inventory` reads the image from the engine and feeds this
module the flattened filesystem's tar members; nothing here talks to the engine.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

SCHEMA_VERSION = 1
BASE = "base"  # footprint/<side>/base/: the image the measured one is built FROM
BASE_LABEL = "org.micakit.base"  # the measured images name their base (Dockerfile.*)
JSON_NAME = "footprint.json"
FILES_NAME = "files.tsv"
FILES_HEADER = ("path", "size_bytes", "type", "mode", "link", "sha256", "owner")
# footprint.json's `files.version`: 2 adds each file's SHA-256 and its owner (the bom-ref of the
# SBOM's component that lists it, or "unowned: " and what it is) to files.tsv; a list without
# the key is version 1, whose SBOM nests every file in its owner (kit/report/sbom_tie.py reads
# both)
FILES_VERSION = 2
UNOWNED = "unowned: "

_TYPES = {
    tarfile.REGTYPE: "file",
    tarfile.AREGTYPE: "file",
    tarfile.CONTTYPE: "file",
    tarfile.DIRTYPE: "dir",
    tarfile.SYMTYPE: "symlink",
    tarfile.LNKTYPE: "hardlink",
    tarfile.CHRTYPE: "char",
    tarfile.BLKTYPE: "block",
    tarfile.FIFOTYPE: "fifo",
}

# A created container's filesystem is the image's plus Docker's init layer: these empty
# placeholders, which every container of every image has (and /etc/mtab, a symlink).
INIT_LAYER = (
    "/.dockerenv",
    "/dev",
    "/dev/console",
    "/dev/pts",
    "/dev/shm",
    "/etc/hostname",
    "/etc/hosts",
    "/etc/mtab",
    "/etc/resolv.conf",
    "/proc",
    "/sys",
)


class ChunkReader(io.RawIOBase):
    """A read-only file object over the export's chunks, for tarfile's stream mode (`r|`);
    seeking and writing raise io.UnsupportedOperation, as the stream mode never asks them."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__()
        self._chunks = chunks
        self._buf = b""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buf) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buf += chunk
        if size < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:size], self._buf[size:]
        return out


class FootprintWriter:
    """Collects the file list from tar members, then writes footprint.json and files.tsv."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self._rows: list[tuple[str, int, str, str, str]] = []

    def add(self, member: tarfile.TarInfo) -> None:
        path = absolute(member.name)
        kind = _TYPES.get(member.type, "other")
        size = member.size if kind == "file" else 0  # a hardlink's bytes count once, at its file
        link = member.linkname if kind in ("symlink", "hardlink") else ""
        if link and kind == "hardlink":
            link = absolute(link)  # a hardlink names a member; a symlink keeps its own text
        self._rows.append((path, size, kind, f"{member.mode & 0o7777:04o}", link))

    def rows(self) -> list[dict[str, str | int]]:
        """The entries so far, by path, as `read_files` gives them back (no hash, no owner)."""
        return [dict(zip(FILES_HEADER, row, strict=False)) for row in sorted(self._rows)]

    def finish(
        self,
        image_ref: str,
        image: Mapping,
        history: list[Mapping],
        sha256: Mapping[str, str] | None = None,
        owner: Mapping[str, str] | None = None,
    ) -> dict:
        """Write files.tsv (each regular file's and hardlink's `sha256`, each entry's `owner`
        where given) and footprint.json; the record."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        rows = sorted(self._rows)
        text = _files_text(rows, sha256 or {}, owner or {})
        files_path = self.out_dir / FILES_NAME
        files_path.write_text(text, encoding="utf-8")
        counts: dict[str, int] = {}
        for _, _, kind, _, _ in rows:
            counts[kind] = counts.get(kind, 0) + 1
        config = image.get("Config") or {}
        record = {
            "schema_version": SCHEMA_VERSION,
            "image": image_ref,
            "id": image["Id"],
            "repo_tags": list(image.get("RepoTags") or []),
            "repo_digests": list(image.get("RepoDigests") or []),
            "size_bytes": int(image["Size"]),
            "created": image.get("Created"),
            "os": image.get("Os"),
            "architecture": image.get("Architecture"),
            "labels": dict(config.get("Labels") or {}),
            "env": list(config.get("Env") or []),
            "layers": list((image.get("RootFS") or {}).get("Layers") or []),
            "history": [
                {
                    "id": h.get("Id"),
                    "created": h.get("Created"),
                    "created_by": h.get("CreatedBy"),
                    "size_bytes": int(h.get("Size") or 0),
                    "comment": h.get("Comment") or "",
                }
                for h in history
            ],
            "files": {
                "version": FILES_VERSION,
                "list": FILES_NAME,
                "list_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
                "entries": len(rows),
                "by_type": dict(sorted(counts.items())),
                "regular_file_bytes": sum(r[1] for r in rows),
                "note": (
                    "the flattened filesystem of a container created from the image and never "
                    "started; Docker's init layer adds " + ", ".join(INIT_LAYER) + " to every "
                    "container, empty"
                ),
            },
        }
        write_record(self.out_dir, record)
        return record


def _files_text(
    rows: list[tuple[str, int, str, str, str]], sha256: Mapping[str, str], owner: Mapping[str, str]
) -> str:
    lines = ["\t".join(FILES_HEADER)]
    for row in rows:
        hashed = sha256.get(row[0], "") if row[2] in ("file", "hardlink") else ""
        lines.append("\t".join(_field(v) for v in (*row, hashed, owner.get(row[0], ""))))
    return "\n".join(lines) + "\n"


def write_record(out_dir: Path, record: Mapping) -> None:
    """footprint.json in out_dir, the record as every footprint writes it."""
    with open(out_dir / JSON_NAME, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2, sort_keys=True)
        f.write("\n")


def absolute(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    name = name.strip("/")
    return "/" if name in ("", ".") else "/" + name


def _field(value: object) -> str:
    # a TSV field: file names may hold tabs or newlines; write them escaped, as Python would
    text = str(value)
    if any(c in text for c in "\t\n\r\\"):
        text = text.encode("unicode_escape").decode("ascii")
    return text


def read_files(path: Path) -> list[dict[str, str | int]]:
    """The rows of a files.tsv, sizes as integers."""
    rows: list[dict[str, str | int]] = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            row: dict[str, str | int] = dict(
                zip(header, line.rstrip("\n").split("\t"), strict=True)
            )
            row["size_bytes"] = int(row["size_bytes"])
            rows.append(row)
    return rows


def footprint_ratio(mica: Mapping, pytorch: Mapping) -> dict:
    """PyTorch's image size over Mica's, from the two measured sizes and nothing else (§8)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "mica_image": mica["image"],
        "pytorch_image": pytorch["image"],
        "mica_size_bytes": int(mica["size_bytes"]),
        "pytorch_size_bytes": int(pytorch["size_bytes"]),
        "pytorch_over_mica": int(pytorch["size_bytes"]) / int(mica["size_bytes"]),
        "note": (
            "the driver's libcuda comes from the host's NVIDIA driver in both images (the NVIDIA "
            "Container Toolkit mounts it when a run starts) and is in neither size (§8)"
        ),
    }


# --- what an image holds beyond its side's minimum (§8) -------------------------------------

# §8: "Mica's holds the binary and the NVIDIA libraries it opens, PyTorch's holds Python and what
# pip install torch numpy brings". Python is the base image's; the rest lies under these folders
# (Dockerfile.pytorch, Dockerfile.mica). What an image adds to its base outside them is beyond
# the minimum, and is told with its size.
SIDE_MINIMUM = {
    "pytorch": ("/opt/venv",),  # what pip install torch numpy brings
    "contender": ("/opt/mica",),  # the program and the libraries it opens
    "mica": ("/opt/mica",),
}
# named parts of what lies beyond: the folder, and what it is
NAMED_PARTS = {"/opt/nanogpt": "nanoGPT's files and the kit's patch (§4)"}
DPKG_LIST = "/var/lib/dpkg/info/"


@dataclass(frozen=True)
class Addition:
    """A part of an image beyond its side's minimum: what it is, its files and their bytes."""

    what: str
    files: int  # entries other than folders
    size_bytes: int  # regular files' bytes, a hardlinked file's once
    packages: tuple[str, ...] = ()  # the Debian packages whose files these are, when known


def beyond_minimum(
    side: str, files: list[dict[str, str | int]], base_files: list[dict[str, str | int]]
) -> list[Addition]:
    """What the measured image adds to its base outside its side's minimum, from the two file
    lists alone: each named part (nanoGPT), then the rest, named by the Debian packages whose
    lists (/var/lib/dpkg/info/<package>.list) it adds. A file the image changes in its base
    (dpkg's status) counts by the bytes it grew."""
    minimum = SIDE_MINIMUM.get(side, ())
    base = {str(r["path"]): int(r["size_bytes"]) for r in base_files}
    parts: dict[str, list[dict]] = {}
    for row in files:
        path = str(row["path"])
        if row["type"] == "dir" or _under(path, minimum):
            continue
        grown = int(row["size_bytes"]) - base.get(path, 0)
        if path in base and grown <= 0:
            continue
        part = next((what for root, what in NAMED_PARTS.items() if _under(path, (root,))), "")
        parts.setdefault(part, []).append({**row, "size_bytes": grown})
    out = [_addition(what, rows) for what, rows in parts.items() if what]
    if "" in parts:
        rows = parts[""]
        packages = sorted(
            str(r["path"])[len(DPKG_LIST) : -len(".list")].split(":")[0]
            for r in rows
            if str(r["path"]).startswith(DPKG_LIST) and str(r["path"]).endswith(".list")
        )
        what = "Debian packages" if packages else "other files"
        out.append(_addition(what, rows, tuple(packages)))
    return sorted(out, key=lambda a: -a.size_bytes)


def _addition(what: str, rows: list[dict], packages: tuple[str, ...] = ()) -> Addition:
    return Addition(what, len(rows), sum(int(r["size_bytes"]) for r in rows), packages)


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def ratio_without(
    mica_size: int, pytorch_size: int, mica_extra: list[Addition], pytorch_extra: list[Addition]
) -> float:
    """The ratio of §8 with each image's additions beyond its side's minimum taken out."""
    p = pytorch_size - sum(a.size_bytes for a in pytorch_extra)
    m = mica_size - sum(a.size_bytes for a in mica_extra)
    return p / m

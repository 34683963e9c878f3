"""The results directory (D6): written so that a series stopped at any moment loses nothing.

Layout:
    manifest.json        schema, kit version and commit, protocol hash, command line, date, host
    protocol.toml        the protocol file the series ran under (its hash is in the manifest)
    plan.json            the configurations and every planned run, in order, fixed before run 0
    runs.jsonl           one record per finished run, appended and fsynced
    runs/<id>-<config>/attempt-<k>/   the raw stamped logs of each attempt at a run; a run the
                         kit decided not to start (a profiled run without nsys) holds
                         not-run.json instead, saying why
    tables/              CSV tables, always recomputed from the raw logs

Every file but runs.jsonl is written whole to a temporary name and renamed; runs.jsonl only
grows, one fsynced line per finished run. A torn last line (power lost mid-write) is no record:
a reader (report, verify, compare, merge) reads it as absent and leaves the file as it is, so a
read-only copy reads as well as the original; only the next writer (`series --resume`) cuts it.

A results directory exists to be published: its files are 0644 (0755 where executable, as
rerun.sh) and its folders 0755 whatever the umask, so that whoever the runner image wrote them
for can read and share them.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kit.errors import DirectoryDiffers, UserError
from kit.protocol.load import Protocol, load
from kit.results.documents import (
    OLD_VERSION_KEY,
    SCHEMA,
    VERSION_KEY,
    Manifest,
    Plan,
    Versions,
    refuse_newer,
)
from kit.results.finite import finite
from kit.results.lock import LOCK, WriterLock
from kit.results.records import RunRecord

T = TypeVar("T")
MANIFEST, PLAN, RECORDS, PROTOCOL = "manifest.json", "plan.json", "runs.jsonl", "protocol.toml"
RUN_FILE = "run.json"  # in a run folder: the record's start, end, exit and executor, hashed
NOT_RUN = "not-run.json"  # in a run folder: why the kit did not start that run (its status)
VERSIONS = "versions.json"  # rule 4: kit.results.documents.Versions
# JSON files whose "schema_version" (an earlier kit's "schema") the store writes and strips on
# reading (their readers see only
# their data); manifest.json, plan.json, summary.json and each record carry theirs as a field
STAMPED = ("versions.json", "gating.json", "publication.json", "adjustments.json",
           "footprint/ratio.json")  # fmt: skip
STARTING = ".micakit-series"  # written first: this directory is a series' own
FILE_MODE, DIR_MODE = 0o644, 0o755  # world-readable, whatever the umask


def mkdir(path: Path) -> Path:
    """`path` and any missing parents, each new one DIR_MODE whatever the umask."""
    path = Path(path)
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(parents=True, exist_ok=True)
    for p in missing:
        os.chmod(p, DIR_MODE)
    return path


def publish_modes(root: Path) -> None:
    """Every file under `root` FILE_MODE (DIR_MODE where its owner may run it), every folder
    DIR_MODE: what programs wrote under a tight umask becomes readable. Another owner's files
    (a container's) are left as they are."""
    root = Path(root)
    for here, _, files in os.walk(root):
        _chmod(Path(here), DIR_MODE)
        for name in files:
            path = Path(here) / name
            if path.is_symlink():
                continue
            executable = path.stat().st_mode & 0o100
            _chmod(path, DIR_MODE if executable else FILE_MODE)


def _chmod(path: Path, mode: int) -> None:
    try:
        if path.stat().st_mode & 0o7777 != mode:
            os.chmod(path, mode)
    except PermissionError:
        pass  # not ours to change


ADJUSTMENTS = "adjustments.json"  # amendment 5.1: a model whose batch this series halved


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write a whole file or nothing: a temporary file in the same folder, fsynced, renamed."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    mkdir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp makes 0600: a report no one else could read
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _stat_key(path: Path) -> tuple[int, int, int]:
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _walk(path: str, rel: str) -> list[str]:
    """What a folder holds, relative paths; a folder's own ends in "/"."""
    out = []
    for e in os.scandir(path):
        if e.is_dir(follow_symlinks=False):
            out.append(f"{rel}/{e.name}/")
            out += _walk(e.path, f"{rel}/{e.name}")
        else:
            out.append(f"{rel}/{e.name}")
    return out


def write_json(path: Path, obj: object) -> None:
    """A JSON document, whole (write_atomic); a number JSON cannot hold is null (`finite`)."""
    obj, _ = finite(obj)
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n")


def sha256_file(path: Path | str) -> str:
    # os.read rather than a buffered file: `verify` hashes tens of thousands of small raw files,
    # and a buffered open costs twice the system calls
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY)
    try:
        while block := os.read(fd, 1 << 20):
            h.update(block)
    finally:
        os.close(fd)
    return h.hexdigest()


class ResultsDir:
    """One series' results directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.writer = WriterLock(self.root)
        # runs.jsonl parsed (and typed) once while unchanged, and each document read once while
        # unchanged: a report reads them from several tables
        # (runs.jsonl's size, mtime and inode; its records; its torn last line, if any)
        self._records: tuple[tuple[int, int, int], list[dict], bytes] | None = None
        self._runs: tuple[tuple[int, int, int], list[RunRecord]] | None = None
        self._documents: dict[str, tuple[tuple[int, int, int], Any]] = {}

    def lock(self, what: str = "a series") -> ResultsDir:
        """Become this directory's one writer, or be refused at once (kit.results.lock)."""
        self.writer.acquire(what)
        return self

    # -- creating and opening -------------------------------------------------------------

    @classmethod
    def create(cls, root: Path, what: str = "a series") -> ResultsDir:
        """A new results directory, locked for its one writer before anything is written."""
        root = Path(root)
        if root.exists() and not root.is_dir():
            raise UserError(
                f"--out {root} names a file, not a folder",
                "name a new folder for the results directory",
            )
        try:
            mkdir(root)
        except OSError as e:
            raise UserError(
                f"cannot make the results directory {root}: {e.strerror}",
                "name a folder you can write to (check the parent folder's permissions and "
                "free space)",
            ) from None
        _refuse_foreign(root)
        rd = cls(root)
        # the lock next: a second `--out` racing the first is refused here, before it could
        # take the first's fresh directory for one that never started
        rd.lock(what)
        try:
            _refuse_foreign(root)  # again, now that no one else writes here
        except UserError:
            rd.writer.release()
            raise
        (root / STARTING).touch(mode=FILE_MODE)
        os.chmod(root / STARTING, FILE_MODE)
        return rd

    @classmethod
    def open(cls, root: Path) -> ResultsDir:
        root = Path(root)
        if not (root / MANIFEST).is_file():
            _refuse_orphaned(root)
            if (root / STARTING).exists():
                raise UserError(
                    f"the series in {root} stopped before its first run (it has no {MANIFEST})",
                    f"start it again with the same command and --out {root}: nothing was lost",
                )
            raise UserError(
                f"{root} is not a results directory (it has no {MANIFEST})",
                "name a directory that a `micakit series` wrote",
            )
        rd = cls(root)
        rd.manifest()  # a manifest from a newer kit is refused there, naming its schema
        return rd

    # -- whole files --------------------------------------------------------------------------

    def manifest(self) -> Manifest:
        return self._document(MANIFEST, Manifest.from_json)

    def plan(self) -> Plan:
        return self._document(PLAN, Plan.from_json)

    def versions(self) -> Versions:
        """The versions the directory recorded (rule 4); empty before they were."""
        if not (self.root / VERSIONS).exists():
            return Versions()
        return self._document(VERSIONS, Versions.from_json)

    def _document(self, rel: str, typed: Callable[[Any, str], T]) -> T:
        """A typed document, read again only when its file changed (they are frozen)."""
        path = self.root / rel
        try:
            key = _stat_key(path)
        except FileNotFoundError:
            key = None
        cached = self._documents.get(rel)
        if key is not None and cached is not None and cached[0] == key:
            return cached[1]
        doc = typed(self.read_json(rel), str(path))
        if key is not None:
            self._documents[rel] = (key, doc)
        return doc

    def read_json(self, rel: str) -> Any:
        """A JSON file of the directory. One that a newer kit wrote (a higher version) is
        refused. An older one is returned as it is: the typed documents upgrade theirs in
        `from_json` (kit.results.documents, through `_document`); the other files here have
        had one schema only."""
        path = self.root / rel
        try:
            obj = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            raise UserError(f"{path} is missing", "the results directory is incomplete") from None
        except json.JSONDecodeError as e:
            raise UserError(f"{path} is not valid JSON: {e}") from None
        if not isinstance(obj, dict):
            return obj
        refuse_newer(obj, str(path))
        if rel in STAMPED:
            obj.pop(VERSION_KEY, None)
            obj.pop(OLD_VERSION_KEY, None)
        return obj

    def write_json(self, rel: str, obj: object) -> None:
        if rel in STAMPED and isinstance(obj, dict):
            obj = {VERSION_KEY: SCHEMA, **obj}
        write_json(self.root / rel, obj)

    def write_text(self, rel: str, text: str) -> None:
        write_atomic(self.root / rel, text)

    # -- the run folders ----------------------------------------------------------------------

    def listing(self) -> dict[str, frozenset[str]]:
        """Every attempt folder (`runs/<run>/attempt-<k>`) with what it holds, as paths relative
        to the directory (a folder inside one ends in "/"). Read fresh, in one walk with
        os.scandir: a report asks this of thousands of runs, where a stat of each raw file
        would cost more than reading the folders."""
        out: dict[str, frozenset[str]] = {}
        try:
            run_dirs = [e for e in os.scandir(self.root / "runs") if e.is_dir()]
        except FileNotFoundError:
            return out
        for run_dir in run_dirs:
            for attempt in os.scandir(run_dir.path):
                if attempt.name.startswith("attempt-") and attempt.is_dir():
                    rel = f"runs/{run_dir.name}/{attempt.name}"
                    out[rel] = frozenset(_walk(attempt.path, rel))
        return out

    # -- the run records ----------------------------------------------------------------------

    def batches(self) -> dict[str, int]:
        """Amendment 5.1: the models whose batch this series halved, and the batch they train
        now (adjustments.json); empty where none was halved."""
        if not (self.root / ADJUSTMENTS).exists():
            return {}
        return {m: a["batch_size"] for m, a in self.read_json(ADJUSTMENTS).items()}

    def records(self) -> list[dict]:
        """Every finished run's record. A torn last line is never read as a run, and never cut
        here: reading never writes (`torn` gives it; the next writer cuts it)."""
        path = self.root / RECORDS
        try:
            st = os.stat(path)
        except FileNotFoundError:
            self._records = None
            return []
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        if self._records is not None and self._records[0] == key:
            return list(self._records[1])
        records = []
        torn = b""
        # a line at a time: no copy of the whole file (30 MB at 15,000 runs) is made, decoded
        # and split, each in memory the process has to be given anew
        with open(path, "rb") as f:
            for number, line in enumerate(f, 1):
                if not line.endswith(b"\n"):
                    torn = line
                    break
                if not line.strip():
                    continue
                try:
                    records.append(json.loads(line))
                except ValueError as e:  # not JSON, or not UTF-8
                    raise UserError(f"{path}:{number} is not a JSON record: {e}") from None
        self._records = (key, records, torn)
        return list(records)

    def torn(self) -> bytes:
        """The torn last line of runs.jsonl (the series stopped while writing it); b"" if none."""
        self.records()
        return self._records[2] if self._records is not None else b""

    def cut_torn(self) -> bool:
        """The writer's repair: a torn last line of runs.jsonl cut off (it never was a record;
        its run is run again). True when there was one. Only a writer calls this."""
        try:
            fd = os.open(self.root / RECORDS, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            cut = _cut_torn(fd)
        finally:
            os.close(fd)
        self._records = None
        return cut

    def check_raw_files(self) -> None:
        """Every finished run's raw logs are here: every number is recomputed from them (D6)."""
        for r in self.runs():
            folder = self.root / r.log_dir
            missing = [rel for rel in r.files if not (self.root / rel).is_file()]
            if missing or not folder.is_dir():
                raise UserError(
                    f"the raw files of run {r.run_id} ({r.config}) are missing: "
                    f"{missing[0] if missing else r.log_dir}; every number of the results "
                    "is recomputed from them",
                    f"restore {folder} from a copy of this results directory, or start a "
                    "new series with --out",
                )

    def runs(self) -> list[RunRecord]:
        """Every finished run's record, typed (kit.results.records); the audit reads the lines
        as they are (`records`), to name what is wrong with one."""
        records = self.records()
        key = self._records[0] if self._records is not None else None
        if key is not None and self._runs is not None and self._runs[0] == key:
            return list(self._runs[1])
        runs = [RunRecord.from_json(r, f"{RECORDS} record {i}") for i, r in enumerate(records, 1)]
        if key is not None:
            self._runs = (key, runs)
        return list(runs)

    def append_record(self, record: dict | RunRecord) -> None:
        """A finished run's record, one fsynced line; a torn last line before it (the series
        stopped while writing one) is cut first, since only a writer appends."""
        cleaned, nulled = finite(record.to_json() if isinstance(record, RunRecord) else record)
        written = cleaned if isinstance(cleaned, dict) else {}
        if nulled:  # each value JSON cannot hold, by its path, said beside the null
            written["non_finite"] = {**written.get("non_finite", {}), **nulled}
        self._records = None
        line = json.dumps(written, sort_keys=False, allow_nan=False) + "\n"
        # O_NOFOLLOW: a runs.jsonl replaced by a link is never written through (D6)
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
        try:
            fd = os.open(self.root / RECORDS, flags, FILE_MODE)
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            raise UserError(
                f"{self.root / RECORDS} is a symbolic link: a series writes its records in its "
                "own directory, never through a link",
                f"`micakit verify {self.root}` names every link; restore the directory from "
                "its copy, or start anew in a new directory (--out)",
            ) from None
        try:
            os.fchmod(fd, FILE_MODE)  # the umask narrowed the mode open() was given
            _cut_torn(fd)
            data = memoryview(line.encode("utf-8"))
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- raw logs -------------------------------------------------------------------------

    def new_attempt_dir(self, run_id: int, slug: str) -> Path:
        """A fresh folder for an attempt at a run; earlier (interrupted) attempts are kept."""
        base = mkdir(self.root / "runs" / f"{run_id:04d}-{slug}")
        k = 1
        while (base / f"attempt-{k}").exists():
            k += 1
        path = base / f"attempt-{k}"
        path.mkdir()
        os.chmod(path, DIR_MODE)
        return path

    def rel(self, path: Path) -> str:
        return str(Path(path).resolve().relative_to(self.root.resolve()))


def _cut_torn(fd: int) -> bool:
    """runs.jsonl (open for writing as `fd`) cut after its last newline; True if it was torn."""
    size = os.fstat(fd).st_size
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return False
    cut, end = 0, size
    while end > 0:  # the last newline, found a block at a time from the end
        lo = max(0, end - (1 << 16))
        at = os.pread(fd, end - lo, lo).rfind(b"\n")
        if at >= 0:
            cut = lo + at + 1
            break
        end = lo
    os.ftruncate(fd, cut)
    os.fsync(fd)
    return True


def count_lines(path: Path) -> int:
    """How many lines a file ends ("\n"s), counted without parsing or holding it: in blocks
    small enough for the allocator to hand the same memory back each time (runs.jsonl of a
    15,000-run series is 30 MB)."""
    with open(path, "rb") as f:
        return sum(block.count(b"\n") for block in iter(functools.partial(f.read, 1 << 16), b""))


def after_manifest(root: Path) -> list[str]:
    """What in `root` only a series that ran writes (after its manifest, kit.engine.engine):
    its versions, its records, its run folders; named, for a directory whose manifest is gone."""
    out = []
    if (root / VERSIONS).exists():
        out.append(VERSIONS)
    if (root / RECORDS).exists():
        lines = count_lines(root / RECORDS)
        out.append(f"{RECORDS} ({lines} record{'s' * (lines != 1)})")
    runs = root / "runs"
    if runs.is_dir() or runs.is_symlink():
        folders = len(list(runs.iterdir())) if runs.is_dir() else 0
        out.append(f"runs/ ({folders} run folder{'s' * (folders != 1)})")
    return out


def _refuse_orphaned(root: Path) -> None:
    """A directory that holds a series' runs but no manifest is not adopted (D6): no series
    writes its program, protocol or options beside runs another one made, and no reader takes
    it for one that never started."""
    if (root / MANIFEST).exists():
        return
    there = after_manifest(root)
    if there:
        raise UserError(
            f"{root} holds a series' runs ({', '.join(there)}) but its {MANIFEST} is missing: "
            "the directory is not as its series wrote it, and no series takes over runs it did "
            "not start",
            f"start anew in a new directory (`micakit series --out NEW_DIR ...`), or restore "
            f"{MANIFEST} (and {VERSIONS}) from the directory's copy and resume it with "
            f"`micakit series --resume {root}`",
        )


def _refuse_foreign(root: Path) -> None:
    """A series' own directory that never got as far as its manifest measured nothing: the
    same command starts it again; any other non-empty directory is left alone, and one that
    lost its manifest after it ran is named so."""
    _refuse_orphaned(root)
    unstarted = (root / STARTING).exists() and not (root / MANIFEST).exists()
    if any(p.name != LOCK for p in root.iterdir()) and not unstarted:
        raise UserError(
            f"the results directory {root} already exists; a series never overwrites one",
            f"resume it with `micakit series --resume {root}`, or name a new one with --out",
        )


def load_protocol(rd: ResultsDir) -> Protocol:
    """The protocol the series ran under, from its own copy, checked against the manifest."""
    recorded = rd.manifest().protocol_sha256
    try:
        actual = sha256_file(rd.root / PROTOCOL)
    except FileNotFoundError:
        raise DirectoryDiffers(
            f"{PROTOCOL}: {rd.root / PROTOCOL} is missing",
            "restore the protocol file the series ran under from the directory's copy",
        ) from None
    if actual != recorded:
        # a directory no longer as its series wrote it (hashed before it is parsed, so an edit
        # that breaks the file is named the same): `verify` exits 4 naming the file
        raise DirectoryDiffers(
            f"{PROTOCOL}: {rd.root / PROTOCOL} has SHA-256 {actual[:12]}…, "
            f"but the manifest records {recorded[:12]}…: the protocol copy was changed",
            "restore the protocol file the series ran under",
        )
    return load(rd.root / PROTOCOL)

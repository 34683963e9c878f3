"""nanoGPT's source at the pinned commit, checked file by file, and §4's patch to its train.py.

D2 pins nanoGPT to one commit. GitHub's source archives are not promised to stay byte-identical,
so what is checked is each file the kit uses, by SHA-256, whether it came from the archive or
from a checkout the user names. §3 rule 2: the timing runs of `eager` and `default` use
train.py exactly as shipped, so the patched train.py is written into a separate tree and the
source stays as it is.

A run tree (what `copy_run_files` or `apply_patch` writes) holds train.py, model.py,
configurator.py and config/; nanoGPT runs with that tree as its working directory, since
train.py opens `configurator.py` and `data/<dataset>/` relative to it.
"""

from __future__ import annotations

import logging
import re
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import requests

from kit.engine.store import sha256_file
from kit.errors import UserError
from kit.protocol.load import FILES
from kit.sides import by_hand

log = logging.getLogger(__name__)

COMMIT = "3adf61e154c3fe3fca428ad6bc3818b27a3b8291"  # D2: master, 2025-11-12
ARCHIVE_URL = "https://github.com/karpathy/nanoGPT/archive/{commit}.tar.gz"

# D2: the SHA-256 of the files the kit uses, at COMMIT (git tree ca93bcd9b9c9ff32d3016e1e2556644e).
FILE_SHA256: dict[str, str] = {
    "train.py": "413bd97b40bb400a2a0d01230e2946f056c263ebac1b7281c2367d964a123085",
    "model.py": "7c01703240dbec5d554527dc666e35b3df8391d0b117fddc07afcf325a21d11c",
    "configurator.py": "5cc23aca26b4ab3c0d9e5f82740f4781f9444f42718c15abcee70d93c5aabe8f",
    "config/train_shakespeare_char.py": (
        "9b41cdfb2c917259d796a8184d835221a349c23cd18a0a63b46da431d95d9c05"
    ),
    "data/shakespeare_char/prepare.py": (
        "d5fbea0686d146748cf36017d6c34136a2fe9c41f065f1429529ad55a992c692"
    ),
    "data/shakespeare/prepare.py": (
        "f8d47267f00963138314bb969e75071211bf1140c248bf31b9e60e7750027f06"
    ),
}

# What nanoGPT needs beside it to train: the data come from kit.sides.data, under data/ of the tree.
RUN_FILES: tuple[str, ...] = (
    "train.py",
    "model.py",
    "configurator.py",
    "config/train_shakespeare_char.py",
)

PATCH_PATH = FILES / "train.patch"
TIMEOUT_S = (10.0, 60.0)  # connect, read
_HEX40 = re.compile(r"[0-9a-f]{40}")


def verify_files(root: Path, file_sha256: Mapping[str, str] = FILE_SHA256) -> list[str]:
    """What under `root` differs from `file_sha256`, one line a file; empty when all match."""
    problems = []
    for name, want in file_sha256.items():
        f = Path(root) / name
        if not f.is_file():
            problems.append(f"{name}: missing")
        elif (got := sha256_file(f)) != want:
            problems.append(f"{name}: SHA-256 {got}, expected {want}")
    return problems


# ----------------------------------------------------------------------------- the archive


def download(
    commit: str,
    archive_sha256: str | None,
    cache_dir: Path,
    *,
    file_sha256: Mapping[str, str] = FILE_SHA256,
    url: str | None = None,
    session: requests.Session | None = None,
) -> Path:
    """nanoGPT's source at `commit`, unpacked in `cache_dir/nanoGPT-<commit>/`; returns that folder.

    A folder already there whose files check is returned without touching the network. The
    archive is kept as `cache_dir/nanoGPT-<commit>.tar.gz`; one placed there by hand is used
    in place of a download. `archive_sha256`, where given, only warns: GitHub regenerates
    archives, and what must match are the files (`file_sha256`).
    """
    commit = _check_commit(commit)
    cache_dir = Path(cache_dir)
    dest = cache_dir / f"nanoGPT-{commit}"
    archive = cache_dir / f"nanoGPT-{commit}.tar.gz"
    url = url or ARCHIVE_URL.format(commit=commit)
    fix = by_hand.nanogpt_fix(url, commit, archive)
    if dest.is_dir():
        if not verify_files(dest, file_sha256):
            return dest
        log.warning("%s does not match the pinned files; unpacking it again", dest)
    cache_dir.mkdir(parents=True, exist_ok=True)
    if not archive.is_file():
        try:
            _fetch(url, archive, session)
        except requests.RequestException as e:
            raise UserError(f"could not download nanoGPT from {url}: {e}", fix) from e
    if archive_sha256 is not None and (got := sha256_file(archive)) != archive_sha256:
        log.warning(
            "%s has SHA-256 %s, not %s; GitHub rebuilds archives, so the files are what is checked",
            archive,
            got,
            archive_sha256,
        )
    tmp = Path(tempfile.mkdtemp(prefix=f".nanoGPT-{commit}.", dir=cache_dir))
    try:
        _unpack(archive, tmp, commit, fix)
        problems = verify_files(tmp, file_sha256)
        if problems:
            archive.unlink(missing_ok=True)  # a bad archive is not kept for the next try
            raise UserError(
                f"the nanoGPT archive {url} does not hold the pinned files:\n  "
                + "\n  ".join(problems),
                fix,
            )
        tmp.chmod(0o755)
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old-{uuid.uuid4().hex}")
            dest.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _check_commit(commit: str) -> str:
    if not _HEX40.fullmatch(commit):
        raise UserError(f"{commit!r} is not a full 40-digit commit id", "name the commit in full")
    return commit


def _fetch(url: str, dest: Path, session: requests.Session | None) -> None:
    from kit.sides.data import download_file  # one streamed download, whole or nothing

    download_file(url, dest, session=session)


def _unpack(archive: Path, dest: Path, commit: str, fix: str) -> None:
    """Unpack the archive's one top folder into `dest`: plain files and folders only.

    Nothing is written outside `dest`: absolute names, `..`, links and devices are refused or
    skipped, and every file is written by the kit itself rather than by tarfile's extractor.
    """
    try:
        with tarfile.open(archive, "r:*") as tar:
            members = tar.getmembers()
            # `git archive` records the commit in the pax global header; where it is, it must match.
            recorded = tar.pax_headers.get("comment")
            if recorded and _HEX40.fullmatch(recorded) and recorded != commit:
                raise UserError(f"{archive} holds nanoGPT at commit {recorded}, not {commit}", fix)
            tops = {PurePosixPath(m.name).parts[0] for m in members if m.name.strip("/")}
            if len(tops) != 1:
                raise UserError(
                    f"{archive} is not a GitHub source archive (no single top folder)", fix
                )
            for m in members:
                parts = PurePosixPath(m.name).parts[1:]
                if not parts:
                    continue
                if m.name.startswith("/") or ".." in parts or "\\" in m.name:
                    raise UserError(f"{archive} holds an unsafe path: {m.name!r}", fix)
                target = dest.joinpath(*parts)
                if m.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif m.isfile():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    src = tar.extractfile(m)
                    assert src is not None  # a regular file always has data
                    with src, open(target, "wb") as out:
                        shutil.copyfileobj(src, out)
                else:
                    log.debug("skipping %s in %s: not a plain file", m.name, archive)
    except (tarfile.TarError, EOFError, OSError) as e:
        archive.unlink(missing_ok=True)
        raise UserError(f"{archive} could not be unpacked: {e}", fix) from e


# ----------------------------------------------------------------------------- a checkout


def read_head(checkout: Path) -> str | None:
    """The commit a git checkout's HEAD names, read from its files; None where there is no git.

    Reads `.git/HEAD`, loose refs and `packed-refs` (and a worktree's `commondir`), so the kit
    needs no git program.
    """
    dot_git = Path(checkout) / ".git"
    if dot_git.is_file():  # a worktree or submodule: "gitdir: <path>"
        text = dot_git.read_text().strip()
        if not text.startswith("gitdir:"):
            return None
        gitdir = (Path(checkout) / text[len("gitdir:") :].strip()).resolve()
    elif dot_git.is_dir():
        gitdir = dot_git
    else:
        return None
    common = gitdir
    if (gitdir / "commondir").is_file():
        common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
    try:
        head = (gitdir / "HEAD").read_text().strip()
    except OSError:
        return None
    for _ in range(8):  # symbolic refs may point at symbolic refs
        if not head.startswith("ref:"):
            return head if _HEX40.fullmatch(head) else None
        ref = head[len("ref:") :].strip()
        for base in (gitdir, common):
            if (base / ref).is_file():
                head = (base / ref).read_text().strip()
                break
        else:
            return _packed_ref(common / "packed-refs", ref)
    return None


def _packed_ref(packed: Path, ref: str) -> str | None:
    try:
        lines = packed.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith(("#", "^")):
            continue
        sha, _, name = line.partition(" ")
        if name.strip() == ref and _HEX40.fullmatch(sha):
            return sha
    return None


def from_checkout(
    path: Path, commit: str = COMMIT, *, file_sha256: Mapping[str, str] = FILE_SHA256
) -> Path:
    """A nanoGPT folder the user names (`--nanogpt PATH`), checked; returns it, resolved.

    A git checkout must be at `commit` (read from its HEAD). Checkout or not, every file the kit
    uses must have its pinned SHA-256, so an unpacked archive serves as well as a clone.
    """
    commit = _check_commit(commit)
    path = Path(path).expanduser().resolve()
    if not (path / "train.py").is_file():
        raise UserError(
            f"{path} is not a nanoGPT folder (no train.py)",
            "pass --nanogpt the folder that holds nanoGPT's train.py",
        )
    head = read_head(path)
    if head is None:
        log.info("%s has no readable git HEAD; checking its files only", path)
    elif head != commit:
        raise UserError(
            f"the nanoGPT checkout {path} is at commit {head}; the protocol pins {commit} (D2)",
            f"run `git -C {path} checkout {commit}`, or leave out --nanogpt to let the kit "
            "download it",
        )
    problems = verify_files(path, file_sha256)
    if problems:
        raise UserError(
            f"the nanoGPT files in {path} differ from those at commit {commit}:\n  "
            + "\n  ".join(problems),
            f"undo local changes (`git -C {path} checkout -- .`); on Windows clones, "
            "line-end conversion (core.autocrlf) also changes them",
        )
    return path


def source(
    cache_dir: Path,
    checkout: Path | None = None,
    *,
    commit: str = COMMIT,
    file_sha256: Mapping[str, str] = FILE_SHA256,
    archive_sha256: str | None = None,
) -> Path:
    """The user's checkout where one is named, else the kit's download: nanoGPT's folder."""
    if checkout is not None:
        return from_checkout(checkout, commit, file_sha256=file_sha256)
    return download(commit, archive_sha256, cache_dir, file_sha256=file_sha256)


# ----------------------------------------------------------------------------- run trees and §4


def copy_run_files(src_dir: Path, dest_dir: Path, files: Iterable[str] = RUN_FILES) -> Path:
    """Copy what nanoGPT needs to train from `src_dir` into `dest_dir`, as shipped; returns it."""
    dest_dir = Path(dest_dir)
    for name in files:
        target = dest_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(src_dir) / name, target)
    return dest_dir


@dataclass(frozen=True)
class Hunk:
    """One `@@ -a,b +c,d @@` block: the lines it expects and the lines it leaves."""

    number: int  # 1-based, in the order of the patch
    header: str
    old_start: int
    old: tuple[str, ...]  # with their line ends
    new: tuple[str, ...]


@dataclass(frozen=True)
class FilePatch:
    path: str  # relative, with a/ and b/ taken off
    hunks: tuple[Hunk, ...]


_HUNK_RE = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _lines(text: str) -> list[str]:
    # Split on "\n" only: str.splitlines would also split on form feeds and the like.
    return re.findall(r"[^\n]*\n|[^\n]+\Z", text)


def parse_patch(text: str, name: str = "patch") -> list[FilePatch]:
    """Parse a unified diff (as `git diff` writes it). Anything malformed is a UserError."""
    lines = _lines(text)
    patches: list[FilePatch] = []
    i = 0

    def bad(why: str) -> UserError:
        return UserError(f"{name}, line {i + 1}: {why}", "regenerate the patch with `git diff`")

    while i < len(lines):
        if not lines[i].startswith("--- "):
            i += 1  # diff --git, index and other headers are not needed
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise bad("'--- ' not followed by '+++ '")
        path = lines[i + 1][4:].rstrip("\n").split("\t")[0]
        path = path[2:] if path.startswith(("a/", "b/")) else path
        i += 2
        hunks: list[Hunk] = []
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK_RE.match(lines[i])
            if not m:
                raise bad(f"unreadable hunk header {lines[i].rstrip()!r}")
            header = lines[i].rstrip("\n")
            old_n = int(m[2]) if m[2] is not None else 1
            new_n = int(m[4]) if m[4] is not None else 1
            old: list[str] = []
            new: list[str] = []
            i += 1
            while i < len(lines) and (len(old) < old_n or len(new) < new_n):
                line = lines[i]
                tag, body = (line[0], line[1:]) if line != "\n" else (" ", "\n")
                if tag == " ":
                    old.append(body)
                    new.append(body)
                elif tag == "-":
                    old.append(body)
                elif tag == "+":
                    new.append(body)
                else:
                    raise bad(f"hunk {len(hunks) + 1} ends early ({header})")
                i += 1
                if i < len(lines) and lines[i].startswith("\\"):  # "\ No newline at end of file"
                    if tag in " -":
                        old[-1] = old[-1].rstrip("\n")
                    if tag in " +":
                        new[-1] = new[-1].rstrip("\n")
                    i += 1
            if (len(old), len(new)) != (old_n, new_n):
                raise bad(f"hunk {len(hunks) + 1} is shorter than its header says ({header})")
            hunks.append(Hunk(len(hunks) + 1, header, int(m[1]), tuple(old), tuple(new)))
        if not hunks:
            raise bad(f"no hunks for {path}")
        patches.append(FilePatch(path, tuple(hunks)))
    if not patches:
        raise UserError(f"{name} holds no unified diff", "regenerate the patch with `git diff`")
    return patches


def patch_text(text: str, fp: FilePatch, name: str = "patch") -> str:
    """Apply one file's hunks to `text`: exact context, no fuzz, hunks in order.

    A hunk applies where its header says or, failing that, at the one place after the previous
    hunk where all its old lines stand exactly; anything else is a UserError naming the hunk.
    """
    src = _lines(text)
    out: list[str] = []
    cursor = 0  # hunks index the original lines, so positions are taken in `src`
    for h in fp.hunks:
        n = len(h.old)
        want = h.old_start - 1 if n else h.old_start  # a pure insertion goes after its line
        if want >= cursor and tuple(src[want : want + n]) == h.old:
            pos = want
        else:
            found = [p for p in range(cursor, len(src) - n + 1) if tuple(src[p : p + n]) == h.old]
            if len(found) != 1:
                raise _hunk_error(src, h, fp.path, name, want, ambiguous=len(found) > 1)
            pos = found[0]
            log.info("%s: hunk %d of %s applies at line %d", name, h.number, fp.path, pos + 1)
        out += src[cursor:pos]
        out += h.new
        cursor = pos + n
    out += src[cursor:]
    return "".join(out)


def _hunk_error(
    src: list[str], h: Hunk, path: str, name: str, want: int, *, ambiguous: bool
) -> UserError:
    where = f"hunk {h.number} of {name} ({h.header}) for {path}"
    fix = f"use {path} exactly as nanoGPT ships it at commit {COMMIT}"
    if ambiguous:
        return UserError(f"{where} matches more than one place", fix)
    if any(tuple(src[p : p + len(h.new)]) == h.new for p in range(len(src))):
        return UserError(f"{where} does not apply: it seems applied already", fix)

    # Report against the place that matches best: the header's line, or where most lines agree.
    def agree(p: int) -> int:
        return sum(1 for k, line in enumerate(h.old) if p + k < len(src) and src[p + k] == line)

    best = max(range(len(src)), key=lambda p: (agree(p), p == want), default=want)
    want = want if agree(want) >= agree(best) else best
    for k, expected in enumerate(h.old):
        got = src[want + k] if want + k < len(src) else "<end of file>"
        if got != expected:
            return UserError(
                f"{where} does not apply: line {want + k + 1} reads {got.rstrip(chr(10))!r}, "
                f"the patch expects {expected.rstrip(chr(10))!r}",
                fix,
            )
    return UserError(f"{where} does not apply", fix)


def apply_patch(
    src_dir: Path, patch_path: Path, dest_dir: Path, *, files: Iterable[str] = RUN_FILES
) -> Path:
    """Write a run tree with §4's patched train.py into `dest_dir`; returns the patched train.py.

    `src_dir` is left as it is: its train.py, unpatched, is what `eager` and `default` time
    (§3 rule 2). The patch is applied in memory first, so a patch that does not apply leaves
    nothing behind. `files` are the run files copied beside it (the kit's patch is PATCH_PATH).
    """
    src_dir, dest_dir, patch_path = Path(src_dir), Path(dest_dir), Path(patch_path)
    patched: dict[str, str] = {}
    for fp in parse_patch(patch_path.read_text(encoding="utf-8"), patch_path.name):
        f = src_dir / fp.path
        if not f.is_file():
            raise UserError(f"{patch_path.name} patches {fp.path}, which {src_dir} lacks")
        text = patched.get(fp.path, f.read_bytes().decode("utf-8"))
        patched[fp.path] = patch_text(text, fp, patch_path.name)
    copy_run_files(src_dir, dest_dir, files)
    for rel, text in patched.items():
        target = dest_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))
    return dest_dir / "train.py"

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
from pathlib import Path, PurePosixPath

import requests

from kit.errors import UserError, machine_error
from kit.protocol.load import FILES
from kit.results.store import sha256_file
from kit.sides import by_hand
from kit.sides.data import download_file  # one streamed download, whole or nothing

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
        full = machine_error(e, dest, elsewhere="MICAKIT_CACHE") if isinstance(e, OSError) else None
        if full is not None:
            raise full from None  # the archive is sound, and kept: the disk was full
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

"""§4's patch to nanoGPT's train.py: a unified diff parsed and applied in memory, exactly, so
a patch that does not apply says where and leaves nothing behind."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kit.errors import UserError
from kit.sides.nanogpt import COMMIT, RUN_FILES, copy_run_files

log = logging.getLogger(__name__)


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
    if not patch_path.is_file():
        raise UserError(
            f"the protocol file names nanoGPT's patch {patch_path.name} (§4), which is not at "
            f"{patch_path}",
            "put the patch beside the protocol file, or set [nanogpt] patch to the name of the "
            "patch that lies there",
        )
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

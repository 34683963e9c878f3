"""A results directory holds its own files (D6): every symbolic link in one is named by
`verify`, and a writer (a resume) refuses a directory that holds one rather than write
through it."""

from __future__ import annotations

import os
from pathlib import Path

from kit.errors import UserError


def found(root: Path | str) -> list[str]:
    """Every symbolic link in the directory, named: a results directory holds its own files
    (D6), and one replaced by a link (a raw log, runs/, runs.jsonl) is no longer the directory
    its hashes vouch for, whatever the link's target holds. No link is followed."""
    return found_and_listed(root)[0]


def found_and_listed(root: Path | str) -> tuple[list[str], dict[str, frozenset[str]]]:
    """`found`, and from the same walk the run folders' listing as `ResultsDir.listing` gives
    it (each `runs/<run>/attempt-<k>` with what it holds, a folder's own path ending in "/"):
    the two read every folder of runs/ once between them, not twice (a 15,000-run series
    holds 60,000 folders). Where a link is found the listing is not to be used: the
    directory is refused first."""
    top = os.fspath(root)
    named: list[tuple[tuple[str, ...], str]] = []
    held: dict[str, list[str]] = {}
    pending: list[tuple[str, tuple[str, ...]]] = [(top, ())]
    while pending:  # a linked folder stays shut; the entries' types as listed: no stat
        here, parts = pending.pop()
        attempt = "/".join(parts[:3]) if _in_attempt(parts) else None
        with os.scandir(here) as listed:
            for entry in listed:
                inner = (*parts, entry.name)
                if entry.is_symlink():
                    if not _workspace_link(here, entry.name, entry.path):
                        named.append((inner, entry.path))
                    if attempt is not None:
                        held[attempt].append("/".join(inner))
                elif entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, inner))
                    if _in_attempt(inner) and len(inner) == 3:
                        held["/".join(inner)] = []
                    elif attempt is not None:
                        held[attempt].append("/".join(inner) + "/")
                elif attempt is not None:
                    held[attempt].append("/".join(inner))
    # in the order of the names, a folder's own links before those of the folders in it
    named.sort(key=lambda n: (*((1, p) for p in n[0][:-1]), (0, n[0][-1])))
    out = [
        f"{os.path.relpath(path, top)}: a symbolic link (to {os.readlink(path)}): a results "
        "directory holds its own files, never a link"
        for _, path in named
    ]
    return out, {rel: frozenset(files) for rel, files in held.items()}


def _in_attempt(parts: tuple[str, ...]) -> bool:
    """Whether a path (its parts below the directory) lies in a run's attempt folder."""
    return len(parts) >= 3 and parts[0] == "runs" and parts[2].startswith("attempt-")


def _workspace_link(here: str, name: str, path: str) -> bool:
    """The one link the kit makes: each nanoGPT tree's `data` -> `../data`, beside the trees'
    workspace.json (kit.sides.workspace), so nanoGPT finds its data where it looks."""
    return (
        name == "data"
        and os.readlink(path) == os.path.join("..", "data")
        and os.path.isfile(os.path.join(here, "..", "workspace.json"))
    )


def refuse(root: Path) -> None:
    """A writer never writes through a link (`series --resume`, `correctness --resume`): a
    directory that holds one is refused before anything is written."""
    named = found(root)
    if named:
        raise UserError(
            f"{root} holds symbolic links, and a resume never writes through one:\n  "
            + "\n  ".join(named[:10]),
            f"restore the directory from its copy (`micakit verify {root}` names every "
            "difference), or start anew in a new directory (--out)",
        )

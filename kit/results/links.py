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
    out: list[str] = []
    pending = [os.fspath(root)]
    while pending:  # each folder's links by name, then its folders; a linked folder stays shut
        here = pending.pop()
        with os.scandir(here) as listed:  # the entries' types as the listing gave them: no stat
            entries = sorted(listed, key=lambda e: e.name)
        folders = []
        for entry in entries:
            if entry.is_symlink():
                if not _workspace_link(here, entry.name, entry.path):
                    out.append(
                        f"{os.path.relpath(entry.path, root)}: a symbolic link (to "
                        f"{os.readlink(entry.path)}): a results directory holds its own files, "
                        "never a link"
                    )
            elif entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
        pending.extend(reversed(folders))  # taken from the end: in the order of their names
    return out


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

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
    out = []
    for here, folders, files in os.walk(root):  # followlinks=False: a linked folder stays shut
        for name in sorted(folders + files):
            path = os.path.join(here, name)
            if os.path.islink(path) and not _workspace_link(here, name, path):
                out.append(
                    f"{os.path.relpath(path, root)}: a symbolic link (to {os.readlink(path)}): a "
                    "results directory holds its own files, never a link"
                )
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

"""micakit: the TR-2 measurement protocol, carried out and left behind as a results directory.

This package itself holds the kit's identity, its version and its commit (written into every
results directory and every image), and imports nothing of the kit.
"""

import os
from pathlib import Path

__version__ = "0.1.0"


def kit_commit() -> str:
    """The kit's own commit: read from its checkout without running git, else the one its wheel
    was built from (kit/_build.py, written by setup.py's build hook), else from the image.

    The runner image has no .git; its build argument KIT_COMMIT becomes MICAKIT_COMMIT there.
    """
    git = _here().parent / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: PATH"
            git = Path(git.read_text().split(":", 1)[1].strip())
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        common = git / "commondir"
        roots = [git] + ([git / common.read_text().strip()] if common.is_file() else [])
        for root in roots:
            if (root / ref).is_file():
                return (root / ref).read_text().strip()
            packed = root / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0]
    except (OSError, IndexError):
        pass
    return _built_commit() or os.environ.get("MICAKIT_COMMIT") or "unknown"


def _built_commit() -> str | None:
    """The commit an installed wheel was built from; None in a checkout (no kit/_build.py)."""
    built = _here() / "_build.py"
    try:
        for line in built.read_text("utf-8").splitlines():
            if line.startswith("COMMIT = "):
                commit = line.split("=", 1)[1].strip().strip("'\"")
                return None if commit == "unknown" else commit
    except OSError:
        pass
    return None


def _here() -> Path:
    """The package's folder. importlib.resources is imported here alone: the outside clock's
    reader, a process started for every run, imports this package and needs none of it."""
    from importlib import resources

    return Path(str(resources.files("kit")))

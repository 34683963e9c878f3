"""What a confined contender sees of the machine (kit.executors.confine's hidden root), decided
by the kit before the run: the folders it reads besides the system's, and the folders covered
on the way to its results directory where one of those holds it."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kit.executors.confine import SYSTEM, inside

# folders (or files) a confined contender may read besides the system's, its interpreter's and
# its libraries', separated as PATH is: a CUDA toolkit in /opt, a runtime in HOME
ENV = "MICAKIT_CONTENDER_READS"

# a folder whose parent is the program's prefix: `bin`, and the `shims` of the version managers
# (pyenv, asdf, rbenv: `~/.pyenv/shims/python3` is a script that execs
# `~/.pyenv/libexec/pyenv exec python3`, which runs `~/.pyenv/versions/V/bin/python3`)
PREFIXED = ("bin", "shims")


@dataclass(frozen=True)
class Sight:
    """The request's `reads` and `covers`, and what stays readable beside the results
    directory (None where nothing does), in the record's words."""

    reads: list[str] = field(default_factory=list)
    covers: list[str] = field(default_factory=list)
    beside: str | None = None


def sight(argv0: str, env: Mapping[str, str], mounts: Sequence[str], roots: Sequence[str]) -> Sight:
    """What a contender started as `argv0` with `env` reads, and what is covered of the folders
    it reads (the system's, these, its `mounts`) that hold one of `roots`."""
    reads = _reads(argv0, env)
    covers: set[str] = set()
    beside = None
    for holder in (*SYSTEM, *reads, *mounts):
        real = os.path.realpath(holder)
        for root in roots:
            if root == real or not inside(root, real):
                continue
            # the folder that leads from the holder to the results directory, covered: the
            # results directories beside it are out of sight
            first = os.path.join(real, os.path.relpath(root, real).split(os.sep)[0])
            covers.add(first)
            if first == root and beside is None:
                beside = f"its results directory lies directly in {real}, which the run reads"
    return Sight(reads, sorted(covers), beside)


def _reads(argv0: str, env: Mapping[str, str]) -> list[str]:
    """The program's own prefix and that of the interpreter it names (`#!`), each as the path
    says it and as it resolves (a venv's python, then the Python it was made from); the
    kit's own Python; the loader's folders (LD_LIBRARY_PATH); what MICAKIT_CONTENDER_READS
    adds."""
    found: list[str] = []
    program = argv0 if os.sep in argv0 else shutil.which(argv0, path=env.get("PATH")) or argv0
    for interpreter in (program, *_interpreters(program, env)):
        for path in (interpreter, os.path.realpath(interpreter)):
            folder = os.path.dirname(path)
            prefixed = os.path.basename(folder) in PREFIXED
            found.append(os.path.dirname(folder) if prefixed else folder)
    # the kit's own Python (a contender written in Python, or a wrapper, may run it); it
    # holds no results directory
    found += [sys.prefix, sys.base_prefix]
    for name in ("LD_LIBRARY_PATH", ENV):
        source = os.environ if name == ENV else env
        found += [p for p in source.get(name, "").split(os.pathsep) if p]
    kept: list[str] = []
    for path in found:
        for p in (os.path.abspath(path), os.path.realpath(path)):
            if os.path.isabs(path) and os.path.exists(p) and p != "/" and p not in kept:
                kept.append(p)
    return kept


def _interpreters(argv0: str, env: Mapping[str, str]) -> list[str]:
    """A script's interpreter (`#!/usr/bin/python3`), and the program `#!/usr/bin/env NAME`
    finds on the run's PATH; nothing for a compiled program."""
    try:
        with open(argv0, "rb") as f:
            first = f.readline(256)
    except OSError:
        return []
    if not first.startswith(b"#!"):
        return []
    words = first[2:].decode(errors="replace").split()
    if not words:
        return []
    found = [words[0]]
    if os.path.basename(words[0]) == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        where = shutil.which(names[0], path=env.get("PATH")) if names else None
        if where:
            found.append(where)
    return found

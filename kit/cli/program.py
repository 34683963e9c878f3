"""The kit as a program: `micakit`, `python run.py` and the runner image's entry point. Tests
call `kit.cli.main.main` through click's runner instead, in their own process."""

from __future__ import annotations

import gc
import os
import sys

from kit.cli import options
from kit.cli.main import main


def run() -> None:
    """`micakit ARGS`, as a process.

    Reading a results directory of thousands of runs makes hundreds of thousands of objects,
    and CPython's cyclic collector would walk them again and again: here it runs far less
    often. A command that only reads (`options.reads_only`) then ends its process without
    freeing them one by one (with pandas and matplotlib loaded, that alone takes a noticeable
    part of a `verify`); its output is flushed first. mypy does both, for the same reasons.
    """
    gc.set_threshold(200_000, 30, 30)
    try:
        main()
    except SystemExit as e:
        if not options.ends_quickly():
            raise
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)  # as the interpreter would say it
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (BrokenPipeError, ValueError):  # a reader that went away; a closed stream
                pass
        os._exit(code)

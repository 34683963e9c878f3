#!/usr/bin/env python3
"""The fake contender behind a wrapper that changes its folder first, as a launcher script or a
pyenv shim does: it finds its products record, data and loader log only where the kit hands it
absolute paths.

It moves to $FAKE_CHDIR (a fresh temporary folder where unset), then execs contender.py under
the interpreter it runs with, the kit's own.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

here = Path(__file__).resolve().parent
os.chdir(os.environ.get("FAKE_CHDIR") or tempfile.mkdtemp(prefix="contender-elsewhere-"))
os.execv(sys.executable, [sys.executable, str(here / "contender.py"), *sys.argv[1:]])

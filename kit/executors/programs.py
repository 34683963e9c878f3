"""The kit's own small programs that run where a side's runs run.

A side's measured image holds torch and numpy and none of the kit (§8), so a program the kit
runs there (the versions probe, §7 B's shared-start maker) is a real module of this package,
copied as files with the packages above it into a folder the run mounts, put on the run's
PYTHONPATH and started with `python -m`. Such a module imports nothing of the kit but what is
copied with it.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

ENV = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def ship(modules: Sequence[str], folder: Path) -> None:
    """Copy `modules` (paths inside the package: "sides/versions_probe.py") into folder/kit,
    with the `__init__.py` of every package they sit in, so `python -m kit.sides.versions_probe`
    runs with `folder` on PYTHONPATH."""
    package = Path(str(resources.files("kit")))
    names = set()
    for module in modules:
        parts = Path(module).parts
        names |= {Path(*parts[:i], "__init__.py") for i in range(len(parts))}
        names.add(Path(module))
    for name in sorted(names):
        (folder / "kit" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package / name, folder / "kit" / name)


def env(pythonpath: str) -> dict[str, str]:
    """The environment of a run of a shipped program: its folder as the run sees it first on
    the path, and no bytecode written into the folder."""
    return {"PYTHONPATH": pythonpath, **ENV}

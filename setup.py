"""The build hook of the wheel: it records the commit the wheel is built from in kit/_build.py,
and builds the outside clock's stamper (kit/measure/stamper.c) with the system's C compiler.

An installed kit has no .git to read its commit from; a series run from the wheel names the
commit it was built from (kit.kit_commit reads kit/_build.py). Where no C compiler is found the
wheel is built without the stamper and the reader stamps in Python (kit/measure/stamper.py).
Everything else about the build is in pyproject.toml.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
STAMPER = Path("kit") / "measure" / "micakit-stamp"


class BuildWithCommit(build_py):
    """build_py, then kit/_build.py beside the built package (git-ignored, never in the tree)."""

    def run(self) -> None:
        super().run()
        # an editable install runs from the checkout: the stamper goes beside its source there
        # (and first: an editable build's build_lib holds no kit/ folder to write into)
        target_root = HERE if getattr(self, "editable_mode", False) else Path(self.build_lib)
        build_stamper(target_root / STAMPER)
        sys.path.insert(0, str(HERE))
        try:
            from kit import kit_commit  # the kit's own reading of .git, without running git
        finally:
            sys.path.remove(str(HERE))
        target = Path(self.build_lib) / "kit" / "_build.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(
            '"""Written when the wheel was built (setup.py): the commit it was built from."""\n\n'
            f"COMMIT = {kit_commit()!r}\n",
            encoding="utf-8",
        )


def build_stamper(binary: Path) -> None:
    """kit/measure/stamper.c into `binary`; a warning, and no stamper, where it cannot be built."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    source = HERE / "kit" / "measure" / "stamper.c"
    if cc is None:
        print("warning: no C compiler: the outside clock stamps in Python", file=sys.stderr)
        return
    binary.parent.mkdir(parents=True, exist_ok=True)
    # built beside, then renamed over the old one: a series running the old stamper (an
    # editable install made again) never starts a half-written one
    building = binary.with_name(f".{binary.name}.{os.getpid()}")
    done = subprocess.run([cc, "-O2", "-o", str(building), str(source)], check=False)
    if done.returncode != 0:
        building.unlink(missing_ok=True)
        print("warning: stamper.c did not build: the clock stamps in Python", file=sys.stderr)
        return
    os.replace(building, binary)


class BinaryDistribution(Distribution):
    """The wheel carries a program built for this platform, so it is tagged as such."""

    def has_ext_modules(self) -> bool:
        return True


setup(cmdclass={"build_py": BuildWithCommit}, distclass=BinaryDistribution)

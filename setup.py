"""The build hook of the wheel: it records the commit the wheel is built from in kit/_build.py.

An installed kit has no .git to read its commit from; a series run from the wheel names the
commit it was built from (kit.kit_commit reads kit/_build.py). Everything else about the build
is in pyproject.toml.
"""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildWithCommit(build_py):
    """build_py, then kit/_build.py beside the built package (git-ignored, never in the tree)."""

    def run(self) -> None:
        super().run()
        sys.path.insert(0, str(HERE))
        try:
            from kit import kit_commit  # the kit's own reading of .git, without running git
        finally:
            sys.path.remove(str(HERE))
        target = Path(self.build_lib) / "kit" / "_build.py"
        target.write_text(
            '"""Written when the wheel was built (setup.py): the commit it was built from."""\n\n'
            f"COMMIT = {kit_commit()!r}\n",
            encoding="utf-8",
        )


setup(cmdclass={"build_py": BuildWithCommit})

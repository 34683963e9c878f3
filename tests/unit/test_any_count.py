"""The lines of kit/ that mention `Any` may only fall: a shape that is known is a TypedDict or
a dataclass, and `Any` stays where a shape is open (CONTRIBUTING's "Every function is
annotated")."""

from __future__ import annotations

import re
from pathlib import Path

import kit

KIT = Path(kit.__file__).parent
# Today's count. A change that removes some lowers this number in the same commit; one that
# adds some is refused.
MOST = 209

_ANY = re.compile(r"\bAny\b")


def any_lines(root: Path = KIT) -> int:
    """How many lines of the modules below `root` mention `Any` as a word."""
    return sum(
        1
        for path in root.rglob("*.py")
        if "files" not in path.relative_to(root).parts
        for line in path.read_text(encoding="utf-8").splitlines()
        if _ANY.search(line)
    )


def test_lines_mentioning_any_do_not_grow() -> None:
    n = any_lines()
    assert n <= MOST, f"{n} lines of kit/ mention Any, {MOST} allowed: give the shape a type"


def test_the_count_is_held_tight() -> None:
    n = any_lines()
    assert n >= MOST, f"only {n} lines mention Any now: lower MOST to {n}"


def test_a_line_with_any_is_counted_and_a_word_containing_it_is_not(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("from typing import Any\nx: Any\nAnyone = 1\nmany = 2\n")
    assert any_lines(tmp_path) == 2

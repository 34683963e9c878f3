"""No module in kit/ runs over about 400 lines: a longer one is split by meaning into modules
of their own, or stands below with the reason it is not (CONTRIBUTING's "Size")."""

from __future__ import annotations

from pathlib import Path

import kit

LIMIT = 400  # lines of a module, every line counted: a reader scrolls through all of them
KIT = Path(kit.__file__).parent

# path below kit/ -> why it stays whole for now; an entry no longer needed fails the test below
ALLOWED = {
    "report/merge.py": "one release table: its checks and its sections read the same sources",
    "report/tables.py": "the tables of one directory and the one judgement they share",
    "report/comparison.py": "compare's JSON types, its classes and its Markdown in one place",
    "report/html_sections.py": "report.html's sections, one function each, on one context",
    "report/markdown.py": "report.md's sections, one function each, in the report's order",
    "measure/clock.py": "the clock's reader process: it runs alone, where the kit may not be",
    "results/store.py": "ResultsDir: the one class that names and writes every file",
    "protocol/load.py": "the protocol's tables as types and their checks, read key by key",
    "engine/series.py": "a series' plan, its runs and §6's separate records on one engine",
    "report/figures.py": "every plot the report draws, on one set of colours and markers",
    "results/audit.py": "verify's pass over the folders: hashes, judgements and conditions at once",
}


def module_lines(root: Path = KIT) -> dict[str, int]:
    """Every module's lines: its path below `root` -> its lines."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if "files" in rel.parts:
            continue  # kit/files: programs and configurations the kit ships, not its code
        found[rel.as_posix()] = len(path.read_text(encoding="utf-8").splitlines())
    return found


def long_modules(root: Path = KIT, limit: int = LIMIT) -> dict[str, int]:
    return {rel: n for rel, n in module_lines(root).items() if n > limit}


def test_the_modules_over_the_limit_are_exactly_the_allowed_ones() -> None:
    long = long_modules()
    over = {rel: n for rel, n in long.items() if rel not in ALLOWED}
    assert not over, f"split these by meaning (lines): {over}"
    # an entry no longer needed goes, so the list says only what is still long
    assert sorted(set(ALLOWED) - set(long)) == [], f"no longer over {LIMIT} lines: drop them"


def test_a_module_over_the_limit_is_found_and_one_at_it_is_not(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\n" * LIMIT)
    assert long_modules(tmp_path) == {}
    (tmp_path / "m.py").write_text("x = 1\n" * (LIMIT + 1))
    assert long_modules(tmp_path) == {"m.py": LIMIT + 1}

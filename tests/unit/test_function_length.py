"""No function in kit/ runs over about a screen: a longer one is split by meaning into
well-named functions, or stands below with the reason it is not."""

from __future__ import annotations

import ast
from pathlib import Path

import kit

LIMIT = 60  # lines of a function, its docstring left out: a docstring is no complexity
KIT = Path(kit.__file__).parent

# "module:function" -> why it stays whole; an entry no longer needed fails the test below
ALLOWED = {
    # one row per contender build; its verdict gate is read by kind (report/states.py), which
    # a split of the same lines would fight
    "tables:comparison_table": "the verdict gate and the row it fills read as one",
    "local:run": "one local run: its supervisor, its reader and what the supervisor reports, in order",
    "summary:build": "summary.json's keys in the order the file gives them, each from one source",
}


def _code_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    assert node.end_lineno is not None
    lines = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        if isinstance(first.value.value, str):
            assert first.end_lineno is not None
            lines -= first.end_lineno - first.lineno + 1
    return lines


def long_functions(root: Path = KIT, limit: int = LIMIT) -> dict[str, int]:
    """Every function over `limit` lines: "module:function" -> its lines."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        if "files" in path.relative_to(root).parts:
            continue  # kit/files: programs and configurations the kit ships, not its code
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = _code_lines(node)
                if lines > limit:
                    found[f"{path.stem}:{node.name}"] = lines
    return found


def test_no_function_runs_over_the_limit_unless_allowed() -> None:
    over = {name: n for name, n in long_functions().items() if name not in ALLOWED}
    assert not over, f"split these by meaning (lines without the docstring): {over}"


def test_every_allowed_function_is_still_long() -> None:
    long = long_functions()
    stale = [name for name in ALLOWED if name not in long]
    assert not stale, f"no longer over {LIMIT} lines: drop them from ALLOWED: {stale}"


def _function(lines: int) -> str:
    """A function of `lines` lines besides its docstring: its `def` and lines - 1 more."""
    body = "\n".join(f"    x{i} = {i}" for i in range(lines - 1))
    return f'def f() -> None:\n    """Why."""\n{body}\n'


def test_a_function_over_the_limit_is_found_and_one_at_it_is_not(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(_function(LIMIT))
    assert long_functions(tmp_path) == {}
    (tmp_path / "m.py").write_text(_function(LIMIT + 1))
    assert long_functions(tmp_path) == {"m:f": LIMIT + 1}

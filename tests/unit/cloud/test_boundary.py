"""SkyPilot's SDK is one boundary module: only kit/cloud/skypilot.py names `sky`, by an import
or by importlib (tests/fakes/skypilot_sdk stands in for it there)."""

from __future__ import annotations

import ast

from tests.conftest import ROOT


def _names_sky(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "sky" for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "sky" and not node.level
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value == "sky" or node.value.startswith("sky.")
    return False


def test_only_the_boundary_module_imports_skypilot() -> None:
    found = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "kit").rglob("*.py")
        if any(_names_sky(n) for n in ast.walk(ast.parse(path.read_text("utf-8"))))
    )
    assert found == ["kit/cloud/skypilot.py"]

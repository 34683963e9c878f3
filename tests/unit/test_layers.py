"""The kit's packages in layers: each imports only the layers below it, and every module has one
name (no two modules share a file name; none is imported under another name).

Read from the source with `ast`, lazy imports inside functions included, so a cycle cannot hide
behind an import made late.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from tests.conftest import ROOT

KIT = ROOT / "kit"
# from the bottom up; a package imports only packages of a lower layer than its own
LAYERS = (
    ("kit", "errors", "status"),
    ("protocol", "telemetry"),
    ("measure",),
    ("results",),
    ("executors",),
    ("sides",),
    ("engine",),
    ("correctness",),
    ("report",),
    ("cloud",),  # renting machines through SkyPilot: called by the CLI alone
    ("cli",),
)
LAYER = {package: n for n, packages in enumerate(LAYERS) for package in packages}


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "files" not in p.relative_to(KIT).parts[:1])


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p) for p in _modules(KIT)}


def _module(imported: str) -> str:
    """The kit module an import names: kit.results.store.ResultsDir -> kit.results.store."""
    while imported not in MODULES:
        imported = imported.rsplit(".", 1)[0]
    return imported


def _package(module: str) -> str:
    """kit.results.store -> results; kit.errors -> errors; kit -> kit."""
    parts = _module(module).split(".")
    return parts[1] if len(parts) > 1 else "kit"


def _imports(path: Path) -> list[tuple[int, str, str | None]]:
    """Each kit module or name `path` imports: its line, the module, and the alias if any."""
    here = _name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, a.asname) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found += [(node.lineno, f"{base}.{a.name}", a.asname) for a in node.names]
    return [(n, m, a) for n, m, a in found if m == "kit" or m.startswith("kit.")]


def test_every_package_has_a_layer() -> None:
    packages = {_package(_name(p)) for p in _modules(KIT)}
    assert packages == set(LAYER), "name each package of kit/ in LAYERS"


def test_imports_run_only_downwards() -> None:
    upwards = []
    for path in _modules(KIT):
        mine = _package(_name(path))
        for line, module, _ in _imports(path):
            theirs = _package(module)
            if theirs != mine and LAYER[theirs] >= LAYER[mine]:
                upwards.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert upwards == []


# above one another yet apart: the report reads the results directory's format (kit.results),
# never the code that ran the series, so a directory from any kit reads the same
APART = {("report", "engine")}


def test_the_report_never_imports_the_engine() -> None:
    crossing = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _modules(KIT)
        for line, module, _ in _imports(path)
        if (_package(_name(path)), _package(module)) in APART
    ]
    assert crossing == []


def test_no_two_modules_share_a_name() -> None:
    names = Counter(p.name for p in _modules(KIT) if p.name != "__init__.py")
    assert [name for name, n in names.items() if n > 1] == []


def test_no_kit_module_is_imported_under_another_name() -> None:
    aliased = [
        f"{path.relative_to(ROOT)}:{line} {module} as {alias}"
        for folder in (KIT, ROOT / "tests", ROOT / "scripts", ROOT / "benchmarks")
        for path in sorted(folder.rglob("*.py"))
        for line, module, alias in _imports(path)
        if alias and module in MODULES and alias != module.rsplit(".", 1)[1]
    ]
    assert aliased == []

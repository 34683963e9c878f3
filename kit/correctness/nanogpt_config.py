"""nanoGPT's configuration, read as its configurator makes it (§7 B's shared start needs the
model's shapes and its optimizer's settings without running train.py)."""

from __future__ import annotations

import ast
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kit.errors import UserError


def _constant(node: ast.expr) -> Any:
    """A literal, or arithmetic on literals (nanoGPT writes `5 * 8`); anything else: ValueError."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        allowed = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)
        if not all(isinstance(n, allowed) for n in ast.walk(node)):
            raise
        return eval(compile(ast.Expression(node), "train.py", "eval"), {"__builtins__": {}})


def nanogpt_config(tree: Path, argv: Sequence[str]) -> dict[str, Any]:
    """nanoGPT's settings as its train.py holds them after its configurator ran `argv`.

    The defaults are train.py's literal assignments before `config_keys`; a config file is run
    as the configurator runs it (exec over those globals); `--key=value` must name a known key
    and keep its type, as the configurator asserts.
    """
    cfg: dict[str, Any] = {}
    for node in ast.parse((tree / "train.py").read_text("utf-8")).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "config_keys":
                break
            try:
                cfg[node.targets[0].id] = _constant(node.value)
            except (ValueError, SyntaxError, TypeError):
                continue  # an expression (dtype's): not a setting the shared start reads
    for arg in argv:
        if "=" not in arg:
            scope: dict[str, Any] = dict(cfg)
            exec(compile((tree / arg).read_text("utf-8"), arg, "exec"), scope)
            cfg |= {k: v for k, v in scope.items() if not k.startswith("_")}
            continue
        key, _, text = arg.removeprefix("--").partition("=")
        if key not in cfg:
            raise UserError(f"nanoGPT's train.py has no setting {key!r} (from {arg})")
        try:
            value = ast.literal_eval(text)
        except (SyntaxError, ValueError):
            value = text
        if type(value) is not type(cfg[key]):
            raise UserError(f"{arg}: nanoGPT's {key} is a {type(cfg[key]).__name__}")
        cfg[key] = value
    return cfg


def meta_vocab(path: Path) -> int:
    """The vocabulary size of a dataset's meta.pkl, as train.py reads it."""
    with open(path, "rb") as f:
        return int(pickle.load(f)["vocab_size"])

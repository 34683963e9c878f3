"""kit.results.jsontext writes what `json.dumps(..., indent=2, allow_nan=False, default=str)`
writes, byte for byte: summary.json's bytes are what `verify` compares with a directory's."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from kit.results import jsontext

SCALARS = (
    0, -7, 2**70, 1.5, -0.0, 1e-300, 3.141592653589793, 1e22, True, False, None, "", "plain",
    'quote " back \\ slash', "tab\tnew\nline", "é ü — ✓ 😀", "\x00\x1f", np.float64(0.1),
    np.int64(3), Decimal("1.10"), Path("/tmp/x"),
)  # fmt: skip
KEYS = ("a", "", "é", 'k"q', 1, 2.5, True, None)


def _document(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if depth > 4 or roll < 0.45:
        return rng.choice(SCALARS)
    n = rng.choice((0, 1, 2, 5))
    if roll < 0.7:
        return [_document(rng, depth + 1) for _ in range(n)]
    if roll < 0.8:
        return tuple(_document(rng, depth + 1) for _ in range(n))
    return {rng.choice(KEYS): _document(rng, depth + 1) for _ in range(n)}


def _standard(document) -> str:
    return json.dumps(document, indent=2, allow_nan=False, default=str)


@pytest.mark.parametrize("seed", range(300))
def test_random_documents_read_as_the_standard_library_writes_them(seed):
    document = _document(random.Random(seed))
    assert jsontext.dumps(document) == _standard(document)


def test_a_summary_shaped_document_and_refusals():
    rows = [{"run_id": i, "step_s": i / 7, "status": "ok", "reason": None} for i in range(50)]
    document = {"schema_version": 5, "runs": rows, "conditions": {"flagged_runs": []}, "e": {}}
    assert jsontext.dumps(document) == _standard(document)
    for bad in ({"x": float("nan")}, [[float("inf")]], {("tuple", "key"): 1}):
        with pytest.raises((ValueError, TypeError)):
            _standard(bad)
        with pytest.raises((ValueError, TypeError)):
            jsontext.dumps(bad)


ROW_VALUES = (
    *SCALARS, "},\n    {", '"},\n  {"', "}", "{", "},", "\n  }\n]", "a}, {b", "\\n", "[{", "}]",
)  # fmt: skip


@pytest.mark.parametrize("seed", range(100))
def test_lists_of_rows_read_as_the_standard_library_writes_them(seed):
    """A list whose members are all flat dicts (summary.json's per-run sections) is written in
    one call and re-laid at the seams: strings that look like a seam stay as they are."""
    rng = random.Random(seed)

    def row():
        keys = [*KEYS, "},\n  {", "x}"]
        return {rng.choice(keys): rng.choice(ROW_VALUES) for _ in range(rng.choice((1, 2, 6)))}

    rows = [row() for _ in range(rng.choice((1, 2, 7)))]
    shaped = rng.choice((list, tuple))(rows)
    for document in (shaped, {"runs": shaped}, [[shaped, 1]], {"a": {"b": shaped}}):
        assert jsontext.dumps(document) == _standard(document)
    # a row that is empty, or holds a container, is walked as before
    for odd in ({}, {"a": []}, {"a": {"b": 1}}):
        document = {"runs": [*rows, odd, *rows]}
        assert jsontext.dumps(document) == _standard(document)

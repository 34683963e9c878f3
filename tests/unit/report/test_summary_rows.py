"""summary.json's rows (kit.report.summary._rows), made column by column, are the cells
`to_dict("records")` gives with `_plain` on each: the same values of the same types, in the
same order, whatever the columns' types (numpy's, pandas' own, text, objects)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kit.report import summary


def _cell_by_cell(frame: pd.DataFrame) -> list[dict]:
    return [{k: summary._plain(v) for k, v in row.items()} for row in frame.to_dict("records")]


def _typed(rows: list[dict]) -> list[list[tuple[str, type, str]]]:
    return [[(k, type(v), repr(v)) for k, v in row.items()] for row in rows]


FRAME = pd.DataFrame(
    {
        "float": [1.5, float("nan"), float("inf")],
        "int": [1, 2, 3],
        "bool": [True, False, True],
        "text": ["x", None, "z"],
        "Int64": pd.array([1, None, 3], dtype="Int64"),
        "object": [np.int64(3), "s", 2.5],
        "Float64": pd.array([1.5, None, 2.0], dtype="Float64"),
        "negative_inf": [-np.inf, 0.0, -0.0],
    }
)


@pytest.mark.parametrize(
    "frame",
    [FRAME, FRAME.iloc[:0], FRAME[["text", "object"]], FRAME[["float", "int"]]],
    ids=["mixed", "empty", "no numbers", "numbers only"],
)
def test_rows_are_the_cells_plain_one_by_one(frame: pd.DataFrame) -> None:
    assert _typed(summary._rows(frame)) == _typed(_cell_by_cell(frame))

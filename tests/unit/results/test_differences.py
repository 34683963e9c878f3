"""`verify --json` gives each difference as an object: the file, where in it, what was found
(published), what was expected (recomputed), its kind, and the sentence `verify` prints."""

from __future__ import annotations

import pandas as pd
import pytest

from kit.results import differences
from kit.results.differences import as_object, file_differences, frame_differences


def test_a_line_of_a_file_is_named_with_what_was_found_and_expected(tmp_path):
    (tmp_path / "report.md").write_text("# a\n| x, y | 1 |\n")
    (said,) = file_differences(tmp_path, "report.md", b"# a\n| x, y | 2 |\n")
    got = as_object(said)
    assert got == {"file": "report.md", "line": 2, "row": None, "column": None,
                   "found": "| x, y | 1 |", "expected": "| x, y | 2 |", "kind": "line",
                   "reason": said}  # fmt: skip


def test_a_cell_of_a_table_is_named_by_row_and_column():
    published = pd.DataFrame({"config": ["a", "b"], "median_step_s": [0.5, 0.25]})
    recomputed = pd.DataFrame({"config": ["a", "b, c"], "median_step_s": [0.5, 0.125]})
    found = [as_object(d) for d in frame_differences("tables/runs.csv", published, recomputed)]
    assert [
        (d["file"], d["row"], d["column"], d["found"], d["expected"], d["kind"]) for d in found
    ] == [
        ("tables/runs.csv", 3, "config", "b", "b, c", "cell"),
        ("tables/runs.csv", 3, "median_step_s", 0.25, 0.125, "cell"),
    ]


@pytest.mark.parametrize(
    "said, kind, file, found, expected",
    [
        ("tables/runs.csv: missing", "missing", "tables/runs.csv", None, None),
        ("report.md: 10 lines published, 12 recomputed", "lines", "report.md", 10, 12),
        ("tables/runs.csv: 3 rows published, 4 recomputed", "rows", "tables/runs.csv", 3, 4),
        (
            "plots/a.png: differs from the plot recomputed from the raw logs",
            "plot",
            "plots/a.png",
            None,
            None,
        ),
        ("plots/old.png: a file the report does not make", "not made", "plots/old.png", None, None),
        (
            "runs/0000-x/attempt-1/stdout.log: raw file changed since run 0 wrote it",
            "other",
            "runs/0000-x/attempt-1/stdout.log",
            None,
            None,
        ),
        ("not recomputed: the records and raw files above come first", "other", None, None, None),
    ],
)
def test_every_wording_has_its_kind(said, kind, file, found, expected):
    got = as_object(said)
    assert (got["kind"], got["file"], got["found"], got["expected"]) == (
        kind,
        file,
        found,
        expected,
    )
    assert got["reason"] == said and got["kind"] in differences.KINDS

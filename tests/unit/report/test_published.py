"""summary.json's schema as a reader asks it: read from the file's head where the file
declares one schema, as the kit writes it, else parsed whole (kit.report.published)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.report import published, resolution


class Dir:  # what `resolution` asks of a results directory: its root
    def __init__(self, root: Path):
        self.root = root


def written(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(document, indent=2) + "\n")  # as kit.report.summary writes it
    return path


def test_the_schema_the_kit_writes_first_is_read_from_the_head(tmp_path):
    path = written(tmp_path, {"schema_version": 4, "kit": {"version": "0.1.0"}, "runs": []})
    assert published.declared_schema(path) == 4
    assert published.document(path)["schema_version"] == 4


@pytest.mark.parametrize(
    "document",
    [
        {"kit": {}, "schema_version": 4},  # not the first key
        {"schema_version": 4, "runs": [{"schema_version": 1}]},  # a second one inside
        {"schema_version": 4, "schema": 1},  # an older kit's key beside it
    ],
)
def test_a_file_that_declares_no_single_schema_first_is_left_to_the_parser(tmp_path, document):
    assert published.declared_schema(written(tmp_path, document)) is None


def test_no_file_and_another_layout_declare_none(tmp_path):
    assert published.declared_schema(tmp_path / "summary.json") is None
    (tmp_path / "summary.json").write_text('{"schema_version": 4}')  # not indented
    assert published.declared_schema(tmp_path / "summary.json") is None


@pytest.mark.parametrize("schema", [1, 2, 3, 4])
@pytest.mark.parametrize("rest", ["whole", "torn"])
def test_the_resolutions_questions_answer_as_the_parsed_file_does(tmp_path, schema, rest):
    """in_pm and published_with read the head where it answers for the whole file: a file
    that declares a current schema answers so whether or not the rest parses (one that does
    not parse answers as a current one), and an older one is parsed."""
    path = written(tmp_path, {"schema_version": schema, "comparisons": []})
    if rest == "torn":
        path.write_bytes(path.read_bytes()[:-5])
    parsed = published.document(path)
    found = parsed.get("schema_version") if isinstance(parsed, dict) else None
    rd = Dir(tmp_path)
    assert resolution.in_pm(rd) == (found is None or found >= resolution.PM_SCHEMA)
    assert resolution.published_with(rd) == (found is None or found >= resolution.FIRST_SCHEMA)

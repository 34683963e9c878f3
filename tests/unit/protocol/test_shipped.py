"""A protocol file against the one the kit ships: the same bytes, or each key that differs."""

from __future__ import annotations

from kit.protocol.load import DEFAULT_PATH
from kit.protocol.shipped import against_shipped
from tests.conftest import edit_protocol


def test_the_shipped_protocol_is_shipped(tmp_path):
    found = against_shipped(DEFAULT_PATH)
    assert found.shipped and found.label() == "" and found.lines() == []
    copy = tmp_path / "protocol.toml"
    copy.write_bytes(DEFAULT_PATH.read_bytes())
    assert against_shipped(copy).shipped  # the bytes decide, not the path
    assert against_shipped(copy).to_json()["differences"] == []


def test_each_key_that_differs_is_named_with_both_values(tmp_path):
    copy = tmp_path / "protocol.toml"
    copy.write_bytes(DEFAULT_PATH.read_bytes())
    edit_protocol(copy, {"timing.cross_check_tolerance": 0.4, "timing.window": [50, 400],
                         "amendments": []})  # fmt: skip
    found = against_shipped(copy)
    assert not found.shipped and found.label() == "not the protocol the kit ships"
    keys = {c.key: c for c in found.changed}
    assert (
        keys["timing.cross_check_tolerance"].shipped,
        keys["timing.cross_check_tolerance"].here,
    ) == (0.01, 0.4)
    assert keys["timing.window"].here == [50, 400]
    assert keys["amendments.0.title"].here is None  # a key only the shipped one has
    assert "`timing.cross_check_tolerance`: 0.4 here, 0.01 shipped" in found.lines()
    assert '`amendments.0.title`: absent here, "the verdicts" shipped' in found.lines()
    document = found.to_json()
    assert document["shipped"] is False
    assert {"key": "timing.cross_check_tolerance", "shipped": 0.01, "here": 0.4} in document[
        "differences"
    ]


def test_a_comment_changed_is_not_the_shipped_file_though_no_key_differs(tmp_path):
    copy = tmp_path / "protocol.toml"
    copy.write_bytes(DEFAULT_PATH.read_bytes() + b"# one more line\n")
    found = against_shipped(copy)
    assert not found.shipped and found.changed == ()
    assert found.lines() == [
        "its text differs from the shipped file's (comments or layout); no key does"
    ]

"""A series measured under a protocol other than the one the kit ships says so at the top of
every output, key by key (§3 rule 1): report.md, report.html, the terminal's result block,
summary.json and `micakit compare`; and `verify` of a protocol.toml edited afterwards exits 4
naming it."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest

from kit.errors import ExitCode
from tests.conftest import preview_series, write_protocol

pytestmark = pytest.mark.slow  # one small series

LOOSENED = "`timing.cross_check_tolerance`: 0.4 here, 0.01 shipped"


@pytest.fixture(scope="module")
def loosened(tmp_path_factory) -> tuple[Path, str]:
    """A series passed a protocol whose cross-check tolerance is 40% (legitimately, with
    --protocol), published as a preview; and what the series printed."""
    root = tmp_path_factory.mktemp("loosened")
    protocol = write_protocol(root / "protocol.toml", runs=2, tolerance=0.40)
    return preview_series(root, protocol, "--precision", "float32")


def test_report_md_and_html_say_so_at_the_top(loosened):
    out, _ = loosened
    md = (out / "report.md").read_text()
    title, _, first = md.split("\n", 3)[:3]
    assert "not the protocol the kit ships" in title
    # the first paragraph says it and how many keys differ; every key, with both values, under
    # a heading of its own (the tests' protocol differs in more keys than the one loosened)
    assert first.startswith("**Not the shipped protocol**: ")
    assert "How this protocol differs from the shipped one" in first
    every = md[md.index("## How this protocol differs from the shipped one") :]
    assert f"- {LOOSENED}" in every
    page = (out / "report.html").read_text()
    assert "not the protocol the kit ships" in page[: page.index("</h1>")]
    assert html.escape("timing.cross_check_tolerance") in page


def test_the_terminal_block_says_so_first(loosened, cli):
    out, printed = loosened
    block = printed[printed.index("PROTOCOL: not the protocol the kit ships") :]
    assert LOOSENED.replace("`", "") in block
    assert block.index("timing.cross_check_tolerance") < block.index("Report:")


def test_summary_json_says_shipped_false_with_each_key_and_both_values(loosened):
    out, _ = loosened
    found = json.loads((out / "summary.json").read_text())["protocol"]
    assert found["shipped"] is False
    assert found["sha256"] == json.loads((out / "manifest.json").read_text())["protocol_sha256"]
    assert {"key": "timing.cross_check_tolerance", "shipped": 0.01, "here": 0.4} in found[
        "differences"
    ]


def test_compare_says_so_at_the_top(loosened, cli, tmp_path):
    out, _ = loosened
    res = cli("compare", out, out, "--preview")
    assert res.exit_code == 0, res.output
    head = res.output[: res.output.index("| model |")]
    assert "not the protocol the kit ships" in head.splitlines()[0]
    assert "**A ran under a protocol the kit does not ship**" in head
    assert "**B ran under a protocol the kit does not ship**" in head
    assert f"- {LOOSENED}" in head
    as_json = json.loads(cli("compare", out, out, "--preview", "--json").output)
    assert as_json["protocol_a"]["shipped"] is False
    assert {"key": "timing.cross_check_tolerance", "shipped": 0.01, "here": 0.4} in as_json[
        "protocol_b"
    ]["differences"]


def test_the_labelled_directory_verifies_and_an_edited_protocol_exits_4(loosened, cli, tmp_path):
    out, _ = loosened
    assert cli("verify", out).exit_code == 0
    copy = tmp_path / "r"
    shutil.copytree(out, copy, symlinks=True)
    path = copy / "protocol.toml"
    path.write_text(
        path.read_text().replace("cross_check_tolerance = 0.4", "cross_check_tolerance = 0.9")
    )
    res = cli("verify", copy)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH, res.output
    assert "protocol.toml" in res.output and "the protocol copy was changed" in res.output
    # an edit that breaks the file is named the same, never a parse error with exit 2
    path.write_text("not toml [")
    res = cli("verify", copy)
    assert res.exit_code == ExitCode.VERIFY_MISMATCH, res.output
    assert "protocol.toml" in res.output

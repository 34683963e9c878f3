"""kit.results.links: every symbolic link of a results directory named, in the order of the
names (a folder's own before those of the folders in it), and the run folders' listing from the
same walk equal to `ResultsDir.listing`'s."""

from __future__ import annotations

import os
from pathlib import Path

from kit.results import links
from kit.results.store import ResultsDir


def _directory(root: Path) -> None:
    for rel in (
        "runs/0000-a/attempt-1/stdout.log",
        "runs/0000-a/attempt-1/ld_debug/trace.1",
        "runs/0000-a/attempt-2/stdout.log",
        "runs/0001-b/attempt-1/run.json",
        "runs/0001-b/notes.txt",
        "work/nanogpt/shipped/train.py",
        "work/nanogpt/workspace.json",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    (root / "runs/0001-b/attempt-3").mkdir()  # an empty attempt


def test_the_listing_from_the_walk_is_the_stores_and_no_link_is_named(tmp_path):
    _directory(tmp_path)
    (tmp_path / "work/nanogpt/shipped/data").symlink_to(os.path.join("..", "data"))
    named, listing = links.found_and_listed(tmp_path)
    assert named == []  # the one link the kit makes
    assert listing == ResultsDir(tmp_path).listing()
    assert listing["runs/0000-a/attempt-1"] == {
        "runs/0000-a/attempt-1/stdout.log",
        "runs/0000-a/attempt-1/ld_debug/",
        "runs/0000-a/attempt-1/ld_debug/trace.1",
    }
    assert listing["runs/0001-b/attempt-3"] == frozenset()


def test_links_are_named_a_folders_own_first(tmp_path):
    _directory(tmp_path)
    for rel in ("z.json", "runs/0000-a/attempt-1/b.log", "runs/a.log", "runs/0000-a/c.log"):
        (tmp_path / rel).symlink_to("/etc/hostname")
    named = [line.split(":")[0] for line in links.found(tmp_path)]
    assert named == [
        "z.json",
        "runs/a.log",
        "runs/0000-a/c.log",
        "runs/0000-a/attempt-1/b.log",
    ]
    _, listing = links.found_and_listed(tmp_path)
    assert "runs/0000-a/attempt-1/b.log" in listing["runs/0000-a/attempt-1"]

"""benchmarks/kit/scale.py runs as docs/benchmarks.md gives it, at a small size, and its `--keep`
times again only what this kit made: a kept directory that another kit commit made (whose
manifest names that commit) is made again, since this kit would read it as an older directory
(`verify` re-renders one as the kit that made it did) and time that path instead of its own."""

import json
import re
import sys

from tests.conftest import run_benchmark


def test_keep_times_this_kits_directory_again_and_makes_another_kits_again(tmp_path):
    keep = tmp_path / "kept"
    other = tmp_path / "python"  # another interpreter's path, as a venv of its own gives one
    other.symlink_to(sys.executable)
    first = run_benchmark(
        "scale.py", "--runs", 30, "--repeat", 1, "--keep", keep,
        "--floor-import", f"{other}=import json",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "this kit: 30 runs" in first.stdout, first.stdout
    assert "report  median" in first.stdout and "verify  median" in first.stdout, first.stdout
    floor = next(line for line in first.stdout.splitlines() if "floor: " in line)
    # the walk, then each start: pandas, numpy with click, and the one asked for, each timed
    assert re.search(r"walked, read and hashed once by a bare loop in \d+\.\d\d s", floor), floor
    for statement in ("import pandas", "import numpy, click"):  # by the kit's interpreter
        assert re.search(rf"(with |; )`{statement}` \d+\.\d\d s", floor), floor
    assert re.search(rf"`import json` \(by {re.escape(str(other))}\) \d+\.\d\d s", floor), floor

    again = run_benchmark("scale.py", "--runs", 30, "--repeat", 1, "--keep", keep)
    assert again.returncode == 0, again.stderr
    assert f"this kit: {keep / '30-0'} as an earlier run made it" in again.stdout, again.stdout

    manifest = keep / "30-0" / "manifest.json"
    document = json.loads(manifest.read_text())
    document["kit_commit"] = "0" * 40  # as another kit commit writes it
    manifest.write_text(json.dumps(document, indent=2) + "\n")
    other = run_benchmark("scale.py", "--runs", 30, "--repeat", 1, "--keep", keep)
    assert other.returncode == 0, other.stderr
    assert f"was made by kit commit {'0' * 40}, not " in other.stdout, other.stdout
    assert "made again" in other.stdout and "this kit: 30 runs" in other.stdout, other.stdout
    assert json.loads(manifest.read_text())["kit_commit"] != "0" * 40


def test_a_floor_import_by_an_interpreter_that_is_not_there_is_refused_before_any_work(tmp_path):
    missing = tmp_path / "no" / "python"
    got = run_benchmark("scale.py", "--runs", 30, "--floor-import", f"{missing}=import polars")
    assert got.returncode == 2, got.stderr
    assert f"no interpreter at {missing}" in got.stderr, got.stderr
    assert "runs" not in got.stdout, got.stdout  # nothing made, nothing timed

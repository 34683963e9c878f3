"""Results are published: files 0644 (0755 where executable), folders 0755, whatever the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kit.results import store
from tests.conftest import contender_args


@pytest.fixture
def umask_077():
    old = os.umask(0o077)
    yield
    os.umask(old)


def modes(root: Path) -> dict[str, int]:
    return {
        p.relative_to(root).as_posix(): stat.S_IMODE(p.lstat().st_mode)
        for p in root.rglob("*")
        if not p.is_symlink()
    }


def test_the_store_writes_readable_files_under_umask_077(tmp_path: Path, umask_077) -> None:
    rd = store.ResultsDir.create(tmp_path / "r" / "s")
    rd.write_json("plan.json", {"a": 1})
    rd.write_text("tables/report.md", "# report\n")
    rd.append_record({"run_id": 0})
    attempt = rd.new_attempt_dir(0, "cpu-x")
    assert modes(tmp_path) == {
        "r": 0o755,
        "r/s": 0o755,
        "r/s/.micakit-series": 0o644,
        "r/s/.micakit-lock": 0o644,  # the one writer's lock
        "r/s/plan.json": 0o644,
        "r/s/tables": 0o755,
        "r/s/tables/report.md": 0o644,
        "r/s/runs.jsonl": 0o644,
        "r/s/runs": 0o755,
        "r/s/runs/0000-cpu-x": 0o755,
        "r/s/runs/0000-cpu-x/attempt-1": 0o755,
    }
    # what other programs write under the umask becomes readable when published
    (attempt / "stdout.log").write_text("step 1\n")
    (attempt / "run.sh").write_text("#!/bin/sh\n")
    (attempt / "run.sh").chmod(0o700)
    (attempt / "deep").mkdir()
    assert modes(attempt) == {"stdout.log": 0o600, "run.sh": 0o700, "deep": 0o700}
    store.publish_modes(rd.root)
    assert modes(attempt) == {"stdout.log": 0o644, "run.sh": 0o755, "deep": 0o755}


@pytest.mark.slow
def test_a_series_under_umask_077_is_world_readable(
    tmp_path, fast_protocol, fake_env, cli, umask_077
):
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    res = cli(*contender_args(out, fast_protocol, "--precision", "float32"))
    assert res.exit_code == 0, res.output
    found = modes(out)
    assert {"report.md", "manifest.json", "plan.json", "runs.jsonl"} <= set(found)
    wrong = {}
    for rel, mode in found.items():
        path = out / rel
        want = 0o755 if path.is_dir() or mode & 0o100 else 0o644
        if mode != want:
            wrong[rel] = oct(mode)
    assert wrong == {}

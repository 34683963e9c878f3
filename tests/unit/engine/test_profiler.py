"""§6 under Docker: Nsight Systems from the host, mounted read-only into profiled runs only; and
a kernel table that cannot be read is listed with its reason."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from kit.engine import extras
from kit.executors.base import Mount, RunSpec
from kit.executors.docker.containers import NSYS_DIR, NSYS_ENV, HostPaths, host_nsys
from kit.executors.docker.executor import DockerExecutor
from kit.protocol.load import load
from kit.report import sidetables
from kit.results.planned import PROFILE
from kit.results.store import ResultsDir

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nsys"


def installation(root: Path) -> Path:
    """A host's Nsight Systems as its installer lays it out, and nsys on PATH linking into it."""
    home = root / "opt" / "nvidia" / "nsight-systems" / "2025.3.1"
    (home / "bin").mkdir(parents=True)
    (home / "target-linux-x64").mkdir()
    (home / "bin" / "nsys").write_text("#!/bin/sh\n")
    (root / "usr-bin").mkdir()
    (root / "usr-bin" / "nsys").symlink_to(home / "bin" / "nsys")
    return home


def docker_executor(paths: HostPaths) -> DockerExecutor:
    executor = DockerExecutor(client=None)  # type: ignore[arg-type] - no engine is asked
    executor._host_paths = paths
    return executor


def spec() -> RunSpec:
    return RunSpec(
        label="run 9 m1/float32/pytorch/default",
        argv=("python", "train.py"),
        mounts=(Mount("nanogpt", Path("/src")),),
        image="micakit-pytorch:t",
        gpu="all",
    )


def test_nsys_on_path_is_found_through_its_link(tmp_path):
    home = installation(tmp_path)
    found = host_nsys({}, lambda p: str(tmp_path / "usr-bin" / "nsys"))
    assert not isinstance(found, str), found
    assert found.root == home.resolve() and found.program == "bin/nsys"
    assert found.in_run == f"{NSYS_DIR}/bin/nsys"


def test_micakit_nsys_names_the_folder_or_the_program(tmp_path):
    home = installation(tmp_path)
    never = lambda p: pytest.fail("PATH is not searched when MICAKIT_NSYS is set")  # noqa: E731
    by_folder = host_nsys({NSYS_ENV: str(home)}, never)
    by_program = host_nsys({NSYS_ENV: str(home / "bin" / "nsys")}, never)
    assert by_folder == by_program and by_folder.root == home.resolve()
    assert "does not exist" in host_nsys({NSYS_ENV: str(tmp_path / "nope")}, never)
    (tmp_path / "empty").mkdir()
    assert "holds no bin/nsys" in host_nsys({NSYS_ENV: str(tmp_path / "empty")}, never)


def test_no_nsys_is_a_reason_never_an_error(tmp_path):
    assert "nsys not found on the host" in host_nsys({}, lambda p: None)


def test_the_profiled_runs_spec_mounts_the_hosts_nsys_read_only(tmp_path, monkeypatch):
    home = installation(tmp_path)
    monkeypatch.setenv(NSYS_ENV, str(home))
    executor = docker_executor(HostPaths(container_id=None))
    log_dir = tmp_path / "runs" / "0009" / "attempt-1"
    log_dir.mkdir(parents=True)
    prepared = extras.prepare(PROFILE, spec(), executor, log_dir)
    assert prepared.skip_reason is None
    nsys = [m for m in prepared.spec.mounts if m.name == "nsys"]
    assert nsys == [Mount("nsys", home.resolve(), read_only=True)]
    assert executor.where(nsys[0]) == NSYS_DIR
    assert prepared.spec.argv[:2] == (f"{NSYS_DIR}/bin/nsys", "profile")
    assert prepared.spec.argv[-2:] == ("python", "train.py")
    assert prepared.spec.image == "micakit-pytorch:t"  # the measured image, never one with nsys
    # a timed run of the same configuration never sees it (§8: the measured image is all)
    for kind in ("timed", "discarded"):
        plain = extras.prepare(kind, spec(), executor, log_dir)
        assert all(m.name != "nsys" for m in plain.spec.mounts)
        assert plain.spec.argv == ("python", "train.py")


def test_without_nsys_the_run_is_not_profiled_and_the_lookup_is_made_once(tmp_path, monkeypatch):
    monkeypatch.delenv(NSYS_ENV, raising=False)
    calls = []
    monkeypatch.setattr("kit.executors.docker.executor.shutil.which", lambda p: calls.append(p))
    executor = docker_executor(HostPaths(container_id=None))
    for n in range(3):
        prepared = extras.prepare(PROFILE, spec(), executor, tmp_path / f"a{n}")
        # the reason alone: the record's status already says "not profiled"
        assert prepared.skip_reason == "nsys not found on the host (PATH, or MICAKIT_NSYS)"
    assert calls == ["nsys"]


def test_nsys_that_the_engine_cannot_see_is_a_reason(tmp_path, monkeypatch):
    home = installation(tmp_path)
    monkeypatch.setenv(NSYS_ENV, str(home))
    # the kit inside its runner container, with nothing of the host's nsys mounted into it
    executor = docker_executor(HostPaths(container_id="c" * 64, binds=(("/results", "/r"),)))
    prepared = extras.prepare(PROFILE, spec(), executor, tmp_path / "a")
    assert prepared.skip_reason.startswith(f"nsys at {home.resolve()} cannot be")


def stamped(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{1000 + i} {line}\n" for i, line in enumerate(text.splitlines())))


def test_a_kernel_table_that_fails_to_parse_is_listed_with_its_reason(tmp_path):
    rd = ResultsDir(tmp_path)
    good, bad, gone = (f"runs/000{i}-c{i}/attempt-1" for i in (1, 2, 3))
    stamped(
        tmp_path / good / "nsys-stats" / "stdout.log",
        (FIXTURES / "kernsum_eager_float32.txt").read_text(),
    )
    stamped(
        tmp_path / bad / "nsys-stats" / "stdout.log",
        (FIXTURES / "kernsum_truncated.txt").read_text(),
    )
    (tmp_path / gone).mkdir(parents=True)
    runs = pd.DataFrame(
        [
            {
                "config": f"m1/float32/pytorch/{m}",
                "side": "pytorch",
                "kind": "profile",
                "status": "ok",
                "log_dir": d,
                "reason": "",
            }
            for m, d in (("eager", good), ("default", bad), ("max-autotune", gone))
        ]
    )
    kernel, _, attention, unreadable = sidetables.kernel_tables(rd, runs, load(None))
    assert set(kernel["config"]) == {"m1/float32/pytorch/eager"}
    assert list(attention) == ["m1/float32/pytorch/eager"]
    assert len(unreadable) == 2
    assert unreadable[0].startswith("m1/float32/pytorch/default has no kernel table: nsys stats'")
    assert f"{bad}/nsys-stats" in unreadable[0] and "cannot be read (" in unreadable[0]
    assert unreadable[1] == (
        f"m1/float32/pytorch/max-autotune has no kernel table: {gone} holds no output of nsys stats"
    )


def test_one_reason_shared_by_many_configurations_is_said_once():
    runs = pd.DataFrame(
        [
            {
                "config": c,
                "kind": "profile",
                "status": "not profiled",
                "reason": "not profiled: nsys not found",
            }
            for c in ("a", "b", "c")
        ]
        + [{"config": "d", "kind": "graph-breaks", "status": "out of memory", "reason": ""}]
    )
    assert sidetables.missing_records(runs) == [
        "a, b and c have no kernel table: not profiled: nsys not found",
        "d has no graph-break counts: out of memory",
    ]

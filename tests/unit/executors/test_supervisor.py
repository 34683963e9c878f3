"""A local run's supervisor (kit.executors.supervisor): every process a run starts is found and
stopped, a double-forked daemon included, and, where namespaces are allowed, a run sees only its
own mounts of the folder it is confined from."""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from kit.executors.base import Mount, RunSpec
from kit.executors.local import LocalExecutor
from tests.conftest import FAKES, alive

# A contender that leaves a daemon, as tests/fakes/hostile_contender.py makes one: it
# double-forks, the middle child calls setsid (a session of its own, out of the run's process
# group), and the grandchild sleeps on. KEEP: whether the daemon keeps the run's stdout open or
# sends its output to /dev/null.
DAEMON = f"""
import os, sys
sys.path.insert(0, {str(FAKES)!r})
os.environ["HOSTILE_SLEEP"] = sys.argv[1]
from hostile_contender import daemon
print("step 0 loss 4.0 time_ms 0", flush=True)
daemon(sys.argv[2] == "keep")
print("done", flush=True)
"""


def _namespaces_allowed(tmp_path: Path) -> bool:
    spec = RunSpec("probe", ("true",), confine=(tmp_path,))
    outcome = LocalExecutor().run(spec, tmp_path.parent / f"probe-{uuid.uuid4().hex}")
    return bool(outcome.isolation and outcome.isolation.startswith("namespaces"))


@pytest.mark.parametrize("keep", ["keep", "null"])
@pytest.mark.parametrize("confine", [False, True], ids=["subreaper", "namespaces"])
def test_a_double_forked_daemon_is_stopped_named_and_gone(tmp_path, keep, confine):
    marker = f"300.{uuid.uuid4().int % 10**12}"  # a sleep of 300 s no other process runs
    hidden = tmp_path / "results"
    hidden.mkdir()
    if confine and not _namespaces_allowed(hidden):
        pytest.skip("this machine allows no user namespaces")
    spec = RunSpec(
        "daemon", (sys.executable, "-c", DAEMON, marker, keep), confine=(hidden,) if confine else ()
    )
    started = time.monotonic()
    outcome = LocalExecutor(grace_s=1.0, confine=confine).run(spec, tmp_path / "logs")
    took = time.monotonic() - started
    assert outcome.exit_code == 0
    # over after the linger and the grace, though the daemon sleeps 300 s holding stdout
    assert took < 30, took
    assert outcome.outlived is not None
    assert outcome.outlived.startswith("1 process outlived the program and was stopped (sleep")
    assert alive(marker) == []
    assert b"done" in (tmp_path / "logs" / "stdout.log").read_bytes()


def test_a_program_that_leaves_nothing_says_nothing(tmp_path):
    outcome = LocalExecutor().run(RunSpec("clean", ("true",)), tmp_path / "logs")
    assert outcome.exit_code == 0 and outcome.outlived is None and outcome.isolation is None


def test_a_program_killed_by_a_signal_reads_as_killed(tmp_path):
    spec = RunSpec("killed", ("sh", "-c", "kill -9 $$"))
    assert LocalExecutor().run(spec, tmp_path / "logs").exit_code == -9


# What a contender might try on the results directory it is confined from: each line says
# what it tried and whether the system let it.
PROBE = """
import os, sys
root = sys.argv[1]
def attempt(name, fn):
    try:
        fn()
        print(name, "allowed", flush=True)
    except OSError as e:
        print(name, "refused", e.strerror, flush=True)
attempt("read-secret", lambda: open(f"{root}/runs/pytorch/stdout.log").read())
attempt("write-tree", lambda: open(f"{root}/work/nanogpt/train.py", "a").write("x"))
attempt("write-shared", lambda: open(f"{root}/shared_start/init.bin", "a").write("x"))
attempt("read-shared", lambda: open(f"{root}/shared_start/init.bin").read())
attempt("write-products", lambda: open(f"{root}/work/products/p.products", "w").write("x"))
attempt("read-manifest", lambda: open(f"{root}/manifest.json").read())
kit = sys.argv[2]
attempt("proc-root", lambda: open(f"/proc/{kit}/root{root}/manifest.json").read())
attempt("proc-cwd", lambda: os.listdir(f"/proc/{kit}/cwd"))
"""


def test_a_confined_run_sees_only_its_mounts(tmp_path):
    root = tmp_path / "results"
    for rel, text in {
        "runs/pytorch/stdout.log": "1 step 0 loss 4.0\n",
        "work/nanogpt/train.py": "print()\n",
        "shared_start/init.bin": "w",
        "manifest.json": "{}",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "work" / "products").mkdir()
    if not _namespaces_allowed(root):
        pytest.skip("this machine allows no user namespaces")
    spec = RunSpec(
        "probe",
        (sys.executable, "-c", PROBE, str(root), str(os.getpid())),
        mounts=(
            Mount("shared_start", root / "shared_start"),
            Mount("products", root / "work" / "products", read_only=False),
        ),
        confine=(root,),
    )
    outcome = LocalExecutor().run(spec, tmp_path / "logs")
    assert outcome.exit_code == 0
    assert outcome.isolation is not None and outcome.isolation.startswith("namespaces")
    said = {
        line.split()[1]: line.split()[2]
        for line in (tmp_path / "logs" / "stdout.log").read_text().splitlines()
    }
    assert said == {
        "read-secret": "refused",
        "write-tree": "refused",
        "write-shared": "refused",
        "read-shared": "allowed",
        "write-products": "allowed",
        "read-manifest": "refused",
        "proc-root": "refused",
        "proc-cwd": "refused",
    }, said
    # the files it could not reach are as they were; what it may write, it wrote
    assert (root / "work" / "nanogpt" / "train.py").read_text() == "print()\n"
    assert (root / "work" / "products" / "p.products").read_text() == "x"


def test_without_namespaces_the_record_says_the_run_was_not_confined(tmp_path):
    spec = RunSpec("plain", ("true",), confine=(tmp_path,))
    outcome = LocalExecutor(confine=False).run(spec, tmp_path / "logs")
    assert outcome.isolation == "none"

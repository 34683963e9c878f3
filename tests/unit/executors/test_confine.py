"""A confined contender's hidden machine (kit.executors.confine, kit.executors.sight): it sees the
system's folders, what it reads and its mounts, nothing else: not another results directory
beside its own, not HOME, not /tmp's contents; the PyTorch side still sees the machine read-only."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest

from kit.executors import sight
from kit.executors.base import Mount, RunSpec
from kit.executors.local import LocalExecutor
from kit.executors.supervised import hidden
from tests.unit.executors.test_supervisor import _namespaces_allowed

# what a contender that wants to win looks for: each line says what it tried and what it found
LOOK = """
import os, sys
def attempt(name, fn):
    try:
        print(name, "allowed", repr(fn())[:300], flush=True)
    except OSError as e:
        print(name, "refused", e.strerror, flush=True)
attempt("sibling-log", lambda: open(sys.argv[1]).read())
attempt("sibling-folder", lambda: os.listdir(sys.argv[2]))
attempt("home", lambda: os.listdir(sys.argv[3]))
attempt("tmp", lambda: os.listdir("/tmp"))
attempt("read-data", lambda: open(sys.argv[4]).read())
attempt("write-products", lambda: open(sys.argv[5], "w").write("x"))
attempt("write-tmp", lambda: open("/tmp/left", "w").write("x"))
attempt("write-system", lambda: open("/etc/left", "w").write("x"))
attempt("system", lambda: os.path.exists("/usr/lib") or 1 / 0)
attempt("devices", lambda: " ".join(sorted(os.listdir("/dev"))))
attempt("null", lambda: open("/dev/null", "w").write("x"))
"""


def _folders(tmp_path: Path) -> dict[str, Path]:
    """A results directory, an earlier one beside it holding PyTorch's log, a HOME, the data."""
    f = {
        "root": tmp_path / "results" / "b2",
        "sibling": tmp_path / "results" / "b1",
        "home": tmp_path / "home",
        "data": tmp_path / "data",
    }
    (f["sibling"] / "runs").mkdir(parents=True)
    (f["sibling"] / "runs" / "stdout.log").write_text("1 iter 0: loss 4.1\n")
    (f["root"] / "work" / "products").mkdir(parents=True)
    f["home"].mkdir()
    (f["home"] / "secret").write_text("s")
    f["data"].mkdir()
    (f["data"] / "train.bin").write_text("d")
    return f


def _look(tmp_path: Path, side: str, program: tuple[str, ...]) -> tuple[dict[str, str], str]:
    f = _folders(tmp_path)
    if not _namespaces_allowed(f["root"]):
        pytest.skip("this machine allows no user namespaces")
    products = f["root"] / "work" / "products"
    spec = RunSpec(
        "look",
        (
            *program,
            str(f["sibling"] / "runs" / "stdout.log"),
            str(f["sibling"]),
            str(f["home"]),
            str(f["data"] / "train.bin"),
            str(products / "p.products"),
        ),  # fmt: skip
        mounts=(Mount("data", f["data"]), Mount("products", products, read_only=False)),
        confine=(f["root"],),
        side=side,
    )
    outcome = LocalExecutor().run(spec, f["root"] / "runs" / "look")
    lines = (f["root"] / "runs" / "look" / "stdout.log").read_text().splitlines()
    assert outcome.exit_code == 0, lines
    return {line.split()[1]: line.split()[2] for line in lines}, str(outcome.isolation)


def test_a_contender_sees_no_other_results_directory_no_home_and_no_tmp(tmp_path):
    said, isolation = _look(tmp_path, "contender", (sys.executable, "-c", LOOK))
    assert said == {
        "sibling-log": "refused",
        "sibling-folder": "refused",
        "home": "refused",
        "tmp": "allowed",  # its own, empty: listed below
        "read-data": "allowed",
        "write-products": "allowed",
        "write-tmp": "allowed",
        "write-system": "refused",
        "system": "allowed",
        "devices": "allowed",
        "null": "allowed",
    }, said
    assert "the machine hidden" in isolation and hidden(isolation), isolation
    stdout = (tmp_path / "results" / "b2" / "runs" / "look" / "stdout.log").read_text()
    # nothing of the machine's /tmp: the ways to its mounts and to the kit's Python alone,
    # where they lie in /tmp (a checkout there)
    bound = (tmp_path, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve())
    ways = {p.parts[2] for p in bound if p.parts[1] == "tmp"}
    (listed,) = [ln.split(" allowed ")[1] for ln in stdout.splitlines() if " tmp allowed " in ln]
    assert set(ast.literal_eval(listed)) == ways, stdout
    assert not Path("/tmp/left").exists()
    # no disk (the kit's user owns them, whom the run is outside its namespace), no console
    (devices,) = [ln for ln in stdout.splitlines() if " devices " in ln]
    shown = set(devices.split(" allowed ")[1].strip("'").split())
    needed = {"fd", "stdin", "stdout", "stderr", "shm"}
    needed |= {
        n for n in ("null", "zero", "full", "random", "urandom", "tty") if Path("/dev", n).exists()
    }
    nvidia = {n for n in shown if n.startswith("nvidia")}
    assert shown - nvidia == needed, shown
    assert (tmp_path / "results" / "b2" / "work" / "products" / "p.products").read_text() == "x"


def test_a_contender_script_runs_by_the_interpreter_its_first_line_names(tmp_path):
    """`#!/usr/bin/env python3` found on the run's PATH: the venv's python, its prefix and the
    Python it was made from are in sight; nothing else of the kit's folder is."""
    script = tmp_path / "prog" / "look.py"
    script.parent.mkdir()
    script.write_text(f"#!/usr/bin/env python3\n{LOOK}")
    script.chmod(0o755)
    said, isolation = _look(tmp_path, "contender", (str(script),))
    assert said["sibling-log"] == "refused" and said["read-data"] == "allowed", said
    assert hidden(isolation)


def test_a_script_whose_python_is_a_version_managers_shim_runs(tmp_path, monkeypatch):
    """`#!/usr/bin/env python3` found as pyenv's shim (a script in ~/.pyenv/shims that execs
    ~/.pyenv/libexec/pyenv, which runs a Python under ~/.pyenv/versions): the manager's whole
    folder is in sight, so the contender runs."""
    manager = tmp_path / "pyenv"
    for name, body in (
        ("shims/python3", f'exec "{manager}/libexec/pyenv" exec python3 "$@"'),
        ("libexec/pyenv", f'shift 2; exec "{sys.executable}" "$@"'),
    ):
        (manager / name).parent.mkdir(parents=True, exist_ok=True)
        (manager / name).write_text(f"#!/bin/sh\n{body}\n")
        (manager / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{manager / 'shims'}{os.pathsep}{os.environ['PATH']}")
    script = tmp_path / "prog" / "look.py"
    script.parent.mkdir()
    script.write_text(f"#!/usr/bin/env python3\n{LOOK}")
    script.chmod(0o755)
    said, isolation = _look(tmp_path, "contender", (str(script),))
    assert said["sibling-log"] == "refused" and said["read-data"] == "allowed", said
    assert hidden(isolation)


def test_pytorchs_side_still_sees_the_machine_read_only(tmp_path):
    said, isolation = _look(tmp_path, "pytorch", (sys.executable, "-c", LOOK))
    assert said["sibling-log"] == "allowed" and said["write-system"] == "refused", said
    assert "the machine hidden" not in isolation


def test_a_folder_it_reads_that_holds_the_results_directory_is_covered_on_the_way(tmp_path):
    """The program's folder holds results/: results/ is covered, its own directory bound back;
    a results directory right in a folder it reads leaves what lies beside it in sight, said."""
    (tmp_path / "results" / "b2").mkdir(parents=True)
    seen = sight.sight("/usr/bin/true", {}, [str(tmp_path)], [str(tmp_path / "results" / "b2")])
    assert seen.covers == [str(tmp_path / "results")] and seen.beside is None
    seen = sight.sight("/usr/bin/true", {}, [str(tmp_path / "results")],
                       [str(tmp_path / "results" / "b2")])  # fmt: skip
    assert seen.covers == [str(tmp_path / "results" / "b2")]
    assert seen.beside and str(tmp_path / "results") in seen.beside


def test_what_micakit_contender_reads_adds_is_in_sight(tmp_path, monkeypatch):
    extra = tmp_path / "cuda"
    extra.mkdir()
    monkeypatch.setenv(sight.ENV, f"{extra}{os.pathsep}{tmp_path / 'absent'}")
    seen = sight.sight("/usr/bin/true", {"LD_LIBRARY_PATH": str(tmp_path)}, [], [])
    assert str(extra) in seen.reads and str(tmp_path) in seen.reads
    assert str(tmp_path / "absent") not in seen.reads


def test_an_older_record_reads_as_it_was_judged_and_a_readable_one_is_not_hidden():
    assert hidden("namespaces: a private user, mount and PID namespace; only the run's mounts")
    assert hidden("container: micakit-contender")
    assert not hidden("namespaces: a private …; the rest of the machine readable to it (EPERM)")
    assert not hidden("none: the machine refused namespaces (EPERM)")

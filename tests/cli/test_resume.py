"""A series stopped at any point resumes with every finished run kept, none run twice."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.errors import ExitCode
from tests.conftest import CONTENDER, FAKES, ROOT, contender_args, records

pytestmark = pytest.mark.slow
WRAPPER = FAKES / "contender_elsewhere.py"  # changes its folder, then runs the fake contender


def start(args: list, env: dict, log) -> subprocess.Popen:
    """The series as a user starts it; its stderr goes to `log` (a path)."""
    with open(log, "w") as err:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "run.py"), *map(str, args)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=ROOT,
            start_new_session=True,  # a signal for the series alone, as a terminal sends it
        )


def check_invariants(out, plan_len: int) -> None:
    recs = records(out)
    done = [r["run_id"] for r in recs if r["status"] in ("ok", "not profiled")]
    assert len(done) == len(set(done)), "a finished run ran twice"
    assert set(done) <= set(range(plan_len))


def fake_env(tmp_path) -> dict:
    env = dict(os.environ)
    env["MICAKIT_FAKE"] = json.dumps({"step_ms": {"*": 2.0}, "state": str(tmp_path / "state")})
    return env


MAX_KILLS = 12


def test_resume_after_kill_9_at_random_points(tmp_path, fast_protocol):
    env = fake_env(tmp_path)
    out = tmp_path / "r"
    args = contender_args(out, fast_protocol, "--precision", "float32", "--precision", "float16")
    rng = random.Random(20261129)
    log = tmp_path / "stderr.txt"
    proc = start(args, env, log)
    # the kit's own start-up on this machine, up to its manifest: each resume spends as long
    # again before its next run, so the kill points are drawn from that long and more
    began = time.monotonic()
    while not (out / "manifest.json").exists() and proc.poll() is None:
        time.sleep(0.02)
    startup = time.monotonic() - began
    kills = 0
    while True:
        try:
            proc.wait(timeout=rng.uniform(0.3, startup + 2.5))
            break
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the series, its reader and its program
            proc.wait()
            kills += 1
            plan = json.loads((out / "plan.json").read_text())
            check_invariants(out, len(plan["order"]))
            proc = start(["series", "--resume", out], env, log)
            recorded = {r["run_id"] for r in records(out)}
            if recorded >= set(range(len(plan["order"]))) or kills >= MAX_KILLS:
                # every run recorded (what is left is publishing, longer than any kill window),
                # or kills enough: this resume runs to its end
                proc.wait(timeout=900)
                break
    assert proc.returncode == 0, log.read_text()
    assert kills >= 2
    plan = json.loads((out / "plan.json").read_text())
    check_invariants(out, len(plan["order"]))
    assert sorted(r["run_id"] for r in records(out)) == list(range(len(plan["order"])))
    # interrupted attempts stay on disk beside the attempt that finished
    attempts = list((out / "runs").glob("*/attempt-*"))
    assert len(attempts) >= len(plan["order"])
    verify = subprocess.run([sys.executable, str(ROOT / "run.py"), "verify", str(out)], cwd=ROOT)
    assert verify.returncode == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_stop_cleanly_and_resume(tmp_path, fast_protocol, sig, sigint_default):
    env = fake_env(tmp_path)
    env["MICAKIT_FAKE"] = json.dumps({"step_ms": {"*": 20.0}, "state": str(tmp_path / "s")})
    out = tmp_path / "r"
    log = tmp_path / "stderr.txt"
    proc = start(contender_args(out, fast_protocol, "--precision", "float32"), env, log)
    deadline = time.monotonic() + 60
    while not records(out) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.8)  # into the second run
    os.killpg(proc.pid, sig)
    proc.wait(timeout=60)
    err = log.read_text()
    assert proc.returncode == 130, err
    assert "interrupted" in err and f"--resume {out}" in err
    n = len(records(out))
    assert n >= 1
    proc = start(["series", "--resume", out], env, log)
    proc.wait(timeout=300)
    assert proc.returncode == 0, log.read_text()
    recs = records(out)
    plan = json.loads((out / "plan.json").read_text())
    assert sorted(r["run_id"] for r in recs) == list(range(len(plan["order"])))


def test_a_resume_by_a_relative_path_hands_every_run_absolute_paths(
    tmp_path, fast_protocol, fake_env, cli, monkeypatch
):
    """A contender that changes its folder (a wrapper, a pyenv shim) still writes its products
    record (amendment 4.3) and its loader log (amendment 2) into the series, whether the series
    was resumed by a relative path or not."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("FAKE_CHDIR", str(elsewhere))
    # a confined contender sees the machine hidden: the folder it moves to is named as one it
    # reads (docs/internals.md)
    monkeypatch.setenv("MICAKIT_CONTENDER_READS", str(elsewhere))
    # the discarded run, which writes the products record and traces the loader, fails first
    fake_env(step_ms={"*": 2.0}, events={"mica#1": "crash"})
    args = contender_args(tmp_path / "r", fast_protocol, "--precision", "float32")
    args[args.index(CONTENDER)] = WRAPPER
    assert cli(*args).exit_code == ExitCode.SERIES_FAILED
    monkeypatch.chdir(tmp_path)
    res = cli("series", "--resume", "r")
    assert res.exit_code == 0, res.output
    assert list(elsewhere.iterdir()) == [], "a run wrote where its program had moved to"
    products = tmp_path / "r" / "work" / "products" / "shakespeare-char.float32.contender.mica"
    assert products.with_suffix(products.suffix + ".products").is_file()
    discarded = next(r for r in records(tmp_path / "r") if r["status"] == "ok")
    argv = json.loads((tmp_path / "r" / discarded["log_dir"] / "command.json").read_text())["argv"]
    paths = [a.split("=", 1)[1] for a in argv if a.startswith("products=")]
    paths += [argv[i + 1] for i, a in enumerate(argv) if a == "--data"]
    assert paths and all(os.path.isabs(p) for p in paths), argv
    # the loader's log holds both programs of the run's process: the wrapper, and the contender
    # it became (an exec keeps the pid and opens LD_DEBUG_OUTPUT again, from the new folder)
    logs = (tmp_path / "r" / discarded["log_dir"] / "ld_debug").glob("ld.*")
    text = "".join(p.read_text(errors="replace") for p in logs)
    assert len(re.findall(r"calling init: \S*/libc\.so", text)) >= 2, text[-2000:]


def _catches(pid: int, sig: int) -> bool:
    """Whether process `pid` has its own handler for `sig` yet (SigCgt in /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


SIGTERMS_AT_START_UP = 12
# One probe of the contender outlasts the latest SIGTERM (2.2 s after the handler), so that a
# resumed series, which probes once and then runs seven 2 ms runs, is still starting up when the
# signal comes, however quickly the machine runs the rest.
PROBE_S = 3.0


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_sigterm_at_random_moments_of_start_up(tmp_path, fast_protocol):
    """From the kit's first act to its first run (the data, the manifest, the versions' probes,
    the contender slow to answer `+mica info -mica`), SIGTERM ends with exit 130 and the line
    that says how to go on: `--resume`, or, before the manifest, the same command again."""
    env = fake_env(tmp_path)
    env["MICAKIT_FAKE"] = json.dumps(
        {"step_ms": {"*": 2.0}, "state": str(tmp_path / "s"), "info_s": PROBE_S}
    )
    out = tmp_path / "r"
    first = contender_args(out, fast_protocol, "--precision", "float32")
    command: list = first
    log = tmp_path / "stderr.txt"
    rng = random.Random(20261201)
    for k in range(SIGTERMS_AT_START_UP):
        proc = start(command, env, log)
        deadline = time.monotonic() + 60
        while not _catches(proc.pid, signal.SIGTERM):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.002)
        # half early (the data and the manifest), half late (the probes: PROBE_S each, two at
        # the start, one at a resume)
        time.sleep(rng.uniform(0, 0.7) if k % 2 else rng.uniform(0.7, 2.2))
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        err = log.read_text()
        assert proc.returncode == 130, err
        assert "Traceback" not in err, err
        if (out / "manifest.json").exists():
            assert f"resume with: micakit series --resume {out}" in err, err
            command = ["series", "--resume", out]
        else:
            assert "nothing was measured yet: the same command starts it again" in err, err
            command = first
    proc = start(command, env, log)
    proc.wait(timeout=300)
    assert proc.returncode == 0, log.read_text()
    plan = json.loads((out / "plan.json").read_text())
    check_invariants(out, len(plan["order"]))
    assert sorted(r["run_id"] for r in records(out)) == list(range(len(plan["order"])))


def test_a_stop_between_a_runs_end_and_its_record_ends_as_a_stop_and_resumes(
    tmp_path, fast_protocol, fake_env, cli, monkeypatch
):
    """A SIGTERM in the instant after a run's program ended and before its record was written
    (as benchmarks/kit/faults.py lands one now and then): the run's folder shows a finished run
    without a record. The stopped series ends as a stop (exit 130, not as an altered directory),
    and `--resume` runs that run again; verify is clean."""
    from kit.engine.series import Series

    fake_env(step_ms={"*": 2.0})
    judge = Series.judge
    calls = {"n": 0}

    def stopped_once(self, run, spec, outcome, log_dir):
        calls["n"] += 1
        if calls["n"] == 3:  # the third run's program has ended; its record is not written
            raise KeyboardInterrupt
        return judge(self, run, spec, outcome, log_dir)

    monkeypatch.setattr(Series, "judge", stopped_once)
    out = tmp_path / "r"
    res = cli(*contender_args(out, fast_protocol, "--precision", "float32"))
    assert res.exit_code == ExitCode.INTERRUPTED, res.output
    assert "resume with: micakit series --resume" in res.output
    assert len(records(out)) == 2
    monkeypatch.setattr(Series, "judge", judge)
    res = cli("series", "--resume", out)
    assert res.exit_code == 0, res.output
    assert cli("verify", out).exit_code == 0

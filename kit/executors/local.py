"""The local executor: every run a fresh process on this machine, read by the outside clock."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from kit.errors import UserError
from kit.executors.base import Executor, Mount, RunOutcome, RunSpec
from kit.measure import clock

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # A series killed with -9 must not leave a training program on the card: the next run,
    # or the resumed series, would find the card busy (§5: the card holds no other program).
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


class LocalExecutor(Executor):
    name = "local"

    def where(self, mount: Mount) -> str:
        return str(mount.host)

    def which(self, program: str, image: str | None, scratch: Path) -> bool:
        return shutil.which(program) is not None

    # §8 measures the images the sides run from; local runs run from none
    def footprint(self, ref: str, out_dir: Path) -> dict:
        raise UserError(
            f"the local executor runs no image, so {ref} has no footprint to measure here (§8)",
            "measure images with the Docker executor: micakit footprint, or --executor docker",
        )

    def footprint_ratio(self, mica: Mapping, pytorch: Mapping) -> dict:
        raise UserError(
            "the local executor runs no image, so there is no footprint ratio (§8)",
            "measure images with the Docker executor: micakit footprint, or --executor docker",
        )

    def run(self, spec: RunSpec, log_dir: Path) -> RunOutcome:
        log_dir.mkdir(parents=True, exist_ok=True)
        stdout_log, stderr_log = log_dir / "stdout.log", log_dir / "stderr.log"
        env = {**os.environ, **spec.env}
        libraries_dir = None
        if spec.trace_libraries:
            # amendment 2: the dynamic loader writes what it opens, one file per process
            libraries_dir = log_dir / "ld_debug"
            libraries_dir.mkdir(exist_ok=True)
            env["LD_DEBUG"] = "libs"
            env["LD_DEBUG_OUTPUT"] = str(libraries_dir / "ld")
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        reader = clock.start_reader(
            [(out_r, clock.STDOUT), (err_r, clock.STDERR)], stdout_log, stderr_log
        )
        os.close(out_r)
        os.close(err_r)
        start_ns = time.monotonic_ns()
        try:
            proc = subprocess.Popen(
                spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                cwd=spec.workdir,
                env=env,
                preexec_fn=_die_with_parent,
            )
        except OSError as e:
            proc, error = None, e
        finally:
            # the reader sees the streams close only once no copy of their write ends is left
            os.close(out_w)
            os.close(err_w)
        if proc is None:
            reader.wait()
            raise UserError(
                f"{spec.label}: cannot start {spec.argv[0]!r}: {error.strerror or error}",
                "check the program's path and that it is executable",
            )
        try:
            exit_code = proc.wait()
            reader.wait()
        except BaseException:
            # Ctrl-C or SIGTERM: end the program, keep what the reader already wrote
            _terminate(proc)
            reader.wait()
            raise
        return RunOutcome(
            exit_code=exit_code,
            start_ns=start_ns,
            end_ns=time.monotonic_ns(),
            stdout_log=stdout_log,
            stderr_log=stderr_log,
            libraries_dir=libraries_dir,
        )


def _terminate(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

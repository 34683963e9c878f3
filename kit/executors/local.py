"""The local executor: every run a fresh process on this machine, read by the outside clock.

Every run starts under a supervisor of its own (`kit.executors.supervisor`), in a session (and
process group) of its own, so a stop ends the whole tree: a contender that is a wrapper script,
or a program that starts helpers, even a double-forked daemon, leaves nothing behind on the card
(§5: the card holds no other program) nor holds the reader's pipes open. The supervisor reaps
and names what outlived the program, and, where the machine allows namespaces, keeps the run
from the results directory but for its own mounts (`RunSpec.confine`). The kit's own death ends
it too: the reader, which outlives the kit until the streams close, watches a pipe from the
kit and kills the run's group when the kit is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kit.errors import UserError
from kit.executors import sight, supervised, supervisor
from kit.executors.base import Executor, Limits, Mount, RunOutcome, RunSpec
from kit.measure import clock
from kit.results.planned import CONTENDER

_PR_SET_PDEATHSIG = 1
_STOPPING = (signal.SIGINT, signal.SIGTERM)
POLL_S = 1.0  # how often a running program's output is checked for a stall
# §5: a configuration's discarded run fills the compilers' caches for its timed runs. A series'
# runs keep them in a folder of their side's (as a Docker series in a volume of its image's,
# kit.executors.docker.containers.CACHE_ENV), never in /tmp or HOME, which a confined run sees
# only as its own: one side can neither read nor seed the other's compiled kernels.
CACHE_ENV = (
    ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
    ("TRITON_CACHE_DIR", "triton"),
    ("CUDA_CACHE_PATH", "nv"),  # the driver's cache of JIT-compiled kernels
)
# what a confined run sees as its own, empty at its start: nothing it leaves there reaches a run
# after it (compiled kernels' default caches, a file left for the other side)
PRIVATE = ("/tmp", "/dev/shm")


def _child_setup() -> None:  # pragma: no cover - runs in the child between fork and exec
    # the kit holds Ctrl-C and SIGTERM while it starts a run (held_signals); the program must
    # not inherit that mask, or it could never be stopped
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPPING)
    # A series killed with -9 must not leave a training program on the card: the next run,
    # or the resumed series, would find the card busy (§5: the card holds no other program).
    # This ends the direct child at once; the reader's watch ends the rest of its group.
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait while a run starts, and take effect the moment it has started.

    Raised inside subprocess's start, a KeyboardInterrupt can be swallowed ("Exception ignored
    in _releaseLock") and the run go on; held, it arrives once the kit knows the program's
    process group and can end it.
    """
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPPING)
    except (ValueError, OSError):  # pragma: no cover - not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, grace_s: float = 5.0, *, confine: bool = True) -> None:
        self.grace_s = grace_s  # SIGTERM first; SIGKILL after this long
        # False: no namespaces even where the machine allows them (MICAKIT_LOCAL_CONFINE=0)
        self.confine = confine and os.environ.get("MICAKIT_LOCAL_CONFINE", "1") != "0"
        self.caches: Path | None = None  # the series' sides' caches (use_series)

    def use_series(self, series_id: str) -> None:
        """The series' caches: a folder a side, under the kit's cache ($MICAKIT_CACHE or
        ~/.cache/micakit, as kit.sides.workspace.cache_dir), kept across resumes."""
        home = Path(os.environ.get("MICAKIT_CACHE") or Path.home() / ".cache" / "micakit")
        safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in series_id).strip("-.")
        self.caches = home / "runs" / (safe or "x")

    def finish(self) -> None:
        if self.caches is not None:
            shutil.rmtree(self.caches, ignore_errors=True)

    def _side_cache(self, spec: RunSpec) -> Path | None:
        """The run's side's cache folder: for a series' runs (confined ones) alone."""
        if not spec.confine or self.caches is None:
            return None
        folder = self.caches / (spec.side or "runs")
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def where(self, mount: Mount) -> str:
        # absolute whatever the series was given: a program that changes its folder (a wrapper
        # script, a pyenv shim) still finds its products record and data (amendment 4.3)
        return os.path.abspath(mount.host)

    def which(self, program: str, image: str | None, scratch: Path) -> bool:
        return shutil.which(program) is not None

    def run(self, spec: RunSpec, log_dir: Path) -> RunOutcome:
        log_dir = Path(os.path.abspath(log_dir))  # the loader's log lands here from any folder
        log_dir.mkdir(parents=True, exist_ok=True)
        stdout_log, stderr_log = log_dir / "stdout.log", log_dir / "stderr.log"
        cache = self._side_cache(spec)
        env, libraries_dir = _environment(spec, log_dir, cache)
        launch = _Launch()
        report_r, report_w = os.pipe()
        wrapped, beside = self._supervised(spec, env, libraries_dir, cache, report_w)
        try:
            with held_signals():
                proc, reader, start_ns = _start(wrapped, stdout_log, stderr_log, launch, report_w)
            os.close(report_w)
            report_w = -1
            exit_code, stopped = self._wait(proc, spec, stdout_log, stderr_log)
            # whatever the program left in its group (a wrapper's child, a helper) ends with it
            _kill_group(proc.pid, signal.SIGKILL)
            reader.wait()
            clock.check_written(reader, log_dir)  # a full disk stops the run, unrecorded
        except BaseException:
            # Ctrl-C or SIGTERM: end the whole tree, keep what the reader already wrote; a
            # second signal waits until that is done, so it cannot orphan the program
            with held_signals():
                if launch.proc is not None:
                    _terminate(launch.proc, self._stop_s())
                if launch.reader is not None:
                    launch.reader.wait()
            raise
        finally:
            if launch.watch_w >= 0:
                os.close(launch.watch_w)
            if report_w >= 0:
                os.close(report_w)
            report = supervised.report(report_r)
        if "exec_error" in report:
            _, why = report["exec_error"]
            raise UserError(
                f"{spec.label}: cannot start {spec.argv[0]!r}: {why}",
                "check the program's path and that it is executable",
            )
        if not supervised.own_report(report, proc.returncode):
            # unconfined, the program reaches its supervisor's report pipe
            # (/proc/PPID/fd/N) and can kill it: what it wrote is not the supervisor's word
            report = {
                "error": "the supervisor's report was not its own (the program could reach it)"
            }
        elif str(report.get("isolation")).startswith("namespaces") and not (
            self.confine and spec.confine and supervised.namespaces()
        ):
            # the kit gave no namespaces, or the machine allows none: the claim is forged
            report = {**report, "isolation": None,
                      "error": "the run's report claimed namespaces it was not given"}  # fmt: skip
        if isinstance(report.get("exit_code"), int):
            exit_code = report["exit_code"]
        return RunOutcome(
            exit_code=exit_code,
            start_ns=start_ns,
            end_ns=time.monotonic_ns(),
            stdout_log=stdout_log,
            stderr_log=stderr_log,
            libraries_dir=libraries_dir,
            stopped=stopped,
            isolation=supervised.isolation(spec, report, beside),
            outlived=supervised.outlived(report),
        )

    def _supervised(
        self,
        spec: RunSpec,
        env: Mapping[str, str],
        libraries_dir: Path | None,
        cache: Path | None,
        report_w: int,
    ) -> tuple[RunSpec, str | None]:
        """The run as its supervisor starts it: the program, its environment, folder and
        mounts in the request; the supervisor itself under the kit's own environment (no
        LD_DEBUG: amendment 2's trace is the program's alone). A confined run sees the machine
        read-only but for its writable mounts, and /tmp and /dev/shm as its own; a confined
        contender sees no more of it than the system's folders and what it reads
        (kit.executors.sight). With it, what stays readable beside the results directory."""
        hosts = [(os.path.realpath(m.host), m.read_only) for m in spec.mounts]
        hosts += [(os.path.realpath(w), False) for w in (libraries_dir, cache) if w is not None]
        mounts = [{"host": host, "read_only": read_only} for host, read_only in hosts]
        confined = bool(spec.confine) and self.confine
        roots = [os.path.realpath(p) for p in spec.confine] if confined else []
        request = {
            "argv": list(spec.argv),
            "env": dict(env),
            "cwd": os.path.abspath(spec.workdir) if spec.workdir else os.getcwd(),
            "confine": roots,
            "private": list(PRIVATE) if confined else [],
            "read_only": confined,
            "mounts": mounts,
            "grace_s": self.grace_s,
            "report_fd": report_w,
        }
        beside = None
        if confined and spec.side == CONTENDER:
            seen = sight.sight(spec.argv[0], env, [host for host, _ in hosts], roots)
            request.update(hide=True, reads=seen.reads, covers=seen.covers)
            beside = seen.beside
        own = {k: v for k, v in os.environ.items() if not k.startswith("LD_DEBUG")}
        wrapped = dataclasses.replace(
            spec,
            argv=supervisor.command(json.dumps(request)),
            env=own,
            workdir=None,
        )
        return wrapped, beside

    def _stop_s(self) -> float:
        """How long a stopped run's supervisor gets to stop what its program left: its own
        grace for the program, the linger, its grace for the rest, and a margin."""
        return 2 * self.grace_s + supervisor.LINGER_S + 2.0

    def _wait(
        self, proc: subprocess.Popen, spec: RunSpec, stdout_log: Path, stderr_log: Path
    ) -> tuple[int, str | None]:
        """Wait for the program; stop it past the stall or whole-run limit, and say why."""
        if not spec.stall_s and not spec.limit_s:
            return proc.wait(), None
        limits = Limits(spec, (stdout_log, stderr_log))
        with _exit_waiter(proc) as wait_s:
            while True:
                if wait_s(POLL_S):
                    return proc.returncode, None
                why = limits.check()
                if why:
                    _terminate(proc, self._stop_s())
                    return proc.returncode, why


def _environment(
    spec: RunSpec, log_dir: Path, cache: Path | None
) -> tuple[dict[str, str], Path | None]:
    """The program's environment, and the folder its loader writes to (or None)."""
    caches = {name: str(cache / sub) for name, sub in CACHE_ENV} if cache is not None else {}
    env = {**os.environ, **caches, **spec.env}
    libraries_dir = None
    if spec.trace_libraries:
        # amendment 2: the dynamic loader writes what it opens, one file per process
        libraries_dir = log_dir / "ld_debug"
        libraries_dir.mkdir(exist_ok=True)
        env["LD_DEBUG"] = "libs"
        env["LD_DEBUG_OUTPUT"] = str(libraries_dir / "ld")
    return env, libraries_dir


@dataclass
class _Launch:
    """What a run has started so far, filled in as it starts: what a stop must end, and the
    write end of the reader's watch pipe (-1 once closed), which the run closes last."""

    proc: subprocess.Popen | None = None
    reader: subprocess.Popen | None = None
    watch_w: int = -1


def _start(
    spec: RunSpec, stdout_log: Path, stderr_log: Path, launch: _Launch, report_w: int
) -> tuple[subprocess.Popen, subprocess.Popen, int]:
    """Start the reader, then the program on its pipes: (program, reader, start in ns).

    Called with signals held; `launch` holds what is started at each moment, for the caller
    to end should a later step fail.
    """
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    watch_r, launch.watch_w = os.pipe()
    try:
        reader = launch.reader = clock.start_reader(
            [(out_r, clock.STDOUT), (err_r, clock.STDERR)],
            stdout_log,
            stderr_log,
            watch_fd=watch_r,
            stderr_cap=spec.stderr_cap_bytes,
        )
    finally:
        os.close(out_r)
        os.close(err_r)
        os.close(watch_r)
    start_ns = time.monotonic_ns()
    try:
        launch.proc = subprocess.Popen(
            spec.argv,
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            cwd=os.path.abspath(spec.workdir) if spec.workdir else None,
            env=spec.env,
            start_new_session=True,  # its own session and process group
            preexec_fn=_child_setup,
            pass_fds=(report_w,),
        )
    except OSError as e:
        error = e
    finally:
        # the reader sees the streams close only once no copy of their write ends is left
        os.close(out_w)
        os.close(err_w)
    if launch.proc is None:
        os.close(launch.watch_w)
        launch.watch_w = -1
        reader.wait()
        raise UserError(
            f"{spec.label}: cannot start {spec.argv[0]!r}: {error.strerror or error}",
            "check the program's path and that it is executable",
        )
    # the reader's watch: should the kit die, it ends this group
    os.write(launch.watch_w, b"%d\n" % launch.proc.pid)
    return launch.proc, reader, start_ns


@contextlib.contextmanager
def _exit_waiter(proc: subprocess.Popen[bytes]) -> Iterator[Callable[[float], bool]]:
    """A function that waits up to N seconds for the program's exit; True once it exited.

    A pidfd wakes the kit only when the program ends (no polling of waitpid); elsewhere
    Popen.wait with a timeout does the same, less frugally.
    """
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None

    def wait_s(seconds: float) -> bool:
        if pidfd is not None:
            ready, _, _ = select.select([pidfd], [], [], seconds)
            if not ready:
                return False
        try:
            proc.wait(None if pidfd is not None else seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    try:
        yield wait_s
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _terminate(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM to the run's whole process group, SIGKILL to what is left after the grace."""
    if proc.poll() is None:
        _kill_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
    # a wrapper that exited on SIGTERM may leave its child; nothing of the run outlives it
    _kill_group(proc.pid, signal.SIGKILL)

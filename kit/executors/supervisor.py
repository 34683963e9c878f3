"""A local run's supervisor: the process the local executor starts, which starts the program.

Run as a script by the kit's own interpreter (`python supervisor.py REQUEST`), importing only the
standard library. It does two things the program cannot undo:

- **Its processes stay the run's.** The supervisor is the program's reaper (a child subreaper,
  or the first process of a PID namespace of its own), so a double-forked `setsid` daemon is
  still its descendant. Once the program exits, what it left gets LINGER_S to end, then
  SIGTERM, then SIGKILL after the kit's grace; each is named in the report. It gives its stdout
  and stderr away at the start: a run is over once its processes are, whatever held the streams.
- **The run writes nothing that outlasts it but its mounts** (`confine`), where the machine
  allows a user, mount and PID namespace: the machine read-only, /dev/shm empty and /tmp an
  overlay of its own, the results directory covered by an empty tmpfs and only the run's own
  mounts bound back (read-only where it only reads); /proc is the namespace's own, so no other
  process's root leads around the covers. Where the machine refuses, the report says why.

The report (JSON, on the fd the request names) says which isolation held, the program's exit
status, and the processes that outlived it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time

try:  # as a script (the local executor's way): this folder is first on sys.path
    import confine  # type: ignore[import-not-found,no-redef,unused-ignore]
except ImportError:  # imported by the kit
    from kit.executors import confine


def command(*args: str) -> tuple[str, ...]:
    """How the kit starts a supervisor: its own interpreter without `site` (-S), which would
    load every .pth file of the environment (an editable install's import hook among them) for
    a script that needs only the standard library and `confine` beside it: 25 ms of CPU a run,
    not 32 (benchmarks/kit/startup.py)."""
    return (sys.executable, "-S", os.path.abspath(__file__), *args)


LINGER_S = 2.0  # what a program's descendants get to end by themselves once it has exited
_NAMED = 50  # processes named in the report at most (its pipe must not fill)

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# what wakes the supervisor while its program runs: a stop, or a child's end (SIGCHLD, held
# pending while blocked though its default is to be ignored); the timeout is only a safety net
_WAKES = (*_STOPS, signal.SIGCHLD)
_SAFETY_S = 5.0


def _prctl(option: int, value: int) -> None:
    confine.check(confine.libc.prctl(option, value, 0, 0, 0), f"prctl {option}")


# -- the processes ----------------------------------------------------------------------------


def _descendants(me: int) -> dict[int, str]:
    """Every process under `me`, by pid, with its name (/proc/PID/comm)."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        close = stat.rfind(b")")
        pid = int(entry)
        names[pid] = stat[stat.find(b"(") + 1 : close].decode(errors="replace")
        parents[pid] = int(stat[close + 2 :].split()[1])
    found: dict[int, str] = {}
    frontier = [me]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found and pid != me:
                found[pid] = names[pid]
                frontier.append(pid)
    return found


def _reap() -> None:
    """Collect every child that has ended (orphans reparented here end as zombies)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _live(me: int) -> dict[int, str]:
    _reap()
    # a zombie not yet reaped is no process left running
    return {p: n for p, n in _descendants(me).items() if not _zombie(p)}


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] in (b"Z", b"X")


def _stop_all(me: int, grace_s: float) -> tuple[dict[int, str], int]:
    """What outlived the program, stopped: SIGTERM, then SIGKILL after `grace_s`; the processes
    by pid and name, and how many needed SIGKILL."""
    left = _live(me)
    deadline = time.monotonic() + LINGER_S
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _live(me)
    outlived = dict(left)
    for pid in left:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _live(me)
        outlived.update(left)  # a child forked while it was being stopped is one more
        for pid in left:
            _signal(pid, signal.SIGTERM)
    killed = 0
    while left:
        killed += len(left)
        for pid in left:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.02)
        left = _live(me)
        outlived.update(left)
    _reap()
    return outlived, killed


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _start_program(req: dict) -> tuple[int, int]:
    """Fork and exec the program; (its pid, the read end of a pipe that says why exec failed)."""
    err_r, err_w = os.pipe()
    os.set_inheritable(err_w, False)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the program's process, until exec
        try:
            os.close(err_r)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _WAKES)
            for sig in _STOPS:
                signal.signal(sig, signal.SIG_DFL)
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            # a hidden machine may lack the kit's folder: then /tmp, the run's own
            os.chdir(next(d for d in (req["cwd"], "/tmp", "/") if os.path.isdir(d)))
            os.execvpe(req["argv"][0], req["argv"], req["env"])
        except OSError as e:
            os.write(err_w, json.dumps([e.errno or 0, e.strerror or str(e)]).encode())
        os._exit(127)
    os.close(err_w)
    return pid, err_r


def _wait_program(pid: int) -> int:
    """Wait for the program, reaping orphans as they end; a stop signal is passed on to it.

    It wakes only when a child ends or a stop comes (no timer while a timed run runs: a wake
    at a random moment could land between the program's reading of its clock and its line),
    and each look is two system calls (no walk of /proc).
    """
    while True:
        got = signal.sigtimedwait(_WAKES, _SAFETY_S)
        if got is not None and got.si_signo != signal.SIGCHLD:
            _signal(pid, got.si_signo)
        while True:  # every child that has ended: the program, or an orphan reparented here
            try:
                ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # pragma: no cover - the program is a child until reaped
                return -signal.SIGKILL
            if ended is None:
                break
            done, status = os.waitpid(ended.si_pid, 0)
            if done == pid:
                return os.waitstatus_to_exitcode(status)


def supervise(req: dict, isolation: str) -> dict:
    """Start the program, wait for it, stop what it left; the report."""
    me = os.getpid()
    pid, err_r = _start_program(req)
    # the run is over when its processes are: this one holds none of its streams
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    exit_code = _wait_program(pid)
    why = os.read(err_r, 4096)
    os.close(err_r)
    outlived, killed = _stop_all(me, float(req.get("grace_s", 5.0)))
    report = {
        "isolation": isolation,
        "exit_code": exit_code,
        "outlived": [f"{name} (pid {p})" for p, name in sorted(outlived.items())][:_NAMED],
        "outlived_count": len(outlived),
        "killed": killed,
    }
    if why:
        report["exec_error"] = json.loads(why)
    return report


def _relay(child: int, report_r: int) -> dict:
    """Outside the PID namespace: wait for its first process, passing stop signals on."""
    while True:
        got = signal.sigtimedwait(_WAKES, _SAFETY_S)
        if got is not None and got.si_signo != signal.SIGCHLD:
            _signal(child, got.si_signo)  # the first process handles it: no default for it
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
    data = b""
    while True:
        ready, _, _ = select.select([report_r], [], [], 0)
        chunk = os.read(report_r, 65536) if ready else b""
        if not chunk:
            break
        data += chunk
    if not data:
        return {"error": f"the namespace's first process ended with status {status}"}
    return dict(json.loads(data))


def main(argv: list[str]) -> int:
    if argv[1] == "--probe":  # whether this machine gives a run namespaces: exit 0 if so
        try:
            confine.enter_namespaces()
        except OSError:
            return 1
        return 0
    req = json.loads(argv[1])
    report_fd = int(req["report_fd"])
    os.set_inheritable(report_fd, False)
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAKES)
    isolation = "none"
    if req.get("confine"):
        try:
            confine.enter_namespaces()
            isolation = "namespaces"
        except OSError as e:
            isolation = f"none ({e.strerror or e})"
    if isolation == "namespaces":
        report_r, report_w = os.pipe()
        child = os.fork()
        if child == 0:  # the PID namespace's first process
            os.close(report_r)
            try:
                _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
                report = supervise(req, confine.confine(req))
            except BaseException as e:  # noqa: BLE001 - said in the report, never lost
                report = {"error": f"confining the run failed: {e}"}
            os.write(report_w, json.dumps(report).encode())
            os._exit(0)
        os.close(report_w)
        null = os.open(os.devnull, os.O_RDWR)  # hold none of the run's streams
        os.dup2(null, 1)
        os.dup2(null, 2)
        report = _relay(child, report_r)
    else:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        report = supervise(req, isolation)
    os.write(report_fd, json.dumps(report).encode())
    os.close(report_fd)
    code = report.get("exit_code")
    if not isinstance(code, int):
        return 125
    if code < 0:  # killed by a signal: end the same way, so the kit reads the same status
        if -code != signal.SIGKILL:  # SIGKILL's action is the default and cannot be set
            signal.signal(-code, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [-code])
        os.kill(os.getpid(), -code)
    return code & 0xFF


if __name__ == "__main__":
    sys.exit(main(sys.argv))

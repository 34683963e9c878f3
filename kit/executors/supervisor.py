"""A local run's supervisor: the process the local executor starts, which starts the program.

Run as a script by the kit's own interpreter (`python supervisor.py REQUEST`), importing only the
standard library. It does two things the program cannot undo:

- **Its processes stay the run's.** The supervisor is the program's reaper: a child subreaper
  (prctl PR_SET_CHILD_SUBREAPER), or the first process of a PID namespace of its own, so a
  double-forked `setsid` daemon is still its descendant. Once the program exits, what it left
  gets a short grace (LINGER_S) to end by itself, then SIGTERM, then SIGKILL after the grace
  the kit gives; each is named in the report. The supervisor gives its stdout and stderr away
  at the start, so a run is over once its processes are, whatever held the streams.
- **The run sees only what it needs of the results directory** (`confine`), where the machine
  allows a user, mount and PID namespace: each confined folder is covered by an empty tmpfs,
  and only the run's own mounts are bound back (read-only where the run only reads); /proc is
  the namespace's own, so no other process's root or working folder leads around the covers.
  Where the machine refuses, the run starts without them, and the report says why.

The report (JSON, on the fd the request names) says which isolation held, the program's exit
status, and the processes that outlived it.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import sys
import time

LINGER_S = 2.0  # what a program's descendants get to end by themselves once it has exited
_NAMED = 50  # processes named in the report at most (its pipe must not fill)

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
# statvfs's flags -> mount's: a read-only remount in a user namespace keeps the locked ones
_KEPT = {2: _MS_NOSUID, 4: _MS_NODEV, 8: _MS_NOEXEC, 1024: _MS_NOATIME, 2048: _MS_NODIRATIME,
         4096: _MS_RELATIME}  # fmt: skip
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    enc = [None if s is None else s.encode() for s in (source, target, fstype)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), None), f"mount {target}")


def _prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, value, 0, 0, 0), f"prctl {option}")


# -- the namespaces ---------------------------------------------------------------------------


def _enter_namespaces() -> None:
    """A user, mount and PID namespace of its own; the next child is the PID namespace's first.

    The run's uid inside is the caller's, or 1 where the caller is root, so the program holds no
    capability in the namespace once it execs: it cannot undo the covers.
    """
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID), "unshare")
    inner_uid, inner_gid = uid or 1, gid or 1
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{inner_uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{inner_gid} {gid} 1")


def _confine(roots: list[str], mounts: list[dict]) -> None:
    """Inside the namespaces: /proc the namespace's own; each root covered, the run's mounts
    under it bound back (read-only where marked)."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing here reaches the host's mounts
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    for root in roots:
        under = [m for m in mounts if _inside(m["host"], root) and os.path.exists(m["host"])]
        # held open before the cover hides them, bound back through /proc/self/fd
        held = [(m, os.open(m["host"], os.O_PATH)) for m in under]
        _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV)
        for m, fd in sorted(held, key=lambda x: x[0]["host"].count("/")):
            target = m["host"]
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(target, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                open(target, "a").close()
            _mount(f"/proc/self/fd/{fd}", target, None, _MS_BIND | _MS_REC)
            os.close(fd)
            if m["read_only"]:
                kept = os.statvfs(target).f_flag
                flags = sum(v for k, v in _KEPT.items() if kept & k)
                _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags)
        if not any(m["host"] == root for m in under):
            _mount(None, root, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


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
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
            for sig in _STOPS:
                signal.signal(sig, signal.SIG_DFL)
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            os.chdir(req["cwd"] if os.path.isdir(req["cwd"]) else "/")
            os.execvpe(req["argv"][0], req["argv"], req["env"])
        except OSError as e:
            os.write(err_w, json.dumps([e.errno or 0, e.strerror or str(e)]).encode())
        os._exit(127)
    os.close(err_w)
    return pid, err_r


def _wait_program(pid: int) -> int:
    """Wait for the program, reaping orphans as they end; a stop signal is passed on to it.

    Each look is two system calls (no walk of /proc), five times a second, so a timed run
    shares its machine with next to nothing.
    """
    while True:
        got = signal.sigtimedwait(_STOPS, 0.2)
        if got is not None:
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
        got = signal.sigtimedwait(_STOPS, 0.2)
        if got is not None:
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
    report: dict = json.loads(data)
    return report


def main(argv: list[str]) -> int:
    if argv[1] == "--probe":  # whether this machine gives a run namespaces: exit 0 if so
        try:
            _enter_namespaces()
        except OSError:
            return 1
        return 0
    req = json.loads(argv[1])
    report_fd = int(req["report_fd"])
    os.set_inheritable(report_fd, False)
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    isolation = "none"
    if req.get("confine"):
        try:
            _enter_namespaces()
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
                _confine(req["confine"], req["mounts"])
                report = supervise(req, isolation)
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

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

import ctypes
import json
import os
import select
import signal
import sys
import time

LINGER_S = 2.0  # what a program's descendants get to end by themselves once it has exited
_NAMED = 50  # processes named in the report at most (its pipe must not fill)

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
# statvfs's flags -> mount's: a read-only remount in a user namespace keeps the locked ones
_KEPT = {2: _MS_NOSUID, 4: _MS_NODEV, 8: _MS_NOEXEC, 1024: _MS_NOATIME, 2048: _MS_NODIRATIME,
         4096: _MS_RELATIME}  # fmt: skip
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# mount_setattr(2): the syscall's number (x86_64 and the generic table alike), its flags
_SYS_MOUNT_SETATTR, _AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 0x1

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result:
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
    for name, text in (("setgroups", "deny"), ("uid_map", f"{inner_uid} {uid} 1"),
                       ("gid_map", f"{inner_gid} {gid} 1")):  # fmt: skip
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _setattr(path: str, *, set_: int = 0, clear: int = 0) -> None:
    """mount_setattr(2) (Linux 5.12): the flags of a mount and of every mount below it."""
    attr = (ctypes.c_uint64 * 4)(set_, clear, 0, 0)  # struct mount_attr
    done = _libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path.encode(), _AT_RECURSIVE, attr, 32)
    _check(done, f"mount_setattr {path}")


def _confine(req: dict) -> str:
    """Inside the namespaces: /proc its own, the machine read-only, /tmp and /dev/shm private
    (_private), each root covered by an empty tmpfs, the run's mounts bound back. What held."""
    roots, mounts = req["confine"], req["mounts"]
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing here reaches the host's mounts
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    # held open before a cover hides them, bound back through /proc/self/fd
    held = [(m, os.open(m["host"], os.O_PATH)) for m in mounts if os.path.exists(m["host"])]
    said = "namespaces"
    read_only = False
    if req.get("read_only"):
        try:
            _setattr("/", set_=_MOUNT_ATTR_RDONLY)
            read_only = True
        except OSError as e:
            said = f"namespaces; the machine stays writable ({e.strerror or e})"
    if req.get("private"):
        said += _private(read_only)
    # outside the roots first (one may hold a root: a program's folder that holds the results
    # directory), then the roots covered, then what lies under a root bound back onto its cover
    ordered = sorted(held, key=lambda x: x[0]["host"].count("/"))
    under = [(m, fd) for m, fd in ordered if any(_inside(m["host"], r) for r in roots)]
    for m, fd in ordered:
        if read_only and (m, fd) not in under:
            _bind_back(m, fd, read_only)
    for root in roots:
        os.makedirs(root, exist_ok=True)
        _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV)
    for m, fd in under:
        _bind_back(m, fd, read_only)
    for _, fd in held:
        os.close(fd)
    for root in roots:
        if not any(m["host"] == root for m, _ in held):
            _mount(None, root, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    return said


def _private(read_only: bool) -> str:
    """/dev/shm empty and the run's own; /tmp an overlay whose upper layer lies in it. Where the
    kernel refuses the overlay, /tmp stays the machine's, writable: said after a semicolon."""
    _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV)
    layer = "/dev/shm/.tmp-layer"
    os.makedirs(f"{layer}/upper", mode=0o1777)
    os.makedirs(f"{layer}/work")
    # the run reads what /tmp holds; what it writes there lands in its own layer, gone with it
    options = f"lowerdir=/tmp,upperdir={layer}/upper,workdir={layer}/work".encode()
    if not _libc.mount(b"overlay", b"/tmp", b"overlay", ctypes.c_ulong(_MS_NOSUID), options):
        return ""
    why = os.strerror(ctypes.get_errno())
    if read_only:  # /tmp as before: the machine's, and writable
        _mount("/tmp", "/tmp", None, _MS_BIND | _MS_REC)
        _setattr("/tmp", clear=_MOUNT_ATTR_RDONLY)
    return f"; /tmp the machine's (no overlay: {why})"


def _bind_back(m: dict, fd: int, read_only: bool) -> None:
    """One of the run's mounts bound back at its own path, read-only or writable as marked."""
    target = m["host"]
    if os.path.isdir(f"/proc/self/fd/{fd}"):
        os.makedirs(target, exist_ok=True)
    elif not os.path.exists(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    _mount(f"/proc/self/fd/{fd}", target, None, _MS_BIND | _MS_REC)
    if m["read_only"]:
        kept = os.statvfs(target).f_flag
        flags = sum(v for k, v in _KEPT.items() if kept & k)
        _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags)
    elif read_only:  # the bind took the read-only flag of the mount it came from
        _setattr(target, clear=_MOUNT_ATTR_RDONLY)


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
    return dict(json.loads(data))


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
                report = supervise(req, _confine(req))
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

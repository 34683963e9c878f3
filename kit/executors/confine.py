"""A confined run's mounts, made inside its own user, mount and PID namespace by its supervisor
(kit.executors.supervisor), which runs this module as a sibling script: the standard library only.

Two ways, as the request says:

- **The machine read-only** (PyTorch's side): the whole machine read-only, /dev/shm empty and /tmp
  an overlay of the run's own, each folder of `confine` (the results directory) covered by an
  empty tmpfs and the run's mounts bound back (read-only where it only reads).
- **The machine hidden** (`hide`: the contender, the side the kit does not trust): a new root
  that holds the system's folders (SYSTEM: programs, libraries, configuration), the folders the
  run reads (`reads`: its interpreter's, its libraries', what MICAKIT_CONTENDER_READS names),
  its mounts, the devices a program needs (DEVICES and the NVIDIA driver's, no disk), /sys
  (read-only) and a /proc of its own, with /tmp and /dev/shm empty. All
  of it is read-only but its writable mounts; where a folder it reads holds the results
  directory, the folder that leads there is covered (`covers`, kit.executors.sight). Nothing
  else of the machine is there: not HOME, not /tmp's contents, not another results directory.
  Where the kernel refuses a step before the root is changed, the run goes on the first way,
  and the report says why.

The root is changed the way container runtimes change it (runc's `pivot_root(".", ".")`, then
the old root detached): no process of the run can reach the old root again, for /proc is the
namespace's own and no file descriptor to the old root is left open.
"""

from __future__ import annotations

import ctypes
import os
import platform

# what a hidden machine still shows a run: the system's programs, libraries and configuration
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# where the hidden root is built: a tmpfs over the machine's /tmp, in the run's namespace only
STAGE = "/tmp"
NOT_HIDDEN = "readable to it"  # in a record's words wherever a contender could read more
READABLE = f"the rest of the machine {NOT_HIDDEN}"  # the report's, where it was not hidden
# the devices of a hidden machine (bubblewrap's --dev gives the same), the NVIDIA driver's
# (/dev/nvidia*, nvidia-caps) added where the machine has them; no disk, no console
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
DEV_LINKS = {"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0",
             "/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2"}  # fmt: skip

_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
_MNT_DETACH = 2
# statvfs's flags -> mount's: a read-only remount in a user namespace keeps the locked ones
_KEPT = {2: _MS_NOSUID, 4: _MS_NODEV, 8: _MS_NOEXEC, 1024: _MS_NOATIME, 2048: _MS_NODIRATIME,
         4096: _MS_RELATIME}  # fmt: skip
# mount_setattr(2): the syscall's number (x86_64 and the generic table alike), its flags
_SYS_MOUNT_SETATTR, _AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 0x1
# pivot_root(2) has no wrapper in glibc: its number in each table (arch/*/syscall*.tbl)
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}

libc = ctypes.CDLL(None, use_errno=True)


def check(result: int, what: str) -> None:
    if result:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    enc = [None if s is None else s.encode() for s in (source, target, fstype)]
    check(libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), None), f"mount {target}")


def enter_namespaces() -> None:
    """A user, mount and PID namespace of its own; the next child is the PID namespace's first.

    The run's uid inside is the caller's, or 1 where the caller is root, so the program holds no
    capability in the namespace once it execs: it cannot undo the covers.
    """
    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID), "unshare")
    inner_uid, inner_gid = uid or 1, gid or 1
    for name, text in (("setgroups", "deny"), ("uid_map", f"{inner_uid} {uid} 1"),
                       ("gid_map", f"{inner_gid} {gid} 1")):  # fmt: skip
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _setattr(path: str, *, set_: int = 0, clear: int = 0) -> None:
    """mount_setattr(2) (Linux 5.12): the flags of a mount and of every mount below it."""
    attr = (ctypes.c_uint64 * 4)(set_, clear, 0, 0)  # struct mount_attr
    done = libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, path.encode(), _AT_RECURSIVE, attr, 32)
    check(done, f"mount_setattr {path}")


def confine(req: dict) -> str:
    """Inside the namespaces: /proc its own, then the machine hidden (`hide`) or read-only, the
    run's mounts bound back. What held, in the report's words."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing here reaches the host's mounts
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    # held open before a cover hides them, bound back through /proc/self/fd
    held = [(m, os.open(m["host"], os.O_PATH)) for m in req["mounts"] if os.path.exists(m["host"])]
    refused = ""
    try:
        if req.get("hide"):
            try:
                return _hidden(req, held)
            except OSError as e:
                refused = f"; {READABLE} (the kernel refused to hide it: {e.strerror or e})"
        return _read_only(req, held) + refused
    finally:
        for _, fd in held:
            os.close(fd)


def _hidden(req: dict, held: list[tuple[dict, int]]) -> str:
    """The machine hidden: a new root of what the run may see, read-only but its writable
    mounts. An OSError before the root changes leaves the machine as it was."""
    pivot = _SYS_PIVOT_ROOT.get(platform.machine())
    if pivot is None:
        raise OSError(0, f"no pivot_root known on {platform.machine()}")
    seen = [p for p in (*SYSTEM, *req.get("reads", ())) if os.path.lexists(p)]
    links = [p for p in seen if os.path.islink(p) and p in SYSTEM]  # /bin -> usr/bin
    reads = [({"host": p, "read_only": True}, os.open(p, os.O_PATH)) for p in seen
             if p not in links]  # fmt: skip
    system = [(p, os.open(p, os.O_PATH)) for p in _devices()]
    try:
        _mount("tmpfs", STAGE, "tmpfs", _MS_NOSUID | _MS_NODEV)
        try:
            for link in links:
                os.symlink(os.readlink(link), STAGE + link)
            _empty(STAGE + "/tmp")  # first: a mount that lies in the machine's /tmp lands in it
            # the shallowest first: a mount inside a folder the run reads lands on it
            for m, fd in sorted([*reads, *held], key=lambda x: x[0]["host"].count("/")):
                _bind(fd, STAGE + m["host"], m["read_only"])
            for cover in req.get("covers", ()):  # on the way to the results directory
                _empty(STAGE + cover)
                for m, fd in sorted(held, key=lambda x: x[0]["host"].count("/")):
                    if inside(m["host"], cover):
                        _bind(fd, STAGE + m["host"], m["read_only"])
                _mount(None, STAGE + cover, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
            # a /dev of the devices a program needs alone: the machine's disks are the kit's
            # user's, whom the run is outside its namespace, so none of them is there
            _empty(STAGE + "/dev")
            for link, to in DEV_LINKS.items():
                os.symlink(to, STAGE + link)
            for path, fd in system:  # /sys read-only (with what is mounted below it: a user
                # namespace may not bind a folder without the mounts locked below it)
                _bind(fd, STAGE + path, path == "/sys")
            _empty(STAGE + "/dev/shm")
            os.makedirs(STAGE + "/proc")
            # while the machine's /proc is still in view (a user namespace mounts a new one only
            # where one is fully visible)
            _mount("proc", STAGE + "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        except OSError:
            libc.umount2(STAGE.encode(), _MNT_DETACH)
            raise
    finally:
        for _, fd in (*reads, *system):
            os.close(fd)
    os.chdir(STAGE)
    check(libc.syscall(pivot, b".", b"."), "pivot_root")
    check(libc.umount2(b".", _MNT_DETACH), "umount the machine's root")
    os.chdir("/")
    _mount(None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    return "namespaces; hidden"


def _empty(target: str) -> None:
    """An empty tmpfs of the run's own at `target`, gone with it."""
    os.makedirs(target, exist_ok=True)
    _mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV)


def _devices() -> list[str]:
    """The device nodes a hidden run gets (DEVICES, the NVIDIA driver's among them), and /sys."""
    nvidia = [f"/dev/{n}" for n in os.listdir("/dev") if n.startswith("nvidia")]
    return [p for p in (*DEVICES, *sorted(nvidia), "/sys") if os.path.exists(p)]


def _bind(fd: int, target: str, read_only: bool) -> None:
    """What `fd` holds bound at `target` with all below it, read-only (recursively) if asked."""
    _bind_at(fd, target)
    if read_only:
        _setattr(target, set_=_MOUNT_ATTR_RDONLY)


def _read_only(req: dict, held: list[tuple[dict, int]]) -> str:
    """The machine read-only, /tmp and /dev/shm private (_private), each root covered by an
    empty tmpfs, the run's mounts bound back. What held."""
    roots = req["confine"]
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
    under = [(m, fd) for m, fd in ordered if any(inside(m["host"], r) for r in roots)]
    for m, fd in ordered:
        if read_only and (m, fd) not in under:
            _bind_back(m, fd, read_only)
    for root in roots:
        os.makedirs(root, exist_ok=True)
        _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV)
    for m, fd in under:
        _bind_back(m, fd, read_only)
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
    if not libc.mount(b"overlay", b"/tmp", b"overlay", ctypes.c_ulong(_MS_NOSUID), options):
        return ""
    why = os.strerror(ctypes.get_errno())
    if read_only:  # /tmp as before: the machine's, and writable
        _mount("/tmp", "/tmp", None, _MS_BIND | _MS_REC)
        _setattr("/tmp", clear=_MOUNT_ATTR_RDONLY)
    return f"; /tmp the machine's (no overlay: {why})"


def _bind_back(m: dict, fd: int, read_only: bool) -> None:
    """One of the run's mounts bound back at its own path, read-only or writable as marked."""
    target = m["host"]
    _bind_at(fd, target)
    if m["read_only"]:
        kept = os.statvfs(target).f_flag
        flags = sum(v for k, v in _KEPT.items() if kept & k)
        _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags)
    elif read_only:  # the bind took the read-only flag of the mount it came from
        _setattr(target, clear=_MOUNT_ATTR_RDONLY)


def _bind_at(fd: int, target: str) -> None:
    """What `fd` holds (a folder or a file) bound at `target`, made where it is missing."""
    if os.path.isdir(f"/proc/self/fd/{fd}"):
        os.makedirs(target, exist_ok=True)
    elif not os.path.exists(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    _mount(f"/proc/self/fd/{fd}", target, None, _MS_BIND | _MS_REC)


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")

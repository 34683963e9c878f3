"""What the Docker executor decides without the engine: names, labels, the cache's environment,
and where a path the kit sees lies on the engine's host. Kept apart from the
modules that import `docker`, so these rules are tested without an engine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kit.errors import UserError
from kit.executors.base import Mount, Profiler

TOOLKIT_URL = (
    "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"
)
MOUNT_ROOT = "/micakit"  # where a run sees its mounts: /micakit/<mount name>
CACHE_DIR = f"{MOUNT_ROOT}/cache"
LD_DEBUG_DIR = f"{MOUNT_ROOT}/ld_debug"
NSYS_DIR = f"{MOUNT_ROOT}/nsys"  # the host's Nsight Systems, read-only, in profiled runs only
NSYS_ENV = "MICAKIT_NSYS"  # the nsys program, or the folder Nsight Systems is installed in
LABEL_SERIES = "micakit.series"  # every run container carries it; sweep() finds them by it
LABEL_RUN = "micakit.run"
LABEL_OWNER = "micakit.owner"  # the process that runs the series: host/pid/start

# §5: the discarded first run of a configuration fills the compilers' caches for its timed
# runs, and every run is a fresh container, so the caches live in the series' volume.
CACHE_ENV = {
    "TORCHINDUCTOR_CACHE_DIR": f"{CACHE_DIR}/inductor",
    "TRITON_CACHE_DIR": f"{CACHE_DIR}/triton",
    "CUDA_CACHE_PATH": f"{CACHE_DIR}/nv",  # the driver's cache of JIT-compiled kernels
}


# Contained runs: a training run needs no network, no capability and no privilege, and writes
# only where its mounts say (the series' work folder, the cache volume, ld_debug, /tmp).
TMP_SIZE = "4g"


def contained(uid: int | None = None, gid: int | None = None) -> tuple[dict, dict]:
    """The measured container's limits: (create_container's arguments, create_host_config's).

    No network (a contender can neither download nor send anything while it is measured),
    every capability dropped, no new privileges, the invoking user's uid:gid (its results are
    the user's), a read-only root filesystem; /tmp is a tmpfs, as compilers expect one.
    """
    uid = os.getuid() if uid is None else uid
    gid = os.getgid() if gid is None else gid
    create = {"user": f"{uid}:{gid}"}
    host = {
        "network_mode": "none",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,exec,nosuid,nodev,size={TMP_SIZE}"},
    }
    return create, host


# a user with no entry in the image's /etc/passwd has HOME=/, which is read-only there
CONTAINED_ENV = {"HOME": "/tmp"}


def cache_volume_name(series_id: str, image: str = "") -> str:
    """A cache volume of the series: one per measured image, so that one side never reads what
    the other side's compilers left (a contender's program could otherwise read, or seed,
    PyTorch's Inductor and Triton caches). Docker allows [a-zA-Z0-9][a-zA-Z0-9_.-] in names."""
    name = "micakit-cache-" + (re.sub(r"[^a-zA-Z0-9_.-]+", "-", series_id).strip("-.") or "x")
    return f"{name}-{hashlib.sha256(image.encode()).hexdigest()[:12]}" if image else name


@dataclass(frozen=True)
class HostPaths:
    """Translates a path the kit sees into the engine host's path for a bind mount.

    A bind mount's source is resolved by the engine, on its host. When the kit runs on that
    host the paths are the same; when it runs inside the `micakit` container they differ, and
    only what lies under one of that container's own mounts exists on the host at all.
    """

    container_id: str | None  # the kit's own container; None: the kit runs on the host
    binds: tuple[tuple[str, str], ...] = ()  # (destination in the container, host source)

    def to_host(self, path: Path) -> str:
        p = str(Path(path).resolve())
        if self.container_id is None:
            return p
        for dest, src in sorted(self.binds, key=lambda b: len(b[0]), reverse=True):
            d = dest.rstrip("/")
            if p == d or p.startswith(d + "/"):
                return src.rstrip("/") + p[len(d) :]
        raise UserError(
            f"{path} lies only inside the micakit container ({self.container_id[:12]}), "
            "where the Docker engine cannot mount it into a run",
            "keep results and inputs under a folder mounted from the host, as in "
            '`docker run -v "$PWD/results:/results" ... micakit series --out /results/NAME`',
        )


def host_paths_from_inspect(info: Mapping) -> HostPaths:
    """The translation for the container `info` describes (`docker inspect`'s answer)."""
    binds = []
    for m in info.get("Mounts") or []:
        if m.get("Type") in ("bind", "volume") and m.get("Source") and m.get("Destination"):
            binds.append((str(m["Destination"]), str(m["Source"])))
    return HostPaths(container_id=str(info["Id"]), binds=tuple(binds))


# the engine's words for a program the image does not hold: `exec: "/opt/mica/bin/mica": stat
# /opt/mica/bin/mica: no such file or directory`, `exec: "python": executable file not found`
_NO_PROGRAM = re.compile(r'exec: "([^"]+)"[^\n]*(?:no such file or directory|not found)')
_CONTAINER_FILE = re.compile(r"/containers/([0-9a-f]{64})/(?:hostname|hosts|resolv\.conf)")


def own_container_ids(
    mountinfo: Iterable[str] | None = None, hostname: str | None = None
) -> list[str]:
    """Ids that may name the container the kit runs in, most reliable first.

    Docker bind-mounts /etc/hostname, /etc/hosts and /etc/resolv.conf from
    /var/lib/docker/containers/<id>/, which /proc/self/mountinfo shows, whatever the cgroup
    version; the hostname (by default the id's first 12 digits) is the fallback. `/.dockerenv`
    alone proves nothing: a container of another engine, or a VM image, may carry it.
    """
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo") as f:
                mountinfo = f.read().splitlines()
        except OSError:
            mountinfo = []
    ids: list[str] = []
    for line in mountinfo:
        m = _CONTAINER_FILE.search(line)
        if m and m.group(1) not in ids:
            ids.append(m.group(1))
    name = hostname if hostname is not None else socket.gethostname()
    if re.fullmatch(r"[0-9a-f]{12,64}", name) and not any(i.startswith(name) for i in ids):
        ids.append(name)
    return ids


def owner_label(pid: int | None = None) -> str:
    """Who owns a run container: this host (or runner container), process and its start time."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}/{pid}/{_start_ticks(pid)}"


def _start_ticks(pid: int) -> str:
    # field 22 of /proc/PID/stat: a reused pid has another start time
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "gone"


def owner_alive(owner: str | None, running_containers: Iterable[str]) -> bool:
    """Whether the series that owns a container still runs, so that sweep() leaves it alone.

    On this host (or in this runner container) the owner's process must still exist with its
    start time; an owner in another runner container of this engine lives while that
    container runs. A container without an owner, or of a host this engine does not run, is
    a crashed series'.
    """
    try:
        host, pid, start = (owner or "").split("/")
        pid_n = int(pid)
    except ValueError:
        return False
    if host == socket.gethostname():
        return start != "gone" and _start_ticks(pid_n) == start
    return any(cid.startswith(host) for cid in running_containers)


@dataclass(frozen=True)
class HostNsys:
    """Nsight Systems installed on the host: its folder, mounted whole at NSYS_DIR, and the
    program's path inside that folder."""

    root: Path
    program: str  # relative to root, e.g. "bin/nsys" or "target-linux-x64/nsys"

    @property
    def in_run(self) -> str:
        return f"{NSYS_DIR}/{self.program}"


# folders that hold far more than one installation: never mounted into a run
_SHARED_ROOTS = ("/", "/usr", "/usr/local", "/opt", "/bin", "/home", "/snap")


def host_nsys(environ: Mapping[str, str], which: Callable[[str], str | None]) -> HostNsys | str:
    """§6: where the host's Nsight Systems lies, from MICAKIT_NSYS or else PATH; or why not.

    Neither measured image holds nsys, so a profiled run gets the host's installation, mounted
    read-only; nsys on PATH is usually a link into its installation folder (bin/nsys), which is
    what must be mounted, since nsys finds its libraries and targets beside itself.
    """
    named = environ.get(NSYS_ENV, "").strip()
    if named:
        path = Path(named).expanduser()
        if path.is_dir():
            for rel in ("bin/nsys", "target-linux-x64/nsys", "nsys"):
                if (path / rel).is_file():
                    return HostNsys(path.resolve(), rel)
            return f"{NSYS_ENV}={named} holds no bin/nsys"
        if not path.is_file():
            return f"{NSYS_ENV}={named} does not exist"
        program = path.resolve()
        source = NSYS_ENV
    else:
        found = which("nsys")
        if found is None:
            return f"nsys not found on the host (PATH, or {NSYS_ENV})"
        program = Path(found).resolve()
        source = "PATH"
    root = program.parent.parent
    if str(root) in _SHARED_ROOTS:
        return (
            f"nsys from {source} is {program}, which has no installation folder of its own "
            f"to mount; set {NSYS_ENV} to the folder Nsight Systems is installed in"
        )
    return HostNsys(root, str(program.relative_to(root)))


def nsys_profiler(
    environ: Mapping[str, str], which: Callable[[str], str | None], paths: HostPaths
) -> Profiler | str:
    """The host's nsys as a run's mount (a read-only bind at NSYS_DIR), or why there is none."""
    found = host_nsys(environ, which)
    if isinstance(found, str):
        return found
    try:
        paths.to_host(found.root)  # the engine must see it on its own host
    except UserError as e:
        return f"nsys at {found.root} cannot be mounted: {e.message}"
    return Profiler(
        found.in_run,
        (Mount("nsys", found.root, read_only=True),),
        origin=f"the host's {found.root}, mounted read-only",
    )


def engine_error(label: str, text: str) -> UserError | None:
    """What the user must fix when the engine refuses a run, from the engine's message."""
    first = text.strip().splitlines()[0] if text.strip() else "no message"
    if "could not select device driver" in text:
        return UserError(
            f"{label}: the Docker engine cannot give a container a GPU ({first})",
            "install the NVIDIA Container Toolkit, run `sudo nvidia-ctk runtime configure "
            f"--runtime=docker` and restart dockerd: {TOOLKIT_URL}",
        )
    gpu_hints = ("nvidia-container-cli", "no CUDA-capable device", "unknown device", "nvml error")
    if any(hint in text for hint in gpu_hints):
        return UserError(
            f"{label}: no GPU visible to the container ({first})",
            "check that `nvidia-smi` sees the card on the host and that --gpu names one it "
            f"lists; the NVIDIA Container Toolkit's guide: {TOOLKIT_URL}",
        )
    if "bind source path does not exist" in text or "invalid mount config" in text:
        return UserError(
            f"{label}: the engine cannot mount a folder ({first})",
            "a folder must exist on the engine's host; in the micakit container, keep it under "
            "a folder mounted from the host",
        )
    if missing := _NO_PROGRAM.search(text):
        return UserError(
            f"{label}: the image holds no program {missing.group(1)} ({first})",
            "build the side's image from the program the series runs (`micakit images build "
            "--only mica --contender PROGRAM`, or `--only pytorch`), or name the image that "
            "holds it",
        )
    return None


def write_container_record(path: Path, info: Mapping) -> None:
    """A run's container as the engine saw it (D6): its exit, whether the host's memory ran
    out (OOMKilled; the card's running out shows in the program's own output), mounts, devices."""
    state = info.get("State") or {}
    host = info.get("HostConfig") or {}
    record = {
        "schema_version": 1,
        "container_id": info.get("Id"),
        "image": (info.get("Config") or {}).get("Image"),
        "image_id": info.get("Image"),
        "state": {
            k: state.get(k) for k in ("ExitCode", "OOMKilled", "Error", "StartedAt", "FinishedAt")
        },
        "labels": (info.get("Config") or {}).get("Labels") or {},
        "mounts": [
            {k: m.get(k) for k in ("Type", "Source", "Destination", "RW")}
            for m in info.get("Mounts") or []
        ],
        "device_requests": host.get("DeviceRequests"),
        "shm_size_bytes": host.get("ShmSize"),
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2, sort_keys=True)
        f.write("\n")

"""The Docker engine: the only module of the kit that imports `docker`.

It connects, builds the measured images and the runner, measures an image's footprint (§8),
and runs programs in containers (`DockerExecutor`) under the same outside clock as local runs
(§5). Everything else takes a client or an executor, so tests replace the engine where none runs.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

import docker
import docker.constants
import docker.errors
import docker.types
import docker.utils.build
import requests

from kit import __version__
from kit.engine import store
from kit.errors import UserError
from kit.executors.base import Executor, Limits, Mount, Profiler, RunOutcome, RunSpec
from kit.executors.docker import footprint as footprint_mod
from kit.executors.docker import registry
from kit.executors.docker.containers import (
    CACHE_DIR,
    CACHE_ENV,
    CONTAINED_ENV,
    LABEL_OWNER,
    LABEL_RUN,
    LABEL_SERIES,
    LD_DEBUG_DIR,
    MOUNT_ROOT,
    HostPaths,
    cache_volume_name,
    contained,
    engine_error,
    host_paths_from_inspect,
    nsys_profiler,
    own_container_ids,
    owner_alive,
    owner_label,
    write_container_record,
)
from kit.executors.docker.footprint import ChunkReader, FootprintWriter, footprint_ratio  # noqa: F401
from kit.measure import clock

POLL_S = 1  # how often a running container's output is checked for a stall (seconds)
_NO_ENGINE_FIX = (
    "start the engine (`sudo dockerd &`, or `sudo systemctl start docker`; on a fresh machine "
    "`bash scripts/ci-setup.sh` installs and starts it), or choose `--executor local`"
)
_BUILD_FIX = "`micakit images build` builds it"
# the command that builds each measured image, as the CLI spells it (PROGRAM: the contender)
BUILD_COMMANDS = {
    "pytorch": "micakit images build --only pytorch",
    "mica": "micakit images build --only mica --contender PROGRAM",
}
_SETUP_FIX = (
    "with no image registry in reach, `bash scripts/ci-setup.sh` builds the local base "
    "micakit-base:bookworm from Debian's archive; pass it as build arg BASE"
)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the builder colours a step's stderr


def connect(host: str | None = None, timeout_s: int = 120) -> docker.DockerClient:
    """A client of the engine at `host` (None: DOCKER_HOST, else the local socket), checked."""
    where = host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"

    def client_of(version: str) -> docker.DockerClient:
        if host:
            return docker.DockerClient(base_url=host, version=version, timeout=timeout_s)
        return docker.from_env(version=version, timeout=timeout_s)

    if where.startswith("unix://"):
        # checked first: the SDK leaks its socket when the connection fails
        reason = _unix_socket_refuses(where[len("unix://") :])
        if reason:
            raise UserError(f"no Docker engine answers at {where} ({reason})", _NO_ENGINE_FIX)
    try:
        # a probe at the oldest API the SDK speaks, so that no call happens before the ping
        # (the version's negotiation is one) and its connection is closed whatever happens
        probe = client_of(docker.constants.MINIMUM_DOCKER_API_VERSION)
        try:
            probe.ping()
        finally:
            probe.close()
        return client_of("auto")
    except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
        if "PermissionError" in str(e) or "Permission denied" in str(e):
            raise UserError(
                f"no permission to use the Docker engine at {where}",
                "add yourself to the `docker` group (`sudo usermod -aG docker $USER`, then log "
                "in again), or choose `--executor local`",
            ) from None
        raise UserError(
            f"no Docker engine answers at {where} ({_reason(e)})", _NO_ENGINE_FIX
        ) from None


def _unix_socket_refuses(path: str) -> str | None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        try:
            sock.connect(path)
        except FileNotFoundError:
            return f"no socket {path}"
        except PermissionError:
            return None  # the SDK's error names the fix for this one
        except OSError as e:
            return e.strerror or str(e)
    return None


def _reason(e: Exception) -> str:
    text = str(e)
    for hint in ("No such file or directory", "Connection refused", "timed out"):
        if hint in text:
            return hint.lower()
    return text.splitlines()[0][:200] if text else type(e).__name__


def versions(client: docker.DockerClient) -> dict[str, str]:
    """The engine's versions for the series record (§6 "Versions")."""
    v = client.version()
    info = client.info()
    out = {
        "docker_engine": str(v.get("Version", "")),
        "docker_api": str(v.get("ApiVersion", "")),
        "docker_sdk": docker.__version__,
        "docker_os": str(info.get("OperatingSystem", "")),
        "docker_kernel": str(v.get("KernelVersion", "")),
        "docker_storage_driver": str(info.get("Driver", "")),
        "docker_runtimes": ",".join(sorted(info.get("Runtimes") or {})),
        "docker_default_runtime": str(info.get("DefaultRuntime", "")),
    }
    for component in v.get("Components") or []:
        name = str(component.get("Name", "")).lower()
        if name and name != "engine":
            key = name.replace("-", "_")  # containerd, runc, docker_init
            out[key if key.startswith("docker_") else f"docker_{key}"] = str(
                component.get("Version", "")
            )
    return out


# --- building images -------------------------------------------------------------------------


def build_image(
    client: docker.DockerClient,
    dockerfile: Path,
    context_dir: Path,
    tag: str,
    buildargs: Mapping[str, str] | None = None,
    wheelhouse: Path | None = None,
    on_line: Callable[[str], None] | None = None,
) -> str:
    """Build `dockerfile` with the files of `context_dir` and return the image's id.

    The context honours `context_dir/.dockerignore`; `wheelhouse`, when given, is added as the
    context's `wheelhouse/` folder (any of context_dir's own is left out), so the Dockerfiles
    install from it with no package index; without it, `wheelhouse/` is an empty folder and
    pip uses the index. The build's output goes to `on_line` as it comes.
    """
    if not dockerfile.is_file():
        raise UserError(f"no Dockerfile at {dockerfile}")
    if not context_dir.is_dir():
        raise UserError(f"the build context {context_dir} is not a folder")
    buildargs = dict(buildargs or {})
    tail: list[str] = []
    image_id = None
    with tempfile.TemporaryFile(prefix="micakit-context-") as context:
        _write_context(context, dockerfile, context_dir, wheelhouse)
        context.seek(0)
        # the legacy builder (POST /build) is what the API offers: BuildKit needs a session
        error = None
        try:
            stream = client.api.build(
                fileobj=context,
                custom_context=True,
                dockerfile=dockerfile.name,
                tag=tag,
                buildargs=buildargs,
                rm=True,
                forcerm=True,
                decode=True,
                timeout=None,
                use_config_proxy=False,
            )
        except docker.errors.APIError as e:
            if e.response is not None:
                e.response.close()
            raise _build_failed(client, dockerfile, tag, buildargs, _explain(e), tail) from None
        # read to the end whatever comes, so the response closes with its stream
        for item in stream:
            if "stream" in item:
                for line in _ANSI.sub("", item["stream"]).splitlines():
                    if not line.strip():
                        continue  # the builder sends each line's newline on its own
                    tail = (tail + [line])[-40:]
                    if on_line is not None:
                        on_line(line)
            elif "aux" in item and "ID" in item["aux"]:
                image_id = item["aux"]["ID"]
            elif "error" in item and error is None:
                error = str(item["error"])
        if error is not None:
            raise _build_failed(client, dockerfile, tag, buildargs, error, tail)
    return image_id or client.api.inspect_image(tag)["Id"]


def _write_context(
    f: IO[bytes], dockerfile: Path, context_dir: Path, wheelhouse: Path | None
) -> None:
    patterns = []
    ignore = context_dir / ".dockerignore"
    if ignore.is_file():
        lines = (line.strip() for line in ignore.read_text().splitlines())
        patterns = [line for line in lines if line and not line.startswith("#")]
    included = docker.utils.build.exclude_paths(str(context_dir), patterns)
    with tarfile.open(fileobj=f, mode="w") as tar:
        for rel in sorted(included):
            top = rel.split("/", 1)[0]
            if top == "wheelhouse" or rel == dockerfile.name:
                continue
            tar.add(context_dir / rel, arcname=rel, recursive=False)
        tar.add(dockerfile.resolve(), arcname=dockerfile.name)  # kit/files holds links to it
        info = tarfile.TarInfo("wheelhouse")
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
        if wheelhouse is not None:
            if not wheelhouse.is_dir():
                raise UserError(
                    f"the wheelhouse {wheelhouse} is not a folder",
                    "`bash scripts/ci-setup.sh` fills wheelhouse/ with the wheels the images need",
                )
            for wheel in sorted(wheelhouse.glob("*.whl")):
                tar.add(wheel, arcname=f"wheelhouse/{wheel.name}")


def _build_failed(
    client: docker.DockerClient,
    dockerfile: Path,
    tag: str,
    buildargs: Mapping[str, str],
    error: str,
    tail: list[str],
) -> UserError:
    shown = "\n".join(f"    {line}" for line in tail[-20:]) or "    (no output)"
    message = f"building {tag} from {dockerfile.name} failed: {error.strip()}\n{shown}"
    base = buildargs.get("BASE") or _default_base(dockerfile)
    at_from = any(line.startswith("Step 1/") for line in tail[-3:]) or not tail
    if base and at_from and not _image_exists(client, base):
        return UserError(
            f"building {tag}: the base image {base} is not here and could not be pulled "
            f"({error.strip()})",
            _SETUP_FIX,
        )
    return UserError(message, "the lines above are the build's own; fix what they name")


def _default_base(dockerfile: Path) -> str | None:
    m = re.search(r"^ARG BASE=(\S+)", dockerfile.read_text(), re.MULTILINE)
    return m.group(1) if m else None


def _image_exists(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.api.inspect_image(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


def _explain(e: docker.errors.APIError) -> str:
    return str(e.explanation or e)


# --- footprint (§8) --------------------------------------------------------------------------


def footprint(client: docker.DockerClient, image_ref: str, out_dir: Path) -> dict:
    """Measure an image (§8): its size, id, digests, layers and full file list, into out_dir.

    The size is the engine's (all layers, unpacked). The file list is read from the flattened
    filesystem of a container created from the image and never started, as a tar stream.
    Writes `footprint.json` and `files.tsv` into out_dir, so give each image its own folder.
    """
    api = client.api
    try:
        image = api.inspect_image(image_ref)
    except docker.errors.ImageNotFound:
        raise UserError(f"no image {image_ref} to measure", _BUILD_FIX) from None
    history = api.history(image_ref)
    writer = FootprintWriter(out_dir)
    container = api.create_container(
        image["Id"],
        entrypoint=["/micakit-footprint-never-started"],
        labels={"micakit.footprint": image_ref},
        network_disabled=True,
    )["Id"]
    try:
        chunks = api.export(container, chunk_size=1 << 20)
        with tarfile.open(fileobj=ChunkReader(chunks), mode="r|") as tar:
            for member in tar:
                writer.add(member)
    finally:
        api.remove_container(container, force=True)
    return writer.finish(image_ref, image, history)


def measure_footprints(client: docker.DockerClient, refs: Mapping[str, str], out_dir: Path) -> dict:
    """Both measured images' footprints into out_dir/<side>/ and their ratio into
    out_dir/ratio.json (§8); returns the ratio. All or nothing: every image is looked up before
    any is measured, and the measurements land in a sibling folder renamed into place at the
    end, so a failure leaves no partial footprint (and an earlier complete one untouched)."""
    for side, ref in refs.items():
        if not _image_exists(client, ref):
            raise UserError(
                f"no {side} image {ref} to measure",
                f"`{BUILD_COMMANDS[side]}` builds it (add --tag T where its tag is not the "
                f"kit's), or name a built image with --{side} REF",
            )
    partial = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        found = {side: footprint(client, ref, partial / side) for side, ref in refs.items()}
        for side, info in found.items():
            base = info.get("labels", {}).get(footprint_mod.BASE_LABEL)
            if base and _image_exists(client, base):
                # what the image adds beyond its side's minimum is told against its base (§8)
                footprint(client, base, partial / side / footprint_mod.BASE)
        ratio = footprint_ratio(found["mica"], found["pytorch"])
        store.write_json(partial / "ratio.json", ratio)
        store.publish_modes(partial)
        shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(partial, out_dir)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return ratio


# --- running -----------------------------------------------------------------------------------


def detect_host_paths(client: docker.DockerClient) -> HostPaths:
    """Where the kit's paths lie on the engine's host: the same, unless the kit itself runs in
    a container of this engine (the `micakit` image), whose mounts then translate them."""
    for candidate in own_container_ids():
        try:
            info = client.api.inspect_container(candidate)
        except docker.errors.APIError:
            continue  # not a container of this engine
        return host_paths_from_inspect(info)
    return HostPaths(container_id=None)


def device_requests(gpu: str | None) -> list[docker.types.DeviceRequest] | None:
    """Docker's request for `gpu`: "all", or indices / UUIDs separated by commas."""
    if gpu is None:
        return None
    if gpu == "all":
        return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    ids = [g.strip() for g in gpu.split(",") if g.strip()]
    return [docker.types.DeviceRequest(device_ids=ids, capabilities=[["gpu"]])]


class DockerExecutor(Executor):
    """Every run in a fresh container of its side's measured image, read by the outside clock.

    Mounts appear under /micakit/<name>. A cache volume named after the series keeps
    Inductor's, Triton's and the CUDA driver's caches from run to run, so the discarded first
    run of a configuration fills them for its timed runs (§5). Run containers carry the label
    `micakit.series` and are removed whatever ends the run; `sweep()` removes what a crashed
    series left. Files a run writes into a mount belong to the container's user (root).
    """

    name = "docker"
    uses_images = True

    def __init__(
        self,
        client: docker.DockerClient,
        series_id: str | None = None,
        *,
        shm_size: str = "2g",
        stop_grace_s: int = 5,
        drain_s: float = 60.0,
    ) -> None:
        self.client = client
        self._images_seen: set[str] = set()
        self._spare: clock.PendingReader | None = None
        self._finalizer: weakref.finalize | None = None
        self.series_id = series_id or f"pid{os.getpid()}"
        self.shm_size = shm_size  # Docker's 64 MiB /dev/shm is too small for compile workers
        self.stop_grace_s = stop_grace_s  # as the local executor: SIGTERM, then SIGKILL
        self.drain_s = drain_s  # how long the output may trail the exit before it is cut
        self._host_paths: HostPaths | None = None
        self._volume_ready = False
        self._profiler: Profiler | str | None = None  # looked up once a series

    def use_series(self, series_id: str) -> None:
        """Name the series (labels, cache volume); a resumed series passes the same id."""
        self.series_id = series_id
        self._volume_ready = False

    @property
    def host_paths(self) -> HostPaths:
        if self._host_paths is None:
            self._host_paths = detect_host_paths(self.client)
        return self._host_paths

    @property
    def cache_volume(self) -> str:
        return cache_volume_name(self.series_id)

    def where(self, mount: Mount) -> str:
        return f"{MOUNT_ROOT}/{mount.name}"

    def versions(self) -> dict[str, str]:
        return versions(self.client)

    def host(self) -> str:
        # the engine's machine: where the kit runs in the runner image, its own name is only
        # the container's id
        return str(self.client.info().get("Name") or super().host())

    def sweep(self) -> None:
        """Remove the run containers of series whose process is gone (§5: the card must hold
        no other program). A live series' containers are left to it."""
        api = self.client.api
        running = [c["Id"] for c in api.containers()]
        for c in api.containers(all=True, filters={"label": LABEL_SERIES}):
            if not owner_alive((c.get("Labels") or {}).get(LABEL_OWNER), running):
                self._remove(c["Id"])

    def finish(self) -> None:
        self.drop_cache()

    def footprint(self, ref: str, out_dir: Path) -> dict:
        return footprint(self.client, ref, out_dir)

    def profiler(self, image: str | None, scratch: Path) -> Profiler | str:
        """§6: the host's Nsight Systems, mounted read-only into profiled runs only, so that
        neither measured image holds it; looked up once, and the reason kept when there is
        none."""
        if self._profiler is None:
            self._profiler = nsys_profiler(os.environ, shutil.which, self.host_paths)
        return self._profiler

    def footprint_ratio(self, mica: Mapping, pytorch: Mapping) -> dict:
        return footprint_ratio(mica, pytorch)

    def image_id(self, ref: str) -> str | None:
        return image_id(self.client, ref)

    def image_info(self, ref: str) -> dict:
        info = self.client.api.inspect_image(ref)
        return {
            "image": ref,
            "image_id": info["Id"],
            "repo_digests": info.get("RepoDigests") or [],
            "size_bytes": info.get("Size"),
        }

    def pull_image(self, ref: str, on_line: Callable[[str], None] | None = None) -> str | None:
        if not registry.names_registry(ref):
            return None  # a bare name would be looked for on Docker Hub: never guessed
        if on_line is not None:
            on_line(f"pulling {ref}")
        return registry.pull(self.client, ref, on_line)

    def runner_image(self) -> dict:
        container = self.host_paths.container_id
        if container is None:
            return {}
        # by id: the name the container was started with may name another image by now, and
        # a resume in the same image under another name (tag or digest) is the same image
        return self.image_info(self.client.api.inspect_container(container)["Image"])

    def drop_cache(self) -> None:
        """Remove this series' cache volume, once nothing will run in the series again."""
        self.close_readers()
        try:
            self.client.api.remove_volume(self.cache_volume, force=True)
        except docker.errors.NotFound:
            pass
        self._volume_ready = False

    def run(self, spec: RunSpec, log_dir: Path) -> RunOutcome:
        api = self.client.api
        if not spec.image:
            raise UserError(
                f"{spec.label}: no image to run in", "the Docker executor runs a side's image"
            )
        if spec.image not in self._images_seen:
            # once per image and series: a round trip to the engine less before every run
            if not _image_exists(self.client, spec.image):
                raise UserError(f"{spec.label}: the image {spec.image} is not built", _BUILD_FIX)
            self._images_seen.add(spec.image)
        log_dir.mkdir(parents=True, exist_ok=True)
        stdout_log, stderr_log = log_dir / "stdout.log", log_dir / "stderr.log"
        env = {**CACHE_ENV, **spec.env}
        mounts = [self._cache_mount(spec.image)] + [self._bind(m) for m in spec.mounts]
        libraries_dir = None
        if spec.trace_libraries:
            # amendment 2: the loader writes what it opens, one file per process, to the host
            libraries_dir = log_dir / "ld_debug"
            libraries_dir.mkdir(exist_ok=True)
            mounts.append(self._bind(Mount("ld_debug", libraries_dir, read_only=False)))
            env.update(LD_DEBUG="libs", LD_DEBUG_OUTPUT=f"{LD_DEBUG_DIR}/ld")
        if spec.gpu is not None:
            env.setdefault("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")
        as_user, limits = contained()
        env = {**CONTAINED_ENV, **env}
        host_config = api.create_host_config(
            mounts=mounts,
            device_requests=device_requests(spec.gpu),
            init=True,  # a real PID 1 reaps the compile workers and forwards signals
            shm_size=self.shm_size,
            **limits,
        )
        labels = {
            LABEL_SERIES: self.series_id,
            LABEL_RUN: spec.label,
            LABEL_OWNER: owner_label(),
            "micakit.kit": __version__,
        }
        # a reader started before this run, already waiting: handed the stream after the attach
        pending = None if self._over_ssh() else self._take_reader()
        try:
            container = api.create_container(
                spec.image,
                entrypoint=[spec.argv[0]],
                command=list(spec.argv[1:]),
                environment=env,
                working_dir=spec.workdir,
                labels=labels,
                host_config=host_config,
                tty=False,  # two streams, multiplexed on the attach socket
                stdin_open=False,
                **as_user,
            )["Id"]
        except BaseException as e:
            if pending is not None:
                pending.cancel()
            if isinstance(e, docker.errors.APIError):
                raise _run_error(spec, e) from None
            raise
        try:
            start_ns, exit_code, stopped = self._attach_start_wait(
                container, spec, stdout_log, stderr_log, pending
            )
            end_ns = time.monotonic_ns()
            write_container_record(log_dir / "container.json", api.inspect_container(container))
        finally:
            self._remove(container)
        return RunOutcome(
            exit_code=exit_code,
            start_ns=start_ns,
            end_ns=end_ns,
            stdout_log=stdout_log,
            stderr_log=stderr_log,
            libraries_dir=libraries_dir,
            stopped=stopped,
        )

    def _take_reader(self) -> clock.PendingReader:
        """The waiting reader, and a new one started for the next run."""
        reader = self._spare or clock.PendingReader()
        self._spare = clock.PendingReader()
        if self._finalizer is None:
            # a series that ends without finish() (Ctrl-C, a failure) leaves no reader behind
            self._finalizer = weakref.finalize(self, _cancel_spare, self)
        return reader

    def close_readers(self) -> None:
        if self._spare is not None:
            self._spare.cancel()
            self._spare = None

    def _over_ssh(self) -> bool:
        return "ssh" in str(self.client.api.base_url)

    def _attach_start_wait(
        self,
        container: str,
        spec: RunSpec,
        stdout_log: Path,
        stderr_log: Path,
        pending: clock.PendingReader | None = None,
    ) -> tuple[int, int, str | None]:
        api = self.client.api
        # Attached before the start, as `docker run` does, so no line can come before the
        # reader waits, and nothing sits in the HTTP client's buffer when the reader takes over.
        try:
            sock = api.attach_socket(container, params={"stdout": 1, "stderr": 1, "stream": 1})
        except BaseException:
            if pending is not None:
                pending.cancel()
            raise
        if _carries_data_on_fd(sock):
            fd = os.dup(sock.fileno())
            try:
                if pending is not None:
                    reader = pending.hand([(fd, "mux")], stdout_log, stderr_log)
                else:
                    reader = clock.start_reader([(fd, "mux")], stdout_log, stderr_log)
            finally:
                os.close(fd)  # the reader holds its own copy; the engine closes the stream
                _close_socket(sock)
        else:
            if pending is not None:
                pending.cancel()
            reader = _relayed_reader(sock, stdout_log, stderr_log)
        start_ns = time.monotonic_ns()
        try:
            try:
                api.start(container)
            except docker.errors.APIError as e:
                self._remove(container)  # closes the stream, so the reader ends
                reader.wait()
                raise _run_error(spec, e) from None
            status, stopped = self._wait_within(container, spec, stdout_log, stderr_log)
            self._drain(container, reader)
        except UserError:
            raise
        except BaseException:
            # Ctrl-C or SIGTERM (the series turns it into KeyboardInterrupt): end the program,
            # keep what the reader already wrote; the caller removes the container
            self._stop(container)
            self._drain(container, reader)
            raise
        return start_ns, exit_code_of(int(status["StatusCode"])), stopped

    def _wait_within(
        self, container: str, spec: RunSpec, stdout_log: Path, stderr_log: Path
    ) -> tuple[dict, str | None]:
        """The container's exit; past the stall or whole-run limit it is stopped, and why."""
        api = self.client.api
        if not spec.stall_s and not spec.limit_s:
            return api.wait(container, timeout=None), None
        limits = Limits(spec, (stdout_log, stderr_log))
        while True:
            try:
                return api.wait(container, timeout=POLL_S), None
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                pass  # still running
            why = limits.check()
            if why:
                self._stop(container)
                return api.wait(container, timeout=None), why

    def _drain(self, container: str, reader: subprocess.Popen) -> None:
        try:
            reader.wait(self.drain_s)
        except subprocess.TimeoutExpired:
            self._remove(container)  # an attach stream that never closed: cut it
            reader.wait()

    def _stop(self, container: str) -> None:
        try:
            self.client.api.stop(container, timeout=self.stop_grace_s)
        except docker.errors.APIError:
            pass

    def _cache_mount(self, image: str) -> docker.types.Mount:
        mount = docker.types.Mount(target=CACHE_DIR, source=self.cache_volume, type="volume")
        if not self._volume_ready:
            # created explicitly, to carry the series' label; an existing one is kept
            self.client.api.create_volume(self.cache_volume, labels={LABEL_SERIES: self.series_id})
            self._own_volume(image, mount)
            self._volume_ready = True
        return mount

    def _own_volume(self, image: str, mount: docker.types.Mount) -> None:
        """A new volume belongs to root; the runs, as the invoking user, must write the cache.
        One unmeasured container, with only the capability to chown, hands it over."""
        api = self.client.api
        owner = f"{os.getuid()}:{os.getgid()}"
        container = api.create_container(
            image,
            entrypoint=["chown", owner, CACHE_DIR],
            labels={LABEL_SERIES: self.series_id, LABEL_OWNER: owner_label()},
            host_config=api.create_host_config(
                mounts=[mount], network_mode="none", cap_drop=["ALL"], cap_add=["CHOWN"]
            ),
            user="0:0",
        )["Id"]
        try:
            api.start(container)
            api.wait(container, timeout=60)
        finally:
            self._remove(container)

    def _bind(self, mount: Mount) -> docker.types.Mount:
        if not mount.host.exists():
            raise UserError(f"{mount.name}: {mount.host} does not exist", "prepare it first")
        return docker.types.Mount(
            target=self.where(mount),
            source=self.host_paths.to_host(mount.host),
            type="bind",
            read_only=mount.read_only,
        )

    def _remove(self, container: str) -> None:
        try:
            self.client.api.remove_container(container, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            if "already in progress" not in _explain(e):
                raise


def _cancel_spare(executor: DockerExecutor) -> None:  # pragma: no cover - at exit
    executor.close_readers()


def _carries_data_on_fd(sock: object) -> bool:
    """A local engine's attach stream is a socket the reader process can read itself; over SSH
    it is a channel of the SDK's SSH transport, whose descriptor carries no data."""
    module = type(sock).__module__
    return not (module.startswith("paramiko") or type(sock).__name__ == "SSHSocket")


def _relayed_reader(sock, stdout_log: Path, stderr_log: Path) -> subprocess.Popen:
    """The reader process fed through a pipe by a thread that reads the SSH channel.

    `--docker-host ssh://...` only: the relay adds a thread's wake-up to each chunk's stamp,
    where the network's own delay is larger still; runs on the engine's machine are read as
    they are locally.
    """
    r, w = os.pipe()
    try:
        reader = clock.start_reader([(r, "mux")], stdout_log, stderr_log)
    finally:
        os.close(r)

    def relay() -> None:
        try:
            while chunk := sock.recv(1 << 16):
                os.write(w, chunk)
        except OSError:
            pass
        finally:
            os.close(w)
            _close_socket(sock)

    threading.Thread(target=relay, name="micakit-attach-relay", daemon=True).start()
    return reader


def _close_socket(sock: object) -> None:
    # attach_socket gives the SocketIO under the HTTP response; closing it leaves the socket
    raw = getattr(sock, "_sock", None)
    sock.close()  # type: ignore[attr-defined]
    if raw is not None:
        raw.close()


def _run_error(spec: RunSpec, e: docker.errors.APIError) -> Exception:
    if isinstance(e, docker.errors.ImageNotFound):
        return UserError(f"{spec.label}: the image {spec.image} is not built", _BUILD_FIX)
    return engine_error(spec.label, _explain(e)) or e  # an unknown refusal keeps its traceback


def tag_image(client: docker.DockerClient, image_id: str, repository: str, tag: str) -> None:
    """Give a built image a second name (e.g. `latest` beside the versioned tag)."""
    client.api.tag(image_id, repository, tag)


def image_id(client: docker.DockerClient, ref: str) -> str | None:
    """The id of the image `ref` names, or None where the engine has no such image."""
    try:
        return client.api.inspect_image(ref)["Id"]
    except docker.errors.ImageNotFound:
        return None


def exit_code_of(status: int) -> int:
    """The engine reports a death by signal N as 128 + N; the kit, as subprocess does, as -N,
    so a program killed by a signal is never taken for one out of memory (amendment 8)."""
    return -(status - 128) if 128 < status <= 128 + 64 else status

"""The Docker executor: every run in a fresh, contained container, under the outside clock (§5).

The package splits the engine's work by room: `connection` (a checked client, the versions),
`building` (images built and looked up), `engine_images` (the executor's images: looked up,
pulled, read and measured), `inventory` (an image's footprint, §8), `running` (one container
attached, started, waited on, drained) and `watchdog` (the kit's death removes its containers);
the rules that need no engine (labels, limits, host paths) are `containers`'.
"""

from __future__ import annotations

import os
import shutil
import time
import weakref
from pathlib import Path

import docker
import docker.errors
import docker.types

from kit import __version__
from kit.errors import UserError
from kit.executors.base import Executor, Mount, Profiler, RunOutcome, RunSpec
from kit.executors.docker import connection
from kit.executors.docker.building import BUILD_FIX, image_exists
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
    host_paths_from_inspect,
    nsys_profiler,
    own_container_ids,
    owner_alive,
    owner_label,
    write_container_record,
)
from kit.executors.docker.engine_images import DockerImages
from kit.executors.docker.failures import guard, guarded
from kit.executors.docker.running import AttachedRun, device_requests, run_error
from kit.executors.docker.watchdog import Watchdog
from kit.measure import clock


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


class DockerExecutor(Executor):
    """Every run in a fresh container of its side's measured image, read by the outside clock.

    Mounts appear under /micakit/<name>. A cache volume named after the series keeps
    Inductor's, Triton's and the CUDA driver's caches from run to run, so the discarded first
    run of a configuration fills them for its timed runs (§5). Run containers carry the label
    `micakit.series` and are removed whatever ends the run, the kit's own death included (the
    series' watchdog); `sweep()` removes anything a crashed series still left. Files a run
    writes into a mount belong to the invoking user (`containers.contained`).
    """

    name = "docker"

    def __init__(
        self,
        client: docker.DockerClient,
        series_id: str | None = None,
        *,
        shm_size: str = "2g",
        stop_grace_s: int = 5,
        drain_s: float = 60.0,
        host: str | None = None,
    ) -> None:
        self.client = client
        self.engine_host = host  # as connect() was given it; the watchdog connects there too
        self._watchdog: Watchdog | None = None
        self._images_seen: set[str] = set()
        self._spare: clock.PendingReader | None = None
        self._finalizer: weakref.finalize | None = None
        self.series_id = series_id or f"pid{os.getpid()}"
        self.shm_size = shm_size  # Docker's 64 MiB /dev/shm is too small for compile workers
        self.stop_grace_s = stop_grace_s  # as the local executor: SIGTERM, then SIGKILL
        self.drain_s = drain_s  # how long the output may trail the exit before it is cut
        self._host_paths: HostPaths | None = None
        self._volumes_ready: set[str] = set()
        self._profiler: Profiler | str | None = None  # looked up once a series
        self._running: str | None = None  # the container of the run in progress
        self.images: DockerImages = DockerImages(
            client, self._own_labels, lambda: self.host_paths.container_id
        )

    def use_series(self, series_id: str) -> None:
        """Name the series (labels, cache volume); a resumed series passes the same id."""
        self.series_id = series_id
        self._volumes_ready = set()

    @property
    def host_paths(self) -> HostPaths:
        if self._host_paths is None:
            self._host_paths = detect_host_paths(self.client)
        return self._host_paths

    def host_path(self, path: Path) -> str | None:
        """The host's path of a path of the kit's, read from its own container's mounts."""
        try:
            paths = self.host_paths
            return paths.to_host(path) if paths.container_id else None
        except (UserError, docker.errors.DockerException):
            return None  # under no mount, or the engine does not say: the caller falls back

    def where(self, mount: Mount) -> str:
        return f"{MOUNT_ROOT}/{mount.name}"

    def running(self) -> str | None:
        return self._running

    @guarded("asking the Docker engine its versions")
    def versions(self) -> dict[str, str]:
        return connection.versions(self.client)

    @guarded("asking the Docker engine its host's name")
    def host(self) -> str:
        # the engine's machine: where the kit runs in the runner image, its own name is only
        # the container's id
        return str(self.client.info().get("Name") or super().host())

    @guarded("removing the containers of stopped series")
    def sweep(self) -> None:
        """Remove the run containers of series whose process is gone (§5: the card must hold
        no other program). A live series' containers are left to it."""
        api = self.client.api
        running = [c["Id"] for c in api.containers()]
        for c in api.containers(all=True, filters={"label": LABEL_SERIES}):
            if not owner_alive((c.get("Labels") or {}).get(LABEL_OWNER), running):
                self._remove(c["Id"])

    @guarded("removing the series' cache volume")
    def finish(self) -> None:
        self.drop_cache()
        self.close_watchdog()

    @guarded("looking for Nsight Systems (§6)")
    def profiler(self, image: str | None, scratch: Path) -> Profiler | str:
        """§6: the host's Nsight Systems, mounted read-only into profiled runs only, so that
        neither measured image holds it; looked up once, and the reason kept when there is
        none."""
        if self._profiler is None:
            self._profiler = nsys_profiler(os.environ, shutil.which, self.host_paths)
        return self._profiler

    def _own_labels(self) -> dict[str, str]:
        # a container of the series' own, which a later start's sweep removes should it be left
        return {LABEL_SERIES: self.series_id, LABEL_OWNER: owner_label()}

    @guarded("removing the series' cache volumes")
    def drop_cache(self) -> None:
        """Remove this series' cache volumes, once nothing will run in the series again."""
        self.close_readers()
        api = self.client.api
        found = api.volumes(filters={"label": f"{LABEL_SERIES}={self.series_id}"})
        for volume in (found or {}).get("Volumes") or []:
            try:
                api.remove_volume(volume["Name"], force=True)
            except docker.errors.NotFound:
                pass
        self._volumes_ready = set()

    def run(self, spec: RunSpec, log_dir: Path) -> RunOutcome:
        with guard(spec.label):  # the engine's failure, at any step, in the user's words
            return self._run(spec, log_dir)

    def _run(self, spec: RunSpec, log_dir: Path) -> RunOutcome:
        api = self.client.api
        image = self._checked_image(spec)
        log_dir.mkdir(parents=True, exist_ok=True)
        stdout_log, stderr_log = log_dir / "stdout.log", log_dir / "stderr.log"
        env, mounts, libraries_dir = self._env_and_mounts(spec, image, log_dir)
        as_user, limits = contained()
        env = {**CONTAINED_ENV, **env}
        own = self.host_paths.container_id
        if own is not None:
            # the kit runs in a container (the `micakit` image): the run joins its process
            # namespace, so that container's end, however it comes (`docker kill`, its PID 1
            # killed), ends the measured program at once, as the watchdog cannot outlive it.
            # Docker's init is then no PID 1, and reaps as a subreaper instead
            limits = {**limits, "pid_mode": f"container:{own}"}
            env["TINI_SUBREAPER"] = "1"
        host_config = api.create_host_config(
            mounts=mounts,
            device_requests=device_requests(spec.gpu),
            init=True,  # a real PID 1 reaps the compile workers and forwards signals
            shm_size=self.shm_size,
            **limits,
        )
        # a reader started before this run, already waiting: handed the stream after the attach
        pending = None if self._over_ssh() else self._take_reader()
        container = self._create_container(spec, image, env, host_config, as_user, pending)
        try:
            attached = AttachedRun(
                api, container, self._remove, stop_grace_s=self.stop_grace_s, drain_s=self.drain_s
            )
            start_ns, exit_code, stopped = attached.start_and_wait(
                spec, stdout_log, stderr_log, pending
            )
            end_ns = time.monotonic_ns()
            write_container_record(log_dir / "container.json", api.inspect_container(container))
        finally:
            self._running = None
            self._remove(container)
        return RunOutcome(
            exit_code=exit_code,
            start_ns=start_ns,
            end_ns=end_ns,
            stdout_log=stdout_log,
            stderr_log=stderr_log,
            libraries_dir=libraries_dir,
            stopped=stopped,
            # the container is the boundary: it sees its mounts alone, and its processes end
            # with it
            isolation="container: only the run's mounts" if spec.confine else None,
        )

    def _checked_image(self, spec: RunSpec) -> str:
        """The image the run names, which the engine holds."""
        if not spec.image:
            raise UserError(
                f"{spec.label}: no image to run in", "the Docker executor runs a side's image"
            )
        if spec.image not in self._images_seen:
            # once per image and series: a round trip to the engine less before every run
            if not image_exists(self.client, spec.image):
                raise UserError(f"{spec.label}: the image {spec.image} is not built", BUILD_FIX)
            self._images_seen.add(spec.image)
        return spec.image

    def _env_and_mounts(
        self, spec: RunSpec, image: str, log_dir: Path
    ) -> tuple[dict[str, str], list[docker.types.Mount], Path | None]:
        """The run's environment and mounts, and the folder its loader writes to (or None)."""
        env = {**CACHE_ENV, **spec.env}
        mounts = [self._cache_mount(image)] + [self._bind(m) for m in spec.mounts]
        libraries_dir = None
        if spec.trace_libraries:
            # amendment 2: the loader writes what it opens, one file per process, to the host
            libraries_dir = log_dir / "ld_debug"
            libraries_dir.mkdir(exist_ok=True)
            mounts.append(self._bind(Mount("ld_debug", libraries_dir, read_only=False)))
            env.update(LD_DEBUG="libs", LD_DEBUG_OUTPUT=f"{LD_DEBUG_DIR}/ld")
        if spec.gpu is not None:
            env.setdefault("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")
        return env, mounts, libraries_dir

    def _create_container(
        self,
        spec: RunSpec,
        image: str,
        env: dict[str, str],
        host_config: dict,
        as_user: dict,
        pending: clock.PendingReader | None,
    ) -> str:
        """The run's container, created and watched; the waiting reader cancelled if it fails."""
        api = self.client.api
        labels = {
            LABEL_SERIES: self.series_id,
            LABEL_RUN: spec.label,
            LABEL_OWNER: owner_label(),
            "micakit.kit": __version__,
        }
        try:
            watchdog = self._watched()
            container: str = api.create_container(
                image,
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
            watchdog.watch(container)  # should the kit die from here on, it is removed
            self._running = container
        except BaseException as e:
            if pending is not None:
                pending.cancel()
            if isinstance(e, docker.errors.APIError):
                raise run_error(spec, e) from None
            raise
        return container

    def _take_reader(self) -> clock.PendingReader:
        """The waiting reader, and a new one started for the next run."""
        reader = self._spare or clock.PendingReader()
        self._spare = clock.PendingReader()
        self._tidy_at_exit()
        return reader

    def _watched(self) -> Watchdog:
        """The series' watchdog, started before its first container (see watchdog.py)."""
        if self._watchdog is None:
            version = getattr(self.client.api, "api_version", None)
            self._watchdog = Watchdog(self.engine_host, version)
            self._tidy_at_exit()
        return self._watchdog

    def _tidy_at_exit(self) -> None:
        if self._finalizer is None:
            # a series that ends without finish() (Ctrl-C, a failure) leaves no reader behind,
            # and its watchdog sees the pipe end at once
            self._finalizer = weakref.finalize(self, _at_exit, self)

    def close_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.close()
            self._watchdog = None

    def close_readers(self) -> None:
        if self._spare is not None:
            self._spare.cancel()
            self._spare = None

    def _over_ssh(self) -> bool:
        return "ssh" in str(self.client.api.base_url)

    def _cache_mount(self, image: str) -> docker.types.Mount:
        """The cache volume of the run's image (one per side, kit.executors.docker.containers)."""
        name = cache_volume_name(self.series_id, image)
        mount = docker.types.Mount(target=CACHE_DIR, source=name, type="volume")
        if name not in self._volumes_ready:
            # created explicitly, to carry the series' label; an existing one is kept
            self.client.api.create_volume(name, labels={LABEL_SERIES: self.series_id})
            self._own_volume(image, mount)
            self._volumes_ready.add(name)
        return mount

    def _own_volume(self, image: str, mount: docker.types.Mount) -> None:
        """A new volume belongs to root; the runs, as the invoking user, must write the cache.
        One unmeasured container, with only the capability to chown, hands it over."""
        api = self.client.api
        owner = f"{os.getuid()}:{os.getgid()}"
        watchdog = self._watched()
        container = api.create_container(
            image,
            entrypoint=["chown", owner, CACHE_DIR],
            labels=self._own_labels(),
            host_config=api.create_host_config(
                mounts=[mount], network_mode="none", cap_drop=["ALL"], cap_add=["CHOWN"]
            ),
            user="0:0",
        )["Id"]
        watchdog.watch(container)
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
            if "already in progress" not in connection.explain(e):
                raise
        if self._watchdog is not None:
            self._watchdog.forget(container)


def _at_exit(executor: DockerExecutor) -> None:  # pragma: no cover - at exit
    executor.close_readers()
    executor.close_watchdog()

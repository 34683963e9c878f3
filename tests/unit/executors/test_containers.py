"""The Docker executor's rules that need no engine: names, host paths, footprints, errors."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import docker.errors
import pytest
import requests

from kit.errors import UserError
from kit.executors.base import RunSpec
from kit.executors.docker import building, connection
from kit.executors.docker.containers import (
    TOOLKIT_URL,
    HostPaths,
    cache_volume_name,
    host_paths_from_inspect,
    own_container_ids,
    owner_alive,
    owner_label,
)
from kit.executors.docker.executor import DockerExecutor
from kit.executors.docker.footprint import FootprintWriter, footprint_ratio, read_files
from kit.executors.docker.running import device_requests, exit_code_of, run_error

ID = "91afdbd3cf1d" + "0" * 52


def test_cache_volume_names_are_valid_docker_names() -> None:
    assert cache_volume_name("2026-10-04T12:00:00Z rtx4090") == (
        "micakit-cache-2026-10-04T12-00-00Z-rtx4090"
    )
    assert cache_volume_name("///") == "micakit-cache-x"


def test_on_the_host_paths_stay_as_they_are(tmp_path: Path) -> None:
    assert HostPaths(container_id=None).to_host(tmp_path) == str(tmp_path.resolve())


def test_in_the_runner_paths_translate_through_its_mounts() -> None:
    info = {
        "Id": ID,
        "Mounts": [
            {
                "Type": "bind",
                "Source": "/var/run/docker.sock",
                "Destination": "/var/run/docker.sock",
            },
            {"Type": "bind", "Source": "/home/u/results", "Destination": "/results"},
            {"Type": "bind", "Source": "/data/nano", "Destination": "/results/inputs"},
            {"Type": "volume", "Source": "/var/lib/docker/volumes/v/_data", "Destination": "/c"},
            {"Type": "tmpfs", "Source": "", "Destination": "/tmp"},
        ],
    }
    paths = host_paths_from_inspect(info)
    assert paths.to_host(Path("/results/s1/run-3")) == "/home/u/results/s1/run-3"
    assert paths.to_host(Path("/results")) == "/home/u/results"
    assert paths.to_host(Path("/results/inputs/train.py")) == "/data/nano/train.py"  # longest
    assert paths.to_host(Path("/c/x")) == "/var/lib/docker/volumes/v/_data/x"
    with pytest.raises(UserError, match="only inside the micakit container") as e:
        paths.to_host(Path("/tmp/series"))
    assert "-v" in (e.value.fix or "")
    with pytest.raises(UserError):
        paths.to_host(Path("/resultsX/a"))  # a prefix of a name is not a folder above it


def test_own_container_ids_from_mountinfo_then_hostname() -> None:
    line = (
        f"612 590 254:1 /var/lib/docker/containers/{ID}/hostname /etc/hostname "
        "rw,relatime - ext4 /dev/vda rw"
    )
    assert own_container_ids([line, line], hostname="91afdbd3cf1d") == [ID]
    assert own_container_ids([], hostname="91afdbd3cf1d") == ["91afdbd3cf1d"]
    assert own_container_ids([], hostname="build-vm") == []  # /.dockerenv alone proves nothing


def _member(name: str, kind: bytes, size: int = 0, mode: int = 0o644, link: str = "") -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    info.size = size if kind == tarfile.REGTYPE else 0
    return info, (b"x" * size if kind == tarfile.REGTYPE else None)


def test_footprint_writer_lists_every_entry(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in [
            _member(".dockerenv", tarfile.REGTYPE, 0, 0o100755),
            _member("opt/", tarfile.DIRTYPE, mode=0o40755),
            _member("opt/mica/bin/program", tarfile.REGTYPE, 1234, 0o100755),
            _member("opt/mica/lib/libcublas.so.12", tarfile.SYMTYPE, link="libcublas.so.12.8"),
            _member("opt/mica/lib/hard", tarfile.LNKTYPE, link="opt/mica/bin/program"),
            _member("odd\tname", tarfile.REGTYPE, 3),
        ]:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    buf.seek(0)
    writer = FootprintWriter(tmp_path)
    with tarfile.open(fileobj=buf, mode="r|") as tar:
        for member in tar:
            writer.add(member)
    image = {"Id": "sha256:abc", "Size": 5000, "RepoTags": ["m:1"], "RootFS": {"Layers": ["l1"]}}
    history = [{"Id": "sha256:abc", "CreatedBy": "COPY program", "Size": 1234}]
    record = writer.finish("m:1", image, history)
    assert record["size_bytes"] == 5000 and record["files"]["entries"] == 6
    assert record["files"]["regular_file_bytes"] == 1234 + 3
    rows = {r["path"]: r for r in read_files(tmp_path / "files.tsv")}
    assert rows["/opt/mica/bin/program"] == {
        "path": "/opt/mica/bin/program",
        "size_bytes": 1234,
        "type": "file",
        "mode": "0755",
        "link": "",
        "sha256": "",  # no hash given to finish here: inventory.footprint passes the stream's
        "owner": "",
    }
    assert rows["/.dockerenv"]["type"] == "file"  # not stripped to "dockerenv"
    assert rows["/opt/mica/lib/libcublas.so.12"]["link"] == "libcublas.so.12.8"
    assert rows["/opt/mica/lib/hard"]["link"] == "/opt/mica/bin/program"
    assert rows["/odd\\tname"]["size_bytes"] == 3  # escaped, one line per entry
    assert json.loads((tmp_path / "footprint.json").read_text()) == record


def test_footprint_ratio_uses_the_two_sizes_alone() -> None:
    ratio = footprint_ratio(
        {"image": "mica", "size_bytes": 200, "files": {"entries": 9}},
        {"image": "pytorch", "size_bytes": 5000},
    )
    assert ratio["pytorch_over_mica"] == 25.0
    assert "libcuda" in ratio["note"] and "host" in ratio["note"]


def test_connect_to_no_engine_says_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no Docker engine answers") as e:
        connection.connect(f"unix://{tmp_path}/no.sock", timeout_s=5)
    assert "dockerd" in (e.value.fix or "") and "--executor local" in (e.value.fix or "")


def test_device_requests() -> None:
    assert device_requests(None) is None
    (everything,) = device_requests("all") or []
    assert everything["Count"] == -1 and everything["Capabilities"] == [["gpu"]]
    (two,) = device_requests("0, GPU-1234") or []
    assert two["DeviceIDs"] == ["0", "GPU-1234"]


def _api_error(text: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = 500
    return docker.errors.APIError("500 Server Error", response, explanation=text)


@pytest.mark.parametrize(
    ("text", "expected", "fix_names"),
    [
        (
            'could not select device driver "" with capabilities: [[gpu]]',
            "cannot give a container a GPU",
            "NVIDIA Container Toolkit",
        ),
        (
            "failed to create shim: OCI runtime create failed: nvidia-container-cli: "
            "initialization error: nvml error: driver not loaded: unknown",
            "no GPU visible",
            "nvidia-smi",
        ),
        (
            'invalid mount config for type "bind": bind source path does not exist: /x',
            "cannot mount a folder",
            "host",
        ),
    ],
)
def test_engine_errors_become_user_errors(text: str, expected: str, fix_names: str) -> None:
    spec = RunSpec(label="run 1 mica-f32", argv=("p",), image="m:1", gpu="all")
    error = run_error(spec, _api_error(text))
    assert isinstance(error, UserError)
    assert expected in error.message and fix_names in (error.fix or "")
    if "GPU" in expected:
        assert TOOLKIT_URL in (error.fix or "")


def test_an_unknown_engine_refusal_is_told_in_the_engines_words() -> None:
    # no SDK exception reaches the user (kit.executors.docker.failures)
    spec = RunSpec(label="r", argv=("p",), image="m:1")
    error = run_error(spec, _api_error("something new"))
    assert isinstance(error, UserError)
    assert "something new" in error.message and "--resume" in (error.fix or "")


def test_a_program_the_image_does_not_hold_names_the_build_command() -> None:
    text = (
        "failed to create task for container: OCI runtime create failed: exec: "
        '"/opt/mica/bin/mica": stat /opt/mica/bin/mica: no such file or directory: unknown'
    )
    error = run_error(RunSpec(label="r", argv=("p",), image="m:1"), _api_error(text))
    assert "holds no program /opt/mica/bin/mica" in error.message
    assert "micakit images build --only mica --contender PROGRAM" in (error.fix or "")


def test_build_context_honours_dockerignore_and_adds_the_wheelhouse(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    (ctx / "kit").mkdir(parents=True)
    (ctx / "kit" / "a.py").write_text("a")
    (ctx / "results").mkdir()
    (ctx / "results" / "r.json").write_text("{}")
    (ctx / "wheelhouse").mkdir()
    (ctx / "wheelhouse" / "stale.whl").write_text("old")
    (ctx / ".dockerignore").write_text("# comment\nresults\n")
    (ctx / "Dockerfile.x").write_text("FROM scratch\n")
    wheels = tmp_path / "wh"
    wheels.mkdir()
    (wheels / "numpy-2-cp311.whl").write_text("w")
    (wheels / ".requirements").write_text("numpy")
    out = io.BytesIO()
    building._write_context(out, ctx / "Dockerfile.x", ctx, wheels)
    out.seek(0)
    with tarfile.open(fileobj=out) as tar:
        names = tar.getnames()
    assert sorted(names) == [
        ".dockerignore",
        "Dockerfile.x",
        "kit",
        "kit/a.py",
        "wheelhouse",
        "wheelhouse/numpy-2-cp311.whl",
    ]
    out = io.BytesIO()
    building._write_context(out, ctx / "Dockerfile.x", ctx, None)
    out.seek(0)
    with tarfile.open(fileobj=out) as tar:
        assert [n for n in tar.getnames() if n.startswith("wheelhouse")] == ["wheelhouse"]


def test_owner_alive_tells_a_live_series_from_a_crashed_one() -> None:
    me = owner_label()
    host, pid, start = me.split("/")
    assert owner_alive(me, [])
    assert not owner_alive(f"{host}/{pid}/{int(start) + 1}", [])  # a reused pid
    assert not owner_alive(f"{host}/999999999/1", [])
    assert owner_alive("0123456789ab/7/42", [ID.replace("91afdbd3cf1d", "0123456789ab")])
    assert not owner_alive("0123456789ab/7/42", [ID])
    assert not owner_alive(None, []) and not owner_alive("garbage", [])


class _RecordingAPI:
    """Just enough of the engine's API to see the measured container's spec, never started."""

    base_url = "http+docker://localhost"

    def __init__(self) -> None:
        self.created: list[dict] = []

    def create_host_config(self, **kw):
        return docker.types.HostConfig(version="1.44", **kw)  # the SDK's own checks

    def create_volume(self, *a, **kw) -> None:
        pass

    def create_container(self, image, **kw):
        self.created.append(kw)
        if kw.get("entrypoint", [""])[0] != "chown":
            raise docker.errors.APIError("the spec is all this test needs")
        return {"Id": "chown"}

    def start(self, *a, **kw) -> None:
        pass

    def wait(self, *a, **kw) -> dict:
        return {"StatusCode": 0}

    def remove_container(self, *a, **kw) -> None:
        pass


class _RecordingWatchdog:
    """What the kit tells the watchdog, kept, and no process started."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def watch(self, container_id: str) -> None:
        self.lines.append(f"+{container_id}")

    def forget(self, container_id: str) -> None:
        self.lines.append(f"-{container_id}")

    def close(self) -> None:
        pass


def test_a_measured_container_is_contained(tmp_path: Path) -> None:
    import os

    from kit.executors.base import Mount

    api = _RecordingAPI()
    client = type("Client", (), {"api": api})()
    ex = DockerExecutor(client, "s")
    ex._images_seen.add("micakit-mica:x")
    ex._host_paths = HostPaths(container_id=None)
    ex._take_reader = lambda: None  # type: ignore[method-assign]
    watched = _RecordingWatchdog()
    ex._watchdog = watched  # type: ignore[assignment]
    work = tmp_path / "work"
    work.mkdir()
    spec = RunSpec(
        "run 1",
        ("/opt/mica/mica",),
        mounts=(Mount("work", work, read_only=False),),
        image="micakit-mica:x",
    )
    with pytest.raises(UserError, match="the Docker engine refused"):
        ex.run(spec, tmp_path / "logs")
    chown, run = api.created
    host = run["host_config"]
    assert host["NetworkMode"] == "none"  # nothing downloaded or sent while measured
    assert host["CapDrop"] == ["ALL"] and "CapAdd" not in host
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["ReadonlyRootfs"] is True
    assert set(host["Tmpfs"]) == {"/tmp"}
    assert run["user"] == f"{os.getuid()}:{os.getgid()}"
    # writable only where a run writes: the work folder, the cache volume, /tmp
    writable = {m["Target"] for m in host["Mounts"] if not m.get("ReadOnly")}
    assert writable == {"/micakit/cache", "/micakit/work"}
    assert run["environment"]["HOME"] == "/tmp"
    # the cache volume is handed to the user by one unmeasured container that may only chown
    assert chown["host_config"]["CapAdd"] == ["CHOWN"] and chown["user"] == "0:0"
    # the watchdog was told of the container the moment it existed, and of its removal
    assert watched.lines == ["+chown", "-chown"]


def test_a_containers_death_by_signal_is_told_from_an_exit_status() -> None:
    # the engine says 128 + N for a death by signal N; the kit says -N, as subprocess does,
    # so it is never taken for an exit after an out-of-memory line (amendment 8)
    assert exit_code_of(139) == -11
    assert exit_code_of(137) == -9
    assert exit_code_of(1) == 1 and exit_code_of(0) == 0

"""A Docker engine as the Docker executor calls it, through the SDK's API client, for tests that
need no engine: images with labels, PATH and files; containers created, started, waited on,
read and removed; and any one call made to fail with an error of the SDK's own.

    engine = FakeEngine({"m:1": FakeImage(files={"/opt/mica/bin/mica": b"..."})})
    DockerExecutor(engine.client())             # every call counted in engine.calls
    FakeEngine(images, fail_at=3, error=e)      # the fourth call raises e, the rest answer

A run's container prints nothing and exits 0: its attach stream is a socket already closed.

What it copies: each method's name and arguments are docker-py's (docker/api/image.py,
build.py, container.py and volume.py: the API client's mixins), and a missing image, container
or file answers as a real engine does through the SDK: its status, the SDK's error class
(docker/errors.py, create_api_error_from_http_exception: a 404 that says "no such image" is
ImageNotFound, any other NotFound) and the engine's own words (Docker Engine 20.10 puts "no
such image: REF: " before them). tests/integration/test_docker.py holds those answers to a real
engine's wherever one answers.
"""

from __future__ import annotations

import io
import socket
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import docker.errors
import requests

LINK = "-> "  # a file's content that starts so is a symbolic link to the rest


@dataclass
class FakeImage:
    labels: dict[str, str] = field(default_factory=dict)
    env: tuple[str, ...] = ("PATH=/usr/local/bin:/usr/bin:/bin",)
    files: dict[str, bytes] = field(default_factory=dict)  # absolute path -> bytes (or LINK)
    image_id: str = "sha256:" + "1" * 64

    def tar(self, under: str) -> bytes | None:
        """The tar stream `docker cp` gives of `under`: names relative to its parent."""
        under = under.rstrip("/")
        parent = under.rsplit("/", 1)[0]
        chosen = {p: b for p, b in self.files.items() if p == under or p.startswith(under + "/")}
        if not chosen:
            return None
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for path, content in sorted(chosen.items()):
                info = tarfile.TarInfo(path[len(parent) + 1 :] if parent else path.lstrip("/"))
                if content.startswith(LINK.encode()):
                    info.type, info.linkname = tarfile.SYMTYPE, content[len(LINK) :].decode()
                    tar.addfile(info)
                else:
                    info.size = len(content)
                    tar.addfile(info, io.BytesIO(content))
        return buffer.getvalue()


def api_error(text: str, status: int = 500, cls: type = docker.errors.APIError) -> Exception:
    response = requests.Response()
    response.status_code = status
    response.raw = io.BytesIO(b"")  # a body to close, as the engine's answer has
    return cls(f"{status} Server Error", response, explanation=text)


class FakeApi:
    """The low-level client (`client.api`) the executor calls."""

    base_url = "http+docker://localhost"
    api_version = "1.43"

    def __init__(self, engine: FakeEngine) -> None:
        self.engine = engine

    def _call(self, name: str) -> None:
        e = self.engine
        e.calls.append(name)
        if e.fail_at is not None and len(e.calls) - 1 == e.fail_at:
            assert e.error is not None
            raise e.error

    def _image(self, ref: str) -> FakeImage:
        by_id = {i.image_id: i for i in self.engine.images.values()}
        image = self.engine.images.get(ref) or by_id.get(ref)
        if image is None:
            raise api_error(f"No such image: {ref}", 404, docker.errors.ImageNotFound)
        return image

    # images
    def inspect_image(self, ref: str) -> dict:
        self._call("inspect_image")
        image = self._image(ref)
        return {
            "Id": image.image_id,
            "RepoTags": [ref],
            "RepoDigests": [],
            "Size": 1000,
            "Config": {"Labels": dict(image.labels), "Env": list(image.env)},
            "RootFS": {"Layers": []},
        }

    def history(self, ref: str) -> list[dict]:
        self._call("history")
        return [{"Id": self._image(ref).image_id, "Size": 1000, "CreatedBy": "COPY . /"}]

    def pull(self, repository: str, tag: str | None = None, **_: object) -> Iterator[dict]:
        self._call("pull")
        return iter([{"status": f"Pulled {repository}:{tag}"}])

    def build(self, tag: str | None = None, **_: object) -> Iterator[dict]:
        self._call("build")
        self.engine.images[str(tag)] = FakeImage(image_id="sha256:" + "2" * 64)
        return iter(
            [{"stream": "Step 1/1 : FROM scratch\n"}, {"aux": {"ID": "sha256:" + "2" * 64}}]
        )

    def tag(self, image: str, repository: str, tag: str | None = None, **_: object) -> bool:
        self._call("tag")
        self.engine.images[f"{repository}:{tag}"] = self._image(image)
        return True

    def push(self, repository: str, tag: str | None = None, **_: object) -> Iterator[dict]:
        self._call("push")
        return iter([{"status": "Pushed"}, {"aux": {"Tag": tag, "Digest": "sha256:" + "3" * 64}}])

    # containers
    def create_host_config(self, **kwargs: object) -> dict:
        return dict(kwargs)  # the SDK computes it; no call reaches the engine

    def create_container(self, image: str, **kwargs: object) -> dict:
        self._call("create_container")
        self._image(image)
        cid = f"{len(self.engine.created) + 1:064x}"  # never an id again, as the engine
        self.engine.containers[cid] = image
        self.engine.created[cid] = dict(kwargs)
        return {"Id": cid}

    def _container(self, cid: str) -> str:
        if cid not in self.engine.containers:
            raise api_error(f"No such container: {cid}", 404, docker.errors.NotFound)
        return self.engine.containers[cid]

    def attach_socket(self, cid: str, params: object = None) -> socket.socket:
        self._call("attach_socket")
        self._container(cid)
        ours, theirs = socket.socketpair()
        theirs.close()  # the program printed nothing, and its streams closed
        return ours

    def start(self, cid: str) -> None:
        self._call("start")
        self._container(cid)

    def wait(self, cid: str, timeout: float | None = None) -> dict:
        self._call("wait")
        self._container(cid)
        return {"StatusCode": 0}

    def stop(self, cid: str, timeout: int | None = None) -> None:
        self._call("stop")

    def inspect_container(self, cid: str) -> dict:
        self._call("inspect_container")
        image = self._container(cid)
        return {
            "Id": cid,
            "Image": self._image(image).image_id,
            "State": {"ExitCode": 0, "OOMKilled": False},
            "Config": {"Image": image, "Labels": {}},
            "HostConfig": {},
            "Mounts": [],
        }

    def remove_container(self, cid: str, force: bool = False, v: bool = False) -> None:
        self._call("remove_container")
        self.engine.containers.pop(cid, None)

    def containers(self, all: bool = False, filters: Mapping | None = None) -> list[dict]:
        self._call("containers")
        left = {"Id": "f" * 64, "Labels": {"micakit.series": "s", "micakit.owner": "gone/1/1"}}
        return [left] if all else []

    def export(self, cid: str, chunk_size: int | None = None) -> Iterator[bytes]:
        self._call("export")
        image = self._image(self._container(cid))
        return iter([image.tar("/") or b""])

    def get_archive(self, cid: str, path: str, chunk_size: int | None = None) -> tuple:
        self._call("get_archive")
        data = self._image(self._container(cid)).tar(path)
        if data is None:
            raise api_error(f"Could not find the file {path} in container {cid}", 404,
                            docker.errors.NotFound)  # fmt: skip
        return iter([data]), {"name": path.rsplit("/", 1)[-1]}

    # volumes: as docker.api.volume.VolumeApiMixin (create, list with a label filter, remove)
    def create_volume(self, name: str, labels: dict | None = None, **_: object) -> dict:
        self._call("create_volume")
        self.engine.volumes[name] = dict(labels or {})
        return {"Name": name, "Labels": labels}

    def volumes(self, filters: dict | None = None) -> dict:
        self._call("volumes")
        wanted = (filters or {}).get("label")
        key, _, value = (wanted or "").partition("=")
        chosen = [n for n, labels in self.engine.volumes.items()
                  if not wanted or labels.get(key) == value]  # fmt: skip
        return {"Volumes": [{"Name": n, "Driver": "local"} for n in chosen], "Warnings": None}

    def remove_volume(self, name: str, force: bool = False) -> None:
        self._call("remove_volume")
        self.engine.volumes.pop(name, None)


class FakeClient:
    """The high-level client: `api`, and what the engine says of itself."""

    def __init__(self, engine: FakeEngine) -> None:
        self.api = FakeApi(engine)
        self.engine = engine

    def version(self) -> dict:
        self.api._call("version")
        return {"Version": "27.0.0", "ApiVersion": "1.43", "KernelVersion": "6.1"}

    def info(self) -> dict:
        self.api._call("info")
        return {"Name": "fake-engine", "OperatingSystem": "Debian", "Driver": "overlay2"}


@dataclass
class FakeEngine:
    images: dict[str, FakeImage] = field(default_factory=dict)
    fail_at: int | None = None  # the call (0-based, in `calls`' order) that raises `error`
    error: BaseException | None = None
    calls: list[str] = field(default_factory=list)
    containers: dict[str, str] = field(default_factory=dict)  # id -> image
    volumes: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> labels
    created: dict[str, dict] = field(default_factory=dict)  # id -> create_container's arguments

    def client(self) -> FakeClient:
        return FakeClient(self)

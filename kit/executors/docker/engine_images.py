"""The Docker executor's images (§8): looked up, pulled, read and measured, apart from the
containers that run from them (`executor`), as docker-py keeps images apart from containers."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import docker

from kit.errors import UserError
from kit.executors.base import Images
from kit.executors.docker import inventory, registries
from kit.executors.docker.building import image_id
from kit.executors.docker.failures import guarded
from kit.executors.docker.footprint import BASE, BASE_LABEL, JSON_NAME, footprint_ratio


class DockerImages(Images):
    """The images of one Docker engine. `own_labels` labels a container the kit creates to read
    an image (its series' own, which a later start's sweep removes should it be left);
    `container` names the container the kit itself runs in, if any (the runner image's)."""

    def __init__(
        self,
        client: docker.DockerClient,
        own_labels: Callable[[], dict[str, str]],
        container: Callable[[], str | None],
    ) -> None:
        self.client = client
        self._own_labels = own_labels
        self._container = container

    @guarded("looking up an image")
    def id_of(self, ref: str) -> str | None:
        return image_id(self.client, ref)

    @guarded("reading an image's id and digests")
    def info(self, ref: str) -> dict:
        info = self.client.api.inspect_image(ref)
        return {
            "image": ref,
            "image_id": info["Id"],
            "repo_digests": info.get("RepoDigests") or [],
            "size_bytes": info.get("Size"),
        }

    @guarded("reading an image's labels")
    def labels(self, ref: str) -> dict[str, str]:
        return dict((self.client.api.inspect_image(ref).get("Config") or {}).get("Labels") or {})

    @guarded("reading what an image holds")
    def files(self, ref: str, paths: Sequence[str]) -> dict[str, str]:
        return inventory.image_files(self.client, ref, paths, self._own_labels())

    @guarded("pulling an image")
    def pull(self, ref: str, on_line: Callable[[str], None] | None = None) -> str | None:
        if not registries.names_registry(ref):
            return None  # a bare name would be looked for on Docker Hub: never guessed
        if on_line is not None:
            on_line(f"pulling {ref}")
        return registries.pull(self.client, ref, on_line)

    @guarded("reading the runner image's id")
    def runner(self) -> dict:
        container = self._container()
        if container is None:
            return {}
        # by id: the name the container was started with may name another image by now, and
        # a resume in the same image under another name (tag or digest) is the same image
        return self.info(self.client.api.inspect_container(container)["Image"])

    def footprint(self, ref: str, out_dir: Path, say: Callable[[str], None]) -> None:
        if not (out_dir / JSON_NAME).exists():
            say(f"footprint of {ref} (§8)")
            self._measure(ref, out_dir)
        record = json.loads((out_dir / JSON_NAME).read_text("utf-8"))
        base = record.get("labels", {}).get(BASE_LABEL)
        if base and not (out_dir / BASE / JSON_NAME).exists():
            # §8 told whole: the base's file list shows what the image adds beyond it
            say(f"footprint of {base}, the base of {ref} (§8)")
            try:
                self._measure(base, out_dir / BASE)
            except UserError as e:  # a base no longer on the engine: the report says so
                say(f"{base}: {e.message}; what {ref} adds is not told")

    @guarded("measuring an image's footprint (§8)")
    def _measure(self, ref: str, out_dir: Path) -> None:
        inventory.footprint(self.client, ref, out_dir)

    def footprint_ratio(self, contender: Mapping, pytorch: Mapping) -> dict:
        return footprint_ratio(contender, pytorch)

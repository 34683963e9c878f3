"""Image registries: push the kit's images to one, and pull an image that names one.

A registry digest (`REPOSITORY@sha256:...`) names an image's content wherever it is pulled, so a
release lists its images by digest and rerun.sh runs them by it (§3 rule 7: anyone can rerun
from the container). Credentials are the engine client's own: `docker login HOST` (or
docker/login-action in CI) writes them to ~/.docker/config.json, which the SDK reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import docker
import docker.errors

from kit.errors import UserError

# a registry and its namespace: HOST[:PORT][/PATH...], the path in the lower case
# that image references require (docker/distribution's reference grammar)
_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY = re.compile(rf"{_HOST}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

_LOGIN_FIX = (
    "log in to the registry first (`docker login {host}`; in GitHub Actions, "
    "docker/login-action with the job's GITHUB_TOKEN and `packages: write`), then again"
)
# a registry's answer, or the engine's, where credentials are missing or not enough: the engine
# says "no basic auth credentials" when it has none for the host, ghcr.io "unauthenticated"
_LOGIN_WORDS = (
    "unauthorized", "unauthenticated", "denied", "authentication required",
    "no basic auth credentials", "401",
)  # fmt: skip
_REACH_FIX = (
    "check the registry's address ({host}); a registry served over plain http must be on "
    "127.0.0.1 or listed in the engine's `insecure-registries` (/etc/docker/daemon.json)"
)


def check_registry(registry: str) -> str:
    """`registry` as image references take it, e.g. `ghcr.io/owner` or `127.0.0.1:5000/ci`."""
    given = registry
    if "://" in registry:
        raise UserError(
            f"--registry {given} has a scheme",
            f"name the registry without one: --registry {registry.split('://', 1)[1]}",
        )
    registry = registry.rstrip("/")
    host, _, path = registry.partition("/")
    if path != path.lower() and _REGISTRY.fullmatch(f"{host}/{path.lower()}"):
        raise UserError(
            f"--registry {given}: image names are lower case",
            f"--registry {host}/{path.lower()} (GitHub's owner names are lower-cased there too)",
        )
    if not _REGISTRY.fullmatch(registry):
        raise UserError(
            f"--registry {given} is not a registry and namespace",
            "name it as HOST[:PORT]/NAMESPACE, e.g. --registry ghcr.io/OWNER",
        )
    return registry


def check_tag(tag: str) -> str:
    if not _TAG.fullmatch(tag):
        raise UserError(
            f"{tag!r} is not an image tag",
            "a tag is up to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'",
        )
    return tag


def names_registry(ref: str) -> bool:
    """Whether an image reference names its registry (`host.domain/...`, `host:port/...`,
    `localhost/...`) or a digest: what the engine can pull without guessing Docker Hub."""
    first, slash, _ = ref.partition("/")
    named = bool(slash) and ("." in first or ":" in first or first == "localhost")
    return named or "@sha256:" in ref


def push(
    client: docker.DockerClient,
    local_ref: str,
    repository: str,
    tags: Iterable[str],
    on_line: Callable[[str], None] | None = None,
) -> str:
    """Push the image `local_ref` names as `repository:TAG` for every tag; its digest.

    Every tag names the same image, so the registry gives each the same manifest digest."""
    try:
        image_id = client.api.inspect_image(local_ref)["Id"]
    except docker.errors.ImageNotFound:
        raise UserError(
            f"no image {local_ref} on this Docker engine",
            "build it first: `micakit images build` (scripts/build-images.sh in a checkout)",
        ) from None
    digest = ""
    for tag in tags:
        client.api.tag(image_id, repository, tag)
        if on_line is not None:
            on_line(f"pushing {repository}:{tag} ({image_id[:19]})")
        got = _push_one(client, repository, tag, on_line)
        if digest and got != digest:  # pragma: no cover - the registry's own contract
            raise RuntimeError(f"{repository}: tags of one image with two digests")
        digest = got
    return digest


def _push_one(
    client: docker.DockerClient,
    repository: str,
    tag: str,
    on_line: Callable[[str], None] | None,
) -> str:
    host = repository.partition("/")[0]
    digest, error = "", None
    try:
        stream = client.api.push(repository, tag=tag, stream=True, decode=True)
        # read to the end whatever comes, so the response closes with its stream
        for item in stream:
            if "error" in item and error is None:
                error = str(item.get("errorDetail", {}).get("message") or item["error"])
            elif "Digest" in (item.get("aux") or {}):
                digest = str(item["aux"]["Digest"])
            elif on_line is not None and item.get("status") and "progressDetail" not in item:
                on_line(str(item["status"]))  # a layer's state, not its progress bar
            elif on_line is not None and item.get("status") in ("Pushed", "Layer already exists"):
                on_line(f"{item.get('id', '')}: {item['status']}")
    except docker.errors.APIError as e:
        error = str(e.explanation or e)
    if error is not None:
        raise _refused(f"{repository}:{tag}", host, error)
    if not _DIGEST.fullmatch(digest):  # pragma: no cover - every registry answers with one
        raise RuntimeError(f"the push of {repository}:{tag} named no digest")
    return digest


def _refused(what: str, host: str, error: str) -> UserError:
    lower = error.lower()
    if any(w in lower for w in _LOGIN_WORDS):
        return UserError(
            f"{host} refused the push of {what}: {error}", _LOGIN_FIX.format(host=host)
        )
    if any(w in lower for w in ("connection refused", "no such host", "dial tcp", "http response")):
        return UserError(f"cannot push {what}: {error}", _REACH_FIX.format(host=host))
    return UserError(f"cannot push {what}: {error}", "the registry's message above says why")


def pull(
    client: docker.DockerClient, ref: str, on_line: Callable[[str], None] | None = None
) -> str:
    """Pull the image `ref` names (a tag or a digest) from its registry; the image's id."""
    host = ref.partition("/")[0]
    repository, tag, digest = _split(ref)
    error = None
    try:
        for item in client.api.pull(repository, tag=digest or tag, stream=True, decode=True):
            if "error" in item and error is None:
                error = str(item.get("errorDetail", {}).get("message") or item["error"])
            elif on_line is not None and item.get("status") and "progressDetail" not in item:
                on_line(str(item["status"]))
    except docker.errors.APIError as e:
        error = str(e.explanation or e)
    if error is not None:
        lower = error.lower()
        if any(w in lower for w in _LOGIN_WORDS):
            fix = f"log in to {host} (`docker login {host}`), or pull it yourself"
        elif any(w in lower for w in ("not found", "unknown manifest", "manifest unknown")):
            fix = "check the image's name and tag (a release lists its images' digests)"
        else:
            fix = _REACH_FIX.format(host=host)
        raise UserError(f"cannot pull {ref}: {error}", fix)
    return str(client.api.inspect_image(ref)["Id"])


def _split(ref: str) -> tuple[str, str, str]:
    """(repository, tag, digest) of an image reference; tag "latest" where it names none."""
    repository, _, digest = ref.partition("@")
    last = repository.rpartition("/")[2]
    if ":" in last:
        repository, _, tag = repository.rpartition(":")
    else:
        tag = "latest"
    return repository, tag, digest

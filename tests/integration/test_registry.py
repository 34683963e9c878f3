"""Images a user can pull: `micakit images push` to a real registry, then a series from the
pulled runner image, as someone who never built them runs it.

Debian's `docker-registry` (the CNCF distribution registry) serves on 127.0.0.1, which the
engine allows over plain http. Skipped, with the reason, where it or an engine is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import docker.errors
import pytest

from kit.cli.assemble import series_id
from kit.executors.docker import building, registries
from kit.executors.docker.containers import LABEL_RUN, LABEL_SERIES
from kit.report import sbom_tie
from tests.conftest import ROOT, TEXT_INPUT, records
from tests.integration.conftest import attestations, remove_cache_volumes

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def run_in(client, image: str, args: list[str], volumes: dict) -> str:
    """`docker run --rm IMAGE ARGS` as the README runs the runner (as the calling user, with
    the engine's socket); its output, stdout then stderr."""
    sock = "/var/run/docker.sock"
    container = client.containers.create(
        image,
        args,
        volumes={sock: {"bind": sock, "mode": "rw"}, **volumes},
        user=f"{os.getuid()}:{os.getgid()}",
        group_add=[str(os.stat(sock).st_gid)],
    )
    try:
        container.start()
        status = container.wait(timeout=900)["StatusCode"]
        out = container.logs(stdout=True, stderr=False).decode()
        err = container.logs(stdout=False, stderr=True).decode()
    finally:
        container.remove(force=True)
    assert status == 0, f"{args[:1]} exited {status}:\n{err[-4000:]}"
    return out + err


def push(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "images", "push", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def test_what_cannot_be_pushed_is_the_users_to_fix(client, built, tmp_path_factory, tmp_path):
    tag, _ = built
    nothing = push("--registry", "127.0.0.1:1/none", "--tag", f"{tag}-never-built")
    assert nothing.returncode == 2, nothing.stderr
    assert "no image of micakit is built under the tag" in nothing.stderr
    assert "micakit images build" in nothing.stderr
    # port 1: nothing listens there
    # an image without its provenance statement is refused before anything is pushed
    unready = push(
        *("--registry", "127.0.0.1:1/none", "--tag", tag, "--only", "mica"),
        *("--attestations", str(tmp_path / "none")),
    )
    assert unready.returncode == 2, unready.stderr
    assert "no provenance statement" in unready.stderr and "pushing" not in unready.stderr
    assert "micakit images build --attestations" in unready.stderr
    unreachable = push(
        *("--registry", "127.0.0.1:1/none", "--tag", tag, "--only", "mica"),
        *("--attestations", str(attestations(tmp_path_factory))),
    )
    assert unreachable.returncode == 2, unreachable.stderr
    assert "cannot push 127.0.0.1:1/none/micakit-mica" in unreachable.stderr
    assert "fix: check the registry's address" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr


def test_the_runner_containers_end_ends_the_run_it_measures(client, built, fast_protocol, tmp_path):
    """`docker kill` of the runner container, whose PID 1 is the kit: its watchdog dies with
    it, but the measured container shares its process namespace, so the measured program ends
    at once too and nothing keeps training on the card."""
    tag, program = built
    sock = "/var/run/docker.sock"
    (tmp_path / "results").mkdir()
    fake = {"step_ms": {"*": 200.0}}  # a run of tens of seconds
    # the series' own containers, by its label: a results folder of its own in the runner, as
    # another series (another run of this test too) may use the same engine meanwhile
    out = f"/results/killed-{uuid.uuid4().hex[:8]}"
    own = [f"{LABEL_SERIES}={series_id(Path(out))}", LABEL_RUN]
    runner = client.containers.create(
        f"micakit:{tag}",
        [
            *("series", "--out", out),
            *("--protocol", f"/inputs/protocol/{fast_protocol.name}"),
            *("--device", "cpu", "--full-cpu", "--executor", "docker", "--no-pytorch"),
            *("--contender", f"/inputs/contender/{program.name}"),
            *("--mica-image", f"micakit-mica:{tag}"),
            *("--model", "shakespeare-char", "--precision", "float32"),
            *("--input", f"/inputs/text/{TEXT_INPUT.name}"),
            *("--env", f"MICAKIT_FAKE={json.dumps(fake)}"),
        ],
        volumes={
            sock: {"bind": sock, "mode": "rw"},
            str(tmp_path / "results"): {"bind": "/results", "mode": "rw"},
            str(fast_protocol.parent): {"bind": "/inputs/protocol", "mode": "ro"},
            str(program.parent): {"bind": "/inputs/contender", "mode": "ro"},
            str(TEXT_INPUT.parent): {"bind": "/inputs/text", "mode": "ro"},
        },
        user=f"{os.getuid()}:{os.getgid()}",
        group_add=[str(os.stat(sock).st_gid)],
    )
    measured: list[str] = []
    try:
        runner.start()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not measured:
            runner.reload()
            assert runner.status == "running", runner.logs().decode()[-3000:]
            # a timed run under way (the version probe's short container came and went first)
            if list((tmp_path / out.lstrip("/")).glob("runs/*/attempt-1/stdout.log")):
                measured = [c["Id"] for c in client.api.containers(filters={"label": own})]
            time.sleep(0.5)
        assert measured, "no measured container came up"
        info = client.api.inspect_container(measured[-1])
        assert info["HostConfig"]["PidMode"] == f"container:{runner.id}"
        time.sleep(1.0)  # in the middle of the run
        runner.kill()
        killed = time.monotonic()
        running = True
        while running and time.monotonic() - killed < 10.0:
            try:
                running = client.api.inspect_container(measured[-1])["State"]["Running"]
            except docker.errors.NotFound:
                running = False  # ended, and already removed (the watchdog may win the race)
            time.sleep(0.2)
        assert not running, "the measured program outlived the runner container"
    finally:
        runner.remove(force=True)
        for cid in measured:  # what the next start's sweep would remove
            try:
                client.api.remove_container(cid, force=True)
            except docker.errors.NotFound:
                pass
        remove_cache_volumes(client, series_id(Path(out)))  # kept by the stopped series


def test_push_remove_pull_by_digest_and_run_a_series_from_the_runner(
    client, registry, built, fast_protocol, tmp_path, tmp_path_factory
):
    tag, program = built
    namespace = f"{registry}/micakit-test"
    digests = tmp_path / "digests.json"
    attached = attestations(tmp_path_factory)
    done = push(
        *("--registry", namespace, "--tag", tag, "--also-tag", "latest"),
        *("--digests", str(digests), "--attestations", str(attached)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout)
    assert record == json.loads(digests.read_text())
    assert set(record["images"]) == {"mica", "runner"}  # every image built under the tag
    runner, mica = record["images"]["runner"], record["images"]["mica"]
    assert runner["repository"] == f"{namespace}/micakit"
    assert runner["tags"] == [tag, "latest"]
    assert runner["pinned"] == f"{namespace}/micakit@{runner['digest']}"
    # the registry serves the manifest under both tags, by the digest the push recorded
    for name in (tag, "latest"):
        url = f"http://{registry}/v2/micakit-test/micakit/manifests/{name}"
        accept = "application/vnd.docker.distribution.manifest.v2+json"
        req = urllib.request.Request(url, headers={"Accept": accept})
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.headers["Docker-Content-Digest"] == runner["digest"]
    # beside each image, its statement (now with the registry digest) and its SBOM, named
    for image in (runner, mica):
        files = image["attachments"]
        statement = json.loads((attached / files["provenance"]).read_text())
        # the image as built, then every repository it was pushed to (the session's images
        # are pushed by the cloud machine's test too): this push's among them
        local, *pushed = statement["subject"]
        assert local == {"name": image["local"], "digest": {"sha256": image["image_id"][7:]}}
        assert {"name": image["repository"], "digest": {"sha256": image["digest"][7:]}} in pushed
        sbom = json.loads((attached / files["sbom"]).read_text())
        assert sbom["metadata"]["component"]["version"] == image["image_id"]
        measured = attached / files["footprint"]
        assert (measured / "sbom.cdx.json").read_bytes() == (attached / files["sbom"]).read_bytes()
        assert sbom_tie.folder_differences(measured, attached) == []

    # as on a machine that never built them: every local name of both images gone
    for image in (runner, mica):
        client.api.remove_image(image["image_id"], force=True)
        assert building.image_id(client, image["image_id"]) is None
    # the runner pulled by its digest is the image that was pushed; the Mica image is left to
    # the series, which pulls a side's image that names its registry
    assert registries.pull(client, runner["pinned"]) == runner["image_id"]
    # the pulled image is the one its statement and its SBOM name
    statement = json.loads((attached / runner["attachments"]["provenance"]).read_text())
    assert statement["subject"][0]["digest"]["sha256"] == runner["image_id"].split(":")[1]
    assert building.image_id(client, mica["pinned"]) is None

    (tmp_path / "results").mkdir()
    fake = {"step_ms": {"*": 10.0}, "state": "/micakit/cache/state"}
    volumes = {
        str(tmp_path / "results"): {"bind": "/results", "mode": "rw"},
        str(fast_protocol.parent): {"bind": "/inputs/protocol", "mode": "ro"},
        str(program.parent): {"bind": "/inputs/contender", "mode": "ro"},
        str(TEXT_INPUT.parent): {"bind": "/inputs/text", "mode": "ro"},
    }
    said = run_in(
        client,
        runner["pinned"],
        [
            *("series", "--out", "/results/pulled"),
            *("--protocol", f"/inputs/protocol/{fast_protocol.name}"),
            *("--device", "cpu", "--full-cpu", "--executor", "docker", "--no-pytorch"),
            *("--contender", f"/inputs/contender/{program.name}", "--mica-image", mica["pinned"]),
            *("--model", "shakespeare-char", "--precision", "float32"),
            *(
                "--input",
                f"/inputs/text/{TEXT_INPUT.name}",
                "--env",
                f"MICAKIT_FAKE={json.dumps(fake)}",
            ),
        ],
        volumes,
    )
    assert f"pulling {mica['pinned']}" in said
    said = run_in(client, runner["pinned"], ["verify", "/results/pulled"], volumes)
    assert "every published number matches" in said

    out = tmp_path / "results" / "pulled"
    timed = [r for r in records(out) if r["kind"] in ("discarded", "timed")]
    # every run ran to its end; on a loaded machine a run the two clocks disagree on is void
    assert len(timed) == 6 and "ok" in {r["status"] for r in timed}
    assert {r["status"] for r in timed} <= {"ok", "void"}
    assert {r["executor"] for r in timed} == {"docker"}
    # the series recorded both images with their registry digests, and rerun.sh runs them by it
    images = json.loads((out / "versions.json").read_text())["images"]
    assert images["runner"]["image_id"] == runner["image_id"]
    assert runner["pinned"] in images["runner"]["repo_digests"]
    assert images["contender"]["image_id"] == mica["image_id"]
    assert mica["pinned"] in images["contender"]["repo_digests"]
    rerun = (out / "rerun.sh").read_text()
    assert f"IMAGE=${{IMAGE:-{runner['pinned']}}}" in rerun
    assert f"MICA_IMAGE=${{MICA_IMAGE:-{mica['pinned']}}}" in rerun

    # README: with no clone, the contender's image is built by the pulled runner's own
    # `images build`, through the engine's socket
    base = os.environ.get("MICAKIT_BASE_IMAGE", "micakit-base:bookworm")
    mine = f"inrunner-{uuid.uuid4().hex[:8]}"
    said = run_in(
        client,
        runner["pinned"],
        [
            *("images", "build", "--only", "mica", "--base", base, "--tag", mine),
            *("--contender", f"/inputs/contender/{program.name}"),
        ],
        volumes,
    )
    image_id = building.image_id(client, f"micakit-mica:{mine}")
    try:
        assert image_id is not None and image_id in said
        assert client.api.inspect_image(image_id)["Config"]["Labels"]["org.micakit.side"] == "mica"
    finally:
        if image_id is not None:
            client.api.remove_image(image_id, force=True)

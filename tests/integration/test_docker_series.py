"""A series of the fake contender inside containers, end to end, on a real Docker engine.

The fake contender travels as one executable zip (its code and fakelib), the way a compiled
program is one file; the Mica image is built by `micakit images build` on the local base image.
Skipped, with the reason, where no engine answers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import docker.errors
import pytest

from kit.cli.assemble import series_id
from kit.executors.docker.containers import (
    LABEL_OWNER,
    LABEL_RUN,
    LABEL_SERIES,
    owner_label,
)
from kit.executors.docker.kit_images import PROGRAM_LABEL, PROGRAM_SHA256_LABEL
from tests.conftest import ROOT, TEXT_INPUT, records
from tests.integration.conftest import base_image, fake_contender_program, remove_cache_volumes

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def mica_image(client, tmp_path_factory) -> tuple[str, Path]:
    base = base_image(client)
    program = fake_contender_program(tmp_path_factory)
    tag = f"e2e-{uuid.uuid4().hex[:8]}"
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "run.py"),
            "images",
            "build",
            "--only",
            "mica",
            "--contender",
            str(program),
            "--base",
            base,
            "--tag",
            tag,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    ref = f"micakit-mica:{tag}"
    yield ref, program
    client.api.remove_image(ref, force=True)


def series_args(out: Path, protocol: Path, program: Path, image: str, fake: dict) -> list[str]:
    return [
        sys.executable,
        str(ROOT / "run.py"),
        "series",
        "--out",
        str(out),
        "--protocol",
        str(protocol),
        "--device",
        "cpu",
        "--full-cpu",
        "--executor",
        "docker",
        "--no-pytorch",
        "--contender",
        str(program),
        "--mica-image",
        image,
        "--model",
        "shakespeare-char",
        "--precision",
        "float32",
        "--input",
        str(TEXT_INPUT),
        "--env",
        "MICAKIT_FAKE=" + json.dumps(fake),
    ]


def own_label(out: Path) -> str:
    """The label every container of the series writing `out` carries, and no other series':
    another series may run its containers on the same engine meanwhile."""
    return f"{LABEL_SERIES}={series_id(out)}"


def leftovers(client, out: Path) -> list:
    return client.api.containers(all=True, filters={"label": own_label(out)})


def left_after(client, out: Path, wait_s: float = 20.0) -> set[str]:
    """The series' containers still there; the engine removes a container after the call that
    asked it to has returned, so a loaded machine is given a moment."""
    deadline = time.monotonic() + wait_s
    while True:
        left = {c["Id"] for c in leftovers(client, out)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def test_contender_series_in_containers_with_an_out_of_memory_run(
    client, mica_image, fast_protocol, tmp_path
):
    image, program = mica_image
    out = tmp_path / "r"
    # the fake counts its starts in its side's cache volume, which every run of that side mounts
    fake = {"step_ms": {"*": 3.0}, "events": {"mica#4": "oom"}, "state": "/micakit/cache/state"}
    done = subprocess.run(
        series_args(out, fast_protocol, program, image, fake),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    recs = records(out)
    statuses = [(r["kind"], r["status"]) for r in recs]
    assert ("timed", "out of memory") in statuses
    ok = [r for r in recs if r["status"] == "ok" and r["kind"] in ("discarded", "timed")]
    assert len(ok) == 3  # discarded + rounds 1 and 2; the 4th start ran out of memory
    assert all(r["executor"] == "docker" for r in recs if r["kind"] != "profile")
    # each run's container record: read before the container was removed
    assert (out / ok[0]["log_dir"] / "container.json").exists()
    assert left_after(client, out) == set()
    assert "out of memory" in (out / "report.md").read_text()
    # §8: the measured image's size and file list, read from the engine
    fp = json.loads((out / "footprint" / "contender" / "footprint.json").read_text())
    assert fp["size_bytes"] > 0
    files = (out / "footprint" / "contender" / "files.tsv").read_text()
    assert f"opt/mica/bin/{program.name}" in files
    images = json.loads((out / "versions.json").read_text())["images"]
    assert images["contender"]["image_id"].startswith("sha256:")


def test_a_series_naming_another_program_than_its_image_stops_before_any_run(
    client, mica_image, fast_protocol, tmp_path
):
    """The image was built from one program, the series names another: exit 2 before any run,
    with the command that builds the right image; nothing is lost, for nothing ran."""
    image, program = mica_image
    labels = client.api.inspect_image(image)["Config"]["Labels"]
    assert labels[PROGRAM_LABEL] == f"/opt/mica/bin/{program.name}"
    assert labels[PROGRAM_SHA256_LABEL] == hashlib.sha256(program.read_bytes()).hexdigest()
    other = tmp_path / "mica"
    other.write_bytes(program.read_bytes() + b"\n# another build\n")
    other.chmod(0o755)
    out = tmp_path / "r"
    done = subprocess.run(
        series_args(out, fast_protocol, other, image, {"step_ms": {"*": 3.0}}),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "does not hold the program --contender names" in done.stderr
    tag = image.partition(":")[2]
    build = f"micakit images build --only mica --contender {other} --protocol {fast_protocol}"
    assert f"{build} --tag {tag}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (out / "runs.jsonl").exists()
    assert left_after(client, out) == set()


def build_mica(client, program: Path, tag: str) -> str:
    """`micakit images build --only mica` of `program` under `tag`; the image's id."""
    args = ["images", "build", "--only", "mica", "--contender", str(program), "--tag", tag]
    out = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args, "--base", base_image(client)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return client.api.inspect_image(f"micakit-mica:{tag}")["Id"]


def test_a_series_whose_image_was_rebuilt_resumes_once_its_own_image_is_back(
    client, mica_image, fast_protocol, tmp_path
):
    """The image a series started with is rebuilt from another program under its name: the
    resume is refused before any run, naming the `docker tag` that brings the series' own image
    back; done, the series goes on with every finished run kept."""
    _, program = mica_image
    tag = f"e2e-{uuid.uuid4().hex[:8]}"
    ref = f"micakit-mica:{tag}"
    first = build_mica(client, program, tag)
    other = tmp_path / program.name
    other.write_bytes(program.read_bytes() + b"\n# another build\n")
    out = tmp_path / "r"
    fake = {
        "step_ms": {"*": 3.0},
        "events": {"mica#2": "crash"},
        "state": "/micakit/cache/state",
    }
    rebuilt = None
    try:
        args = series_args(out, fast_protocol, program, ref, fake)
        done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 3, done.stderr[-3000:]
        kept = [r["run_id"] for r in records(out) if r["status"] == "ok"]
        assert kept == [0]
        rebuilt = build_mica(client, other, tag)
        resume = [sys.executable, str(ROOT / "run.py"), "series", "--resume", str(out)]
        refused = subprocess.run(resume, capture_output=True, text=True, cwd=ROOT)
        assert refused.returncode == 2, refused.stderr[-3000:]
        assert "does not hold the program --contender names" in refused.stderr
        assert f"`docker tag {first} {ref}`" in refused.stderr
        client.api.tag(first, "micakit-mica", tag)  # the fix, as the user follows it
        for _ in range(3):
            resumed = subprocess.run(resume, capture_output=True, text=True, cwd=ROOT)
            # a run voided where a loaded engine handed its lines on in bursts (§5): the resume
            # the kit names runs it again, as a user would
            if not (resumed.returncode == 3 and "its output is buffered" in resumed.stderr):
                break
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert [r["run_id"] for r in records(out)].count(0) == 1  # run 0 never ran again
    finally:
        # by name: the first build is the module's image itself (the same program and base)
        client.api.remove_image(ref)
        if rebuilt is not None:
            with contextlib.suppress(docker.errors.APIError):
                client.api.remove_image(rebuilt, force=True)


@pytest.fixture
def stopped_out(client, tmp_path):
    """The results folder of a series the test stops; its cache volume, which a stopped series
    keeps for its resume, removed afterwards."""
    out = tmp_path / "r"
    yield out
    remove_cache_volumes(client, series_id(out))


def start_series(mica_image, protocol: Path, out: Path) -> subprocess.Popen:
    """A Docker series of runs of tens of seconds, in a session of its own."""
    image, program = mica_image
    return subprocess.Popen(
        series_args(out, protocol, program, image, {"step_ms": {"*": 50.0}}),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for_a_run(client, proc: subprocess.Popen, out: Path) -> None:
    """Until a run's container is up and its stamped log begun, then a second more: the middle
    of a run."""
    deadline = time.monotonic() + 120
    running: list = []
    while time.monotonic() < deadline and proc.poll() is None:
        running = client.api.containers(filters={"label": [own_label(out), LABEL_RUN]})
        if running and list(out.glob("runs/*/attempt-1/stdout.log")):
            break
        time.sleep(0.2)
    assert running, "no run container came up"
    time.sleep(1.0)  # in the middle of the run


def test_ctrl_c_mid_run_leaves_no_container(
    client, mica_image, fast_protocol, stopped_out, sigint_default
):
    proc = start_series(mica_image, fast_protocol, stopped_out)
    wait_for_a_run(client, proc, stopped_out)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    assert left_after(client, stopped_out) == set()


def test_kill_9_of_the_kit_removes_its_container_without_a_resume(
    client, mica_image, fast_protocol, stopped_out
):
    """The kit's own death: its watchdog removes the running container within seconds, and only
    its own: another series' container on the same engine is left running."""
    proc = start_series(mica_image, fast_protocol, stopped_out)
    # another live series (its owner is this test's process, so no series' sweep takes it for
    # a crashed one's), whose container starts while this series runs
    other = client.api.create_container(
        base_image(client),
        command=["sleep", "600"],
        labels={
            LABEL_SERIES: f"other-{uuid.uuid4().hex[:8]}",
            LABEL_RUN: "other",
            LABEL_OWNER: owner_label(),
        },
    )["Id"]
    try:
        client.api.start(other)
        wait_for_a_run(client, proc, stopped_out)
        os.kill(proc.pid, signal.SIGKILL)  # the kit alone, not its group
        assert proc.wait(timeout=30) == -signal.SIGKILL
        killed = time.monotonic()
        assert left_after(client, stopped_out, wait_s=10.0) == set()
        assert time.monotonic() - killed < 10.0
        assert client.api.inspect_container(other)["State"]["Running"]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        client.api.remove_container(other, force=True)


def test_a_series_drives_an_engine_over_ssh(
    client, mica_image, fast_protocol, tmp_path, ssh_engine
):
    """§7.5: one person drives another machine's engine with the SDK's own SSH transport."""
    url, home = ssh_engine
    image, program = mica_image
    out = tmp_path / "r"
    # 10 ms steps: on a machine other tests load, the SSH relay now and then bunches or delays
    # 3 ms steps' lines enough for the kit to call a run void, as it rightly does
    args = series_args(out, fast_protocol, program, image, {"step_ms": {"*": 10.0}})
    env = {**os.environ, "HOME": str(home)}
    done = subprocess.run(
        [*args, "--docker-host", url], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    recs = [r for r in records(out) if r["kind"] in ("discarded", "timed")]
    assert len(recs) == 6 and {r["status"] for r in recs} == {"ok"}, [
        (r["run_id"], r["status"], r["reason"]) for r in recs
    ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["options"]["docker_host"] == url
    assert (out / recs[0]["log_dir"] / "container.json").exists()

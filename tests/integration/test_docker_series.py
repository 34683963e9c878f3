"""A series of the fake contender inside containers, end to end, on a real Docker engine.

The fake contender travels as one executable zip (its code and fakelib), the way a compiled
program is one file; the Mica image is built by `micakit images build` on the local base image.
Skipped, with the reason, where no engine answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
import zipapp
from pathlib import Path

import pytest

from kit import dockerapi
from kit.containers import LABEL_SERIES
from kit.errors import UserError
from tests.conftest import FAKES, ROOT, SHARED_INPUT, records

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def client():
    try:
        c = dockerapi.connect(timeout_s=600)
    except UserError as e:
        pytest.skip(f"no Docker engine answers: {e.message}")
    yield c
    c.close()


@pytest.fixture(scope="module")
def mica_image(client, tmp_path_factory) -> tuple[str, Path]:
    base = os.environ.get("MICAKIT_BASE_IMAGE", "micakit-base:bookworm")
    if dockerapi.image_id(client, base) is None:
        pytest.skip(f"no base image {base}: `bash scripts/ci-setup.sh` builds it")
    src = tmp_path_factory.mktemp("zipsrc")
    (src / "__main__.py").write_text((FAKES / "contender.py").read_text())
    (src / "fakelib.py").write_text((FAKES / "fakelib.py").read_text())
    program = tmp_path_factory.mktemp("prog") / "mica-fake"
    zipapp.create_archive(src, program, interpreter="/usr/bin/env python3")
    program.chmod(0o755)
    tag = f"e2e-{uuid.uuid4().hex[:8]}"
    out = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "images", "build", "--only", "mica",
         "--contender", str(program), "--base", base, "--tag", tag],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    ref = f"micakit-mica:{tag}"
    yield ref, program
    client.api.remove_image(ref, force=True)


def series_args(out: Path, protocol: Path, program: Path, image: str, fake: dict) -> list[str]:
    return [sys.executable, str(ROOT / "run.py"), "series", "--out", str(out),
            "--protocol", str(protocol), "--device", "cpu", "--executor", "docker",
            "--no-pytorch", "--contender", str(program), "--mica-image", image,
            "--model", "shakespeare-char", "--precision", "float32", "--input", str(SHARED_INPUT),
            "--env", "MICAKIT_FAKE=" + json.dumps(fake)]  # fmt: skip


def leftovers(client) -> list:
    return client.api.containers(all=True, filters={"label": LABEL_SERIES})


def test_contender_series_in_containers_with_an_out_of_memory_run(
    client, mica_image, fast_protocol, tmp_path
):
    image, program = mica_image
    before = {c["Id"] for c in leftovers(client)}
    out = tmp_path / "r"
    # the fake counts its starts in the series' work folder, which every container mounts
    fake = {"step_ms": {"*": 3.0}, "events": {"mica#4": "oom"}, "state": "/micakit/work/state"}
    done = subprocess.run(series_args(out, fast_protocol, program, image, fake),
                          capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    recs = records(out)
    statuses = [(r["kind"], r["status"]) for r in recs]
    assert ("timed", "out of memory") in statuses
    ok = [r for r in recs if r["status"] == "ok" and r["kind"] in ("discarded", "timed")]
    assert len(ok) == 3  # discarded + rounds 1 and 2; the 4th start ran out of memory
    assert all(r["executor"] == "docker" for r in recs if r["kind"] != "profile")
    # each run's container record: read before the container was removed
    assert (out / ok[0]["log_dir"] / "container.json").exists()
    assert {c["Id"] for c in leftovers(client)} <= before
    assert "out of memory" in (out / "report.md").read_text()


def test_ctrl_c_mid_run_leaves_no_container(client, mica_image, fast_protocol, tmp_path):
    image, program = mica_image
    before = {c["Id"] for c in leftovers(client)}
    out = tmp_path / "r"
    fake = {"step_ms": {"*": 50.0}}
    proc = subprocess.Popen(series_args(out, fast_protocol, program, image, fake), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        running = [c for c in leftovers(client) if c["Id"] not in before]
        if running and list(out.glob("runs/*/attempt-1/stdout.log")):
            break
        time.sleep(0.2)
    time.sleep(1.0)  # in the middle of the run
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    assert {c["Id"] for c in leftovers(client)} <= before

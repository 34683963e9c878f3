"""`micakit cloud run` with everything past the launch real: the recording fake of SkyPilot's
SDK (tests/fakes/skypilot_sdk) "launches" a cluster whose machine is this machine over ssh on
127.0.0.1 (a loopback SSH server), copies the task's files there and runs its script,
kit/files/cloud-series.sh; the script pulls the runner image by its digest from a registry on
loopback and runs it with the Docker socket, a CPU smoke series (no --gpus); rsync pulls the
results directory back over the ssh entry the kit writes, and `verify` checks it.

This machine has no network but PyPI, so the machine is given what it would download by the
script's overrides, set in the machine's environment only: nanoGPT at its pinned commit (the
fake nanoGPT, pinned by the series' protocol) and the text (the suite's, with its SHA-256, which
the protocol pins in place of tiny Shakespeare's). No test reaches a cloud.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kit.cloud import task
from tests.conftest import (
    FAKE_NANOGPT,
    FAKES,
    ROOT,
    TEXT_INPUT,
    TEXT_INPUT_SHA256,
    edit_protocol,
    pin_fake_nanogpt,
    records,
    run_py,
    write_protocol,
)
from tests.integration.conftest import Sshd, attestations, loopback_sshd

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SDK = FAKES / "skypilot_sdk"
# the fake SDK's machine over ssh, read from its file: the fake `sky` never comes on this
# process's path, where the real SDK may be installed
_spec = importlib.util.spec_from_file_location("fake_sky_loopback", SDK / "sky" / "_loopback.py")
assert _spec is not None and _spec.loader is not None
_loopback = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_loopback)

CLUSTER = "micakit-ssh1-1"  # micakit-<series-id>-<i>
DIRECTORY = "machine-1"


def kit(*args: object, env: dict[str, str]) -> subprocess.CompletedProcess:
    return run_py(*args, env=env)


@pytest.fixture(scope="module")
def pushed(client, registry, built, tmp_path_factory) -> tuple[dict, Path]:
    """The suite's runner and Mica images pushed to the registry on loopback: digests.json's
    images (each with its REPO@sha256: pin) and the Mica image's program."""
    tag, program = built
    done = kit(
        *("images", "push", "--registry", f"{registry}/micakit-cloud", "--tag", tag),
        *("--attestations", str(attestations(tmp_path_factory))),
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)["images"], program


def machine_inputs(inputs: Path, program: Path) -> None:
    """What the series names on the machine, in its results folder (mounted at /results): the
    fast protocol, pinning the fake nanoGPT and the suite's text, and the contender program."""
    inputs.mkdir(parents=True)
    protocol = write_protocol(inputs / "protocol.toml", runs=2)
    edit_protocol(protocol, pin_fake_nanogpt())
    shutil.copyfile(FAKE_NANOGPT / "train.patch", inputs / "train.patch")
    shutil.copy2(program, inputs / program.name)


def machine_over_ssh(server: Sshd, homes: Path, entries: Path) -> dict:
    """The fake SDK's "ssh" script: each cluster is this machine over `server`, its home under
    `homes`, its ssh entry written in `entries`."""
    return {
        "port": server.port,
        "key": str(server.client_key),
        "entries": str(entries),
        "homes": str(homes),
        # the machine's own environment: what it would download, and no card
        "env": {
            "MICAKIT_NANOGPT_DIR": str(FAKE_NANOGPT),
            "MICAKIT_INPUT_FILE": str(TEXT_INPUT),
            "MICAKIT_INPUT_SHA256": TEXT_INPUT_SHA256,
            "MICAKIT_GPUS": "",
        },
    }


def kit_env(tmp_path: Path, state: Path, entries: Path) -> dict[str, str]:
    """The kit's environment: the fake SDK on its path, and an ssh whose config includes the
    entries written for the clusters, as ~/.ssh/config includes SkyPilot's."""
    (tmp_path / "ssh_config").write_text(f"Include {entries}/*\n")
    (tmp_path / "kit-home").mkdir()
    return {
        **os.environ,
        "HOME": str(tmp_path / "kit-home"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(SDK)]),
        "FAKE_SKY_STATE": str(state),
        "MICAKIT_CLOUD_SSH": f"ssh -F {tmp_path / 'ssh_config'}",
    }


def test_a_rented_machine_over_ssh_runs_the_runner_by_digest_and_comes_back_verified(
    client, pushed, tmp_path
):
    if shutil.which("rsync") is None:
        pytest.skip("no rsync here: `apt-get install rsync` (scripts/ci-setup.sh)")
    images, program = pushed
    homes, entries = tmp_path / "machines", tmp_path / "ssh-entries"
    machine = homes / CLUSTER
    machine_inputs(machine / task.REMOTE_RESULTS / "inputs", program)
    state = tmp_path / "sky.json"
    env = kit_env(tmp_path, state, entries)
    with loopback_sshd(tmp_path, _loopback.SSHD_CONFIG) as server:
        ssh = machine_over_ssh(server, homes, entries)
        # the fake's clock at real time: autodown never races the pull of a real series
        state.write_text(
            json.dumps({"script": {"ssh": ssh, "minute_s": 60, "provision_minutes": 0}})
        )
        fake = {"step_ms": {"*": 10.0}, "state": "/micakit/cache/state"}
        out = tmp_path / "fleet"
        done = kit(
            *("cloud", "run", "--machines", 1, "--series-id", "ssh1", "--out", out, "--yes"),
            *("--image", images["runner"]["pinned"]),
            # PyTorch's side is left out (--no-pytorch): its pin is never pulled
            *("--pytorch-image", images["runner"]["repository"] + "-pytorch@sha256:" + "0" * 64),
            *("--", "--smoke", "--device", "cpu", "--executor", "docker", "--no-pytorch"),
            *("--protocol", "/results/inputs/protocol.toml"),
            *("--contender", f"/results/inputs/{program.name}"),
            *("--mica-image", images["mica"]["pinned"]),
            *("--model", "shakespeare-char", "--precision", "float32"),
            *("--env", f"MICAKIT_FAKE={json.dumps(fake)}"),
            env=env,
        )
        said = done.stdout + done.stderr
        log = _loopback.log_path(ssh, CLUSTER)
        machine_said = log.read_text(errors="replace") if log.exists() else "(no log)"
        assert done.returncode == 0, f"{said[-4000:]}\n--- the machine:\n{machine_said[-4000:]}"
    assert f"{CLUSTER}: pulled into {out / DIRECTORY}, verified" in said
    assert re.search(rf"^{CLUSTER} +L4 +delivered +{DIRECTORY}: verified ", said, re.M)
    assert not (entries / CLUSTER).exists()  # the ssh entry left with the machine
    sky = json.loads(state.read_text())
    assert sky["clusters"] == {}
    assert [c["cluster_name"] for _, c in sky["calls"] if _ == "ssh_add_cluster"] == [CLUSTER]
    # what came back is the machine's series, byte for byte, and it verifies here
    pulled, there = out / DIRECTORY, machine / task.REMOTE_RESULTS / DIRECTORY
    assert sorted(p.relative_to(pulled) for p in pulled.rglob("*")) == sorted(
        p.relative_to(there) for p in there.rglob("*")
    )
    assert (pulled / "manifest.json").read_bytes() == (there / "manifest.json").read_bytes()
    timed = [r for r in records(pulled) if r["kind"] in ("discarded", "timed")]
    assert timed and {r["executor"] for r in timed} == {"docker"}
    assert "ok" in {r["status"] for r in timed}
    # the machine ran the runner by its digest, a CPU smoke series
    options = json.loads((pulled / "manifest.json").read_text())["options"]
    assert (options["device"], options["smoke"], options["executor"]) == ("cpu", True, "docker")
    versions = json.loads((pulled / "versions.json").read_text())
    assert images["runner"]["pinned"] in versions["images"]["runner"]["repo_digests"]
    verified = kit("verify", pulled, env=env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "every published number matches" in verified.stdout + verified.stderr
    # the release of what came back; two CPU machines would be refused as one card measured
    # twice (a CPU has no UUID), so merge's machines are tested on records of cards
    # (tests/unit/report/test_merge.py)
    merged = kit("merge", pulled, "--out", tmp_path / "release", env=env)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    release = (tmp_path / "release" / "release.md").read_text()
    assert f"| {pulled} | cpu " in release and "| docker " in release
    fleet = json.loads((out / "fleet.json").read_text())
    assert [(m["directory"], m["pulled"], m["series_succeeded"]) for m in fleet["machines"]] == [
        (DIRECTORY, True, True)
    ]
    assert fleet["machines"][0]["state"] == "delivered"

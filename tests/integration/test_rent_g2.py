"""scripts/rent-g2.sh against a fake gcloud that records its calls (tests/fixtures/fake-gcloud).

The script must delete the machine it rented exactly once: after the normal path, after any step
fails, and on SIGINT and SIGTERM; --dry-run must call nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kit

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "rent-g2.sh"
FAKE_DIR = ROOT / "tests" / "fixtures" / "fake-gcloud"
PROTOCOL = ROOT / "benchmarks" / "NanoGpt" / "protocol.toml"
TAG = f"{kit.__version__}-{hashlib.sha256(PROTOCOL.read_bytes()).hexdigest()[:12]}"
WHERE = ["--project", "proj", "--zone", "us-central1-a"]


def _tools(tmp_path: Path) -> Path:
    """A PATH folder with the tools the script uses, and no gcloud (a real one may be installed)."""
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    names = (
        "awk",
        "bash",
        "cat",
        "date",
        "dirname",
        "git",
        "mkdir",
        "mktemp",
        "pkill",
        "rm",
        "sleep",
        "tar",
    )
    for name in names:
        found = shutil.which(name)
        if found and not (tools / name).exists():
            (tools / name).symlink_to(found)
    if not (tools / "python3").exists():  # for the fake's #! line
        (tools / "python3").symlink_to(sys.executable)
    return tools


def _env(tmp_path: Path, fake: bool = True, **extra: str) -> dict[str, str]:
    """The fake gcloud first on PATH, or (fake=False) no gcloud at all."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOUDSDK_", "FAKE_GCLOUD"))}
    env["PATH"] = os.pathsep.join([str(FAKE_DIR) if fake else "", str(_tools(tmp_path))])
    env.update(
        FAKE_GCLOUD_LOG=str(tmp_path / "calls.jsonl"),
        FAKE_GCLOUD_REMOTE=str(tmp_path / "remote"),
        PYTHON=sys.executable,
        MICAKIT_G2_SSH_TRIES="2",
        MICAKIT_G2_SSH_WAIT_S="0",
    )
    env.update(extra)
    (tmp_path / "remote").mkdir(exist_ok=True)
    return env


BASH = shutil.which("bash") or "/bin/bash"


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return [
        BASH,
        str(SCRIPT),
        *WHERE,
        "--name",
        "t1",
        "--results",
        str(tmp_path / "results"),
        *extra,
    ]


def rent(tmp_path: Path, *extra: str, fake: bool = True, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        _args(tmp_path, *extra),
        env=_env(tmp_path, fake, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "calls.jsonl"
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def steps(tmp_path: Path) -> list[str]:
    """Each call as its step: create, ssh:<first word of the remote command>, scp:up|down, delete."""
    out = []
    for c in calls(tmp_path):
        if c[:3] == ["compute", "instances", "create"]:
            out.append("create")
        elif c[:3] == ["compute", "instances", "delete"]:
            out.append("delete")
        elif c[:2] == ["compute", "ssh"]:
            command = c[c.index("--command") + 1]
            kind = {"true": "wait"}.get(command, "")
            kind = kind or ("series" if " series --out " in command else "")
            kind = kind or ("build" if "build-images.sh" in command else "setup")
            out.append(f"ssh:{kind}")
        elif c[:2] == ["compute", "scp"]:
            out.append("scp:down" if ":" in c[-2] else "scp:up")
        else:
            out.append(" ".join(c))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too: it waits only for its parent to read its status
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


NORMAL = [
    "create",
    "ssh:wait",
    "ssh:setup",
    "scp:up",
    "ssh:build",
    "ssh:series",
    "scp:down",
    "delete",
]


def test_the_normal_path_creates_runs_copies_back_and_deletes(tmp_path):
    res = rent(tmp_path, "--", "--model", "shakespeare-char", "--precision", "float32")
    assert res.returncode == 0, res.stderr
    assert steps(tmp_path) == NORMAL
    create, *_, delete = calls(tmp_path)
    assert create[3] == "t1" and create[4:8] == WHERE
    for flag in (
        "--machine-type=g2-standard-8",
        "--accelerator=type=nvidia-l4,count=1",
        "--maintenance-policy=TERMINATE",
        "--metadata=install-nvidia-driver=True",
        "--image-project=deeplearning-platform-release",
        "--boot-disk-size=100GB",
    ):
        assert flag in create
    assert delete == ["compute", "instances", "delete", "t1", *WHERE, "--quiet"]
    series = next(c for c in calls(tmp_path) if " series --out " in " ".join(c))
    command = series[series.index("--command") + 1]
    assert "docker run --rm --gpus all -v /var/run/docker.sock:/var/run/docker.sock" in command
    assert '-v "$PWD:/checkout:ro" -v "$PWD/results:/results"' in command
    assert (
        f"micakit:{TAG} series --out /results/t1 --model shakespeare-char --precision float32"
        in command
    )
    # the checkout went over without results, git's folder or caches; the results came back
    remote = tmp_path / "remote" / "micakit"
    assert (remote / "scripts" / "build-images.sh").is_file() and (remote / "kit").is_dir()
    assert not (remote / ".git").exists() and not list(remote.rglob("__pycache__"))
    assert (tmp_path / "results" / "t1" / "manifest.json").is_file()
    assert "about $0.85/hour on-demand in us-central1" in res.stderr
    assert "micakit verify" in res.stderr and "held the machine" in res.stderr


@pytest.mark.parametrize(
    ("fail_at", "done"),
    [
        ("instances create", ["create"]),
        ("--command true", ["create", "ssh:wait", "ssh:wait"]),  # SSH never answers: 2 tries
        ("nvidia-ctk", NORMAL[:3]),
        ("--recurse /", NORMAL[:4]),
        ("build-images.sh", NORMAL[:5]),
        ("micakit/results/t1", NORMAL[:7]),
    ],
)
def test_a_failing_step_deletes_the_machine_once_and_fails(tmp_path, fail_at, done):
    res = rent(tmp_path, FAKE_GCLOUD_FAIL=fail_at)
    assert res.returncode == 1, res.stderr
    assert steps(tmp_path) == [*done, "delete"]
    assert "that command failed with status 1" in res.stderr
    assert "deleting t1 after the failure above" in res.stderr


def test_a_failed_series_still_comes_back_and_its_status_is_kept(tmp_path):
    res = rent(tmp_path, FAKE_GCLOUD_FAIL=" series --out ", FAKE_GCLOUD_FAIL_STATUS="3")
    assert res.returncode == 3, res.stderr
    assert steps(tmp_path) == NORMAL
    assert (tmp_path / "results" / "t1").is_dir()
    assert "the series stopped with status 3" in res.stderr


def test_a_failed_delete_says_how_to_find_the_machine(tmp_path):
    res = rent(tmp_path, FAKE_GCLOUD_FAIL="instances delete")
    assert res.returncode == 1
    assert steps(tmp_path) == NORMAL
    assert "gcloud compute instances list --project proj" in res.stderr
    assert (
        "gcloud compute instances delete t1 --project proj --zone us-central1-a --quiet"
        in res.stderr
    )


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_series_and_deletes_the_machine(tmp_path, sig, status, sigint_default):
    env = _env(tmp_path, FAKE_GCLOUD_HANG=" series --out ", FAKE_GCLOUD_HANG_S="60")
    proc = subprocess.Popen(_args(tmp_path), env=env, stderr=subprocess.PIPE, text=True)
    child_file = tmp_path / "calls.jsonl.child"
    try:
        deadline = time.monotonic() + 30
        while not child_file.exists() or not child_file.read_text().strip():
            assert proc.poll() is None and time.monotonic() < deadline, "the series step never came"
            time.sleep(0.05)
        child = int(child_file.read_text())
        started = time.monotonic()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=15)  # the cut step is stopped, not waited for
        assert time.monotonic() - started < 15
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if child_file.exists() and _alive(child := int(child_file.read_text())):
            os.kill(child, signal.SIGKILL)
    assert proc.returncode == status, stderr
    assert steps(tmp_path) == [*NORMAL[:6], "delete"]
    assert f"stopped by {sig.name}" in stderr and f"deleting t1 after {sig.name}" in stderr
    # what the cut step had started (gcloud's ssh; the fake's sleep) was stopped with it
    assert not _alive(child)


def test_keep_leaves_the_machine_and_says_how_to_delete_it(tmp_path):
    res = rent(tmp_path, "--keep", FAKE_GCLOUD_FAIL="build-images.sh")
    assert res.returncode == 1
    assert "delete" not in steps(tmp_path)
    assert "kept t1 (--keep)" in res.stderr
    assert (
        "gcloud compute instances delete t1 --project proj --zone us-central1-a --quiet"
        in res.stderr
    )


def test_dry_run_prints_every_command_and_calls_nothing(tmp_path):
    for fake in (True, False):  # gcloud need not even be installed
        res = rent(tmp_path, "--dry-run", "--", "--model", "gpt2-small", fake=fake)
        assert res.returncode == 0, res.stderr
        assert calls(tmp_path) == []
        printed = [line for line in res.stdout.splitlines() if line.startswith("+ gcloud ")]
        assert [" ".join(line.split()[3:5]) for line in printed] == [
            "instances create",
            "ssh t1",
            "ssh t1",
            "scp --project",
            "ssh t1",
            "ssh t1",
            "scp --project",
            "instances delete",
        ]
        assert any(
            "series\\ --out\\ /results/t1\\ --model\\ gpt2-small" in line for line in printed
        )
        assert not (tmp_path / "results").exists()


def test_no_gcloud_on_path_is_a_clear_error(tmp_path):
    assert shutil.which("gcloud", path=_env(tmp_path, fake=False)["PATH"]) is None
    res = rent(tmp_path, fake=False)
    assert res.returncode == 2
    assert "gcloud (the Google Cloud CLI) is not on PATH" in res.stderr
    assert "https://cloud.google.com/sdk/docs/install" in res.stderr


def test_no_project_or_zone_is_a_clear_error_naming_what_is_missing(tmp_path):
    args = [BASH, str(SCRIPT), "--name", "t1", "--results", str(tmp_path / "results")]
    res = subprocess.run(args, env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert "error: no project given" in res.stderr and "error: no zone given" in res.stderr
    assert "export CLOUDSDK_CORE_PROJECT=ID" in res.stderr
    assert "export CLOUDSDK_COMPUTE_ZONE=ZONE" in res.stderr
    # the environment stands for the flags; only what is still missing is named
    env = _env(tmp_path, CLOUDSDK_CORE_PROJECT="proj")
    res = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert "no project" not in res.stderr and "error: no zone given" in res.stderr
    assert calls(tmp_path) == []


def test_an_existing_results_directory_is_never_overwritten(tmp_path):
    (tmp_path / "results" / "t1").mkdir(parents=True)
    res = rent(tmp_path)
    assert res.returncode == 2 and "already exists" in res.stderr
    assert calls(tmp_path) == []


def test_usage(tmp_path):
    res = rent(tmp_path, "--help")
    assert res.returncode == 0 and "usage: scripts/rent-g2.sh" in res.stdout
    res = rent(tmp_path, "--bogus")
    assert res.returncode == 2 and "unknown argument: --bogus" in res.stderr
    res = subprocess.run(
        _args(tmp_path)[:2] + [*WHERE, "--name", "Bad_Name"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "not a Compute Engine name" in res.stderr
    assert calls(tmp_path) == []

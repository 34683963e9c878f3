"""A cluster whose machine is this machine over ssh on 127.0.0.1 (the fake's script "ssh"):

    "ssh": {"port": P, "key": PATH, "entries": DIR, "homes": DIR, "env": {...}}

The SSH server (tests/integration/conftest.py's loopback_sshd) logs in as root and starts each
command in the machine's own home, HOMES/CLUSTER, which the ssh entry sends as
FAKE_MACHINE_HOME (see SSHD_CONFIG). As SkyPilot does, the launch copies the task's file mounts
onto the machine and runs the task's `run` in bash with its envs (and the machine's own, "env")
over ssh of its own; `SSHConfigHelper.add_cluster` writes the entry `ssh CLUSTER` in ENTRIES,
which a client config including ENTRIES/* reads.
"""

from __future__ import annotations

import posixpath
import shlex
import subprocess
from pathlib import Path
from typing import Any

HOME_ENV = "FAKE_MACHINE_HOME"
# sshd_config lines: each session starts in the home its ssh entry names, and none without one
SSHD_CONFIG = (
    f"AcceptEnv {HOME_ENV}\n"
    f'ForceCommand test -n "${HOME_ENV}" && cd "${HOME_ENV}" && HOME="${HOME_ENV}" '
    'exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"\n'
)
JOB_TIMEOUT_S = 900


def entry(cluster: str, ip: str, port: int, user: str, key: str, homes: str) -> str:
    """The ssh entry of `cluster`, as SkyPilot writes it (host keys not checked), with the
    machine's home."""
    return (
        f"Host {cluster}\n  HostName {ip}\n  User {user}\n  Port {port}\n"
        f"  IdentityFile {key}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
        f"  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
        f"  SetEnv {HOME_ENV}={Path(homes) / cluster}\n"
    )


def write_entry(ssh: dict[str, Any], cluster: str, ip: str, port: int, user: str, key: str) -> None:
    folder = Path(ssh["entries"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / cluster).write_text(entry(cluster, ip, port, user, key, ssh["homes"]))


def remove_entry(ssh: dict[str, Any], cluster: str) -> None:
    (Path(ssh["entries"]) / cluster).unlink(missing_ok=True)


def log_path(ssh: dict[str, Any], cluster: str) -> Path:
    return Path(ssh["homes"]) / f"{cluster}.log"


def run_job(ssh: dict[str, Any], cluster: str, task: dict[str, Any]) -> bool:
    """SkyPilot's launch on the machine: the file mounts copied, then `run` with the envs;
    whether the job succeeded. Its output goes to log_path, for tail_logs."""
    (Path(ssh["homes"]) / cluster).mkdir(parents=True, exist_ok=True)
    own = Path(ssh["homes"]) / f"{cluster}.ssh"  # SkyPilot's own entry for its launch
    own.write_text(entry(cluster, "127.0.0.1", ssh["port"], "root", ssh["key"], ssh["homes"]))
    base = ["ssh", "-F", str(own), cluster]
    for dest, src in task["file_mounts"].items():
        with open(src, "rb") as f:
            copy = f"mkdir -p {posixpath.dirname(dest)} && cat > {dest}"
            subprocess.run([*base, copy], stdin=f, check=True, timeout=60)
    envs = {**task["envs"], **ssh.get("env", {})}  # the machine's own settings last
    command = shlex.join(["env", *(f"{k}={v}" for k, v in envs.items()), "bash", "-c"])
    with log_path(ssh, cluster).open("wb") as log:
        done = subprocess.run(
            [*base, f"{command} {shlex.quote(task['run'])}"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=JOB_TIMEOUT_S,
            check=False,
        )
    return done.returncode == 0

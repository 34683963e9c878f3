"""What the integration tests share: a client of this machine's Docker engine, or a skip; an
SSH server on loopback; a registry on loopback and images built to push to it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
import zipapp
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import docker.errors
import pytest

from kit.errors import UserError
from kit.executors.docker import building, connection
from kit.executors.docker.containers import LABEL_SERIES
from tests.conftest import FAKES, ROOT

REGISTRY_PROGRAM = "/usr/bin/docker-registry"
WHEELHOUSE = Path(os.environ.get("MICAKIT_WHEELHOUSE", ROOT / "wheelhouse"))


def remove_cache_volumes(client, series: str) -> None:
    """The cache volumes (one per side) a stopped series keeps for its resume, removed."""
    found = client.api.volumes(filters={"label": f"{LABEL_SERIES}={series}"})
    for volume in (found or {}).get("Volumes") or []:
        try:
            client.api.remove_volume(volume["Name"], force=True)
        except docker.errors.NotFound:
            pass


@pytest.fixture(scope="session")
def client() -> Iterator:
    try:
        c = connection.connect(timeout_s=600)
    except UserError as e:
        pytest.skip(f"no Docker engine answers: {e.message}")
    yield c
    c.close()


def base_image(client) -> str:
    """The local base image the images build on, or a skip saying how to make it."""
    base = os.environ.get("MICAKIT_BASE_IMAGE", "micakit-base:bookworm")
    if building.image_id(client, base) is None:
        pytest.skip(f"no base image {base}: `bash scripts/ci-setup.sh` builds it")
    return base


def fake_contender_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake contender (its code and fakelib) as one executable zip: a one-file program, as
    a compiled contender is."""
    src = tmp_path_factory.mktemp("zipsrc")
    (src / "__main__.py").write_text((FAKES / "contender.py").read_text())
    (src / "fakelib.py").write_text((FAKES / "fakelib.py").read_text())
    program = tmp_path_factory.mktemp("prog") / "mica-fake"
    zipapp.create_archive(src, program, interpreter="/usr/bin/env python3")
    program.chmod(0o755)
    return program


@dataclass(frozen=True)
class Sshd:
    """An SSH server on 127.0.0.1 that logs in as root with `client_key`, known to the client
    through `home`/.ssh (known_hosts, and a config naming the key for 127.0.0.1)."""

    port: int
    client_key: Path
    home: Path


@contextmanager
def loopback_sshd(folder: Path, extra_config: str = "") -> Iterator[Sshd]:
    """This machine's own SSH server on loopback, its keys and client HOME in `folder`, with
    `extra_config` appended to its sshd_config; a skip where OpenSSH's server is missing or the
    test does not run as root. The user's ~/.ssh is never touched."""
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not Path(sshd).exists() or not shutil.which("ssh-keygen"):
        pytest.skip(
            "no OpenSSH server here: `apt-get install openssh-server` (scripts/ci-setup.sh)"
        )
    if os.geteuid() != 0:
        pytest.skip("the loopback SSH server logs in as root, so the test must run as root")
    keys, home = folder / "sshd", folder / "home"
    keys.mkdir()
    (home / ".ssh").mkdir(parents=True)
    for name in ("host_key", "client_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name)], check=True
        )
    (keys / "authorized_keys").write_text((keys / "client_key.pub").read_text())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (keys / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {keys / 'host_key'}\n"
        f"AuthorizedKeysFile {keys / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nStrictModes no\nUsePAM no\n"
        f"PidFile {keys / 'sshd.pid'}\n{extra_config}"
    )
    host_pub = (keys / "host_key.pub").read_text().split()[:2]
    (home / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join(host_pub)}\n")
    (home / ".ssh" / "config").write_text(f"Host 127.0.0.1\n  IdentityFile {keys / 'client_key'}\n")
    Path("/run/sshd").mkdir(exist_ok=True)
    server = subprocess.Popen(
        [sshd, "-D", "-f", str(keys / "sshd_config"), "-E", str(keys / "sshd.log")]
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    try:
        yield Sshd(port, keys / "client_key", home)
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture
def ssh_engine(tmp_path):
    """This machine's own engine behind an SSH server on loopback: `ssh://root@127.0.0.1:PORT`.

    The client's keys and known hosts live in a HOME of the test's own, which the kit (a
    subprocess) is given, so the user's ~/.ssh is never touched.
    """
    with loopback_sshd(tmp_path) as server:
        yield f"ssh://root@127.0.0.1:{server.port}", server.home


@pytest.fixture(scope="session")
def registry(tmp_path_factory) -> Iterator[str]:
    """A registry of the tests' own on 127.0.0.1 (a free port, a temporary store): its
    address, HOST:PORT. One for the session: a second push of the same layers (another test's
    namespace) sends none of them again."""
    program = shutil.which("docker-registry") or REGISTRY_PROGRAM
    if not Path(program).exists():
        pytest.skip("no docker-registry here: `apt-get install docker-registry` (ci-setup.sh)")
    root = tmp_path_factory.mktemp("registry")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (root / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'store'}\n"
        f"  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n"
    )
    log = (root / "registry.log").open("w")
    server = subprocess.Popen(
        [program, "serve", str(root / "config.yml")], stdout=log, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            pytest.fail(f"docker-registry did not answer: {(root / 'registry.log').read_text()}")
        time.sleep(0.2)
    yield f"127.0.0.1:{port}"
    server.terminate()
    server.wait(10)
    log.close()


@pytest.fixture(scope="session")
def built(client, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """The runner and a Mica image (the fake contender as a one-file program), built by
    `micakit images build` under a tag of their own; the tag and the program. Built once for
    the session (the cloud machine's and the registry's modules; a build, its SBOMs and its
    statements are most of either's time): a test that removes them (the registry's pull by
    digest) runs last, its module's last test, and the pull puts the runner back."""
    base = base_image(client)
    if not list(WHEELHOUSE.glob("*.whl")):
        pytest.skip(f"no wheels in {WHEELHOUSE}: `bash scripts/ci-setup.sh` fills it")
    program = fake_contender_program(tmp_path_factory)
    tag = f"push-{uuid.uuid4().hex[:8]}"
    out = subprocess.run(
        [
            *(sys.executable, str(ROOT / "run.py"), "images", "build"),
            *("--only", "runner", "--only", "mica", "--contender", str(program)),
            *("--base", base, "--wheelhouse", str(WHEELHOUSE), "--tag", tag),
            *("--attestations", str(attestations(tmp_path_factory))),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    ids = [line.split("\t")[1] for line in out.stdout.splitlines()]
    yield tag, program
    for image_id in ids:  # whatever the test left: the built or the pulled images
        if building.image_id(client, image_id) is not None:
            client.api.remove_image(image_id, force=True)


def attestations(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where `images build` writes the statements and `images push` the SBOMs, for this run."""
    return tmp_path_factory.getbasetemp() / "attestations"

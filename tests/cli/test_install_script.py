"""scripts/install.sh as the smoke set-up runs it (--cpu-torch): where PyTorch's CPU-only index
answers torch comes from it; where it does not, the script says why the download is larger
and goes on. `--plan` stops after saying what would be downloaded, so nothing is."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT


def install(index: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "MICAKIT_TORCH_INDEX": index,
        # the test's own venv, where everything is installed: pip resolves, downloads nothing
        "MICAKIT_VENV": sys.prefix,
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip's spelling of --no-build-isolation
    }
    script = ROOT / "scripts" / "install.sh"
    return subprocess.run(
        ["bash", str(script), "--cpu-torch", "--plan"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once it is closed


@pytest.fixture
def index() -> Iterator[str]:
    """An index that answers for torch's page, as https://download.pytorch.org/whl/cpu does
    (a directory of projects, PEP 503), served from this process."""

    class Index(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self.send_response(200 if self.path == "/whl/cpu/torch/" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/whl/cpu"
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_an_unreachable_cpu_index_is_said_with_why_the_download_is_larger_and_it_goes_on():
    url = f"http://127.0.0.1:{closed_port()}/whl/cpu"
    done = install(url)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert f"PyTorch's CPU-only index is not reachable ({url}/torch/" in said
    assert "from the default index: on Linux its wheel brings NVIDIA's CUDA libraries" in said
    assert "step 2/3: what pip will download" in said  # it went on
    assert "nothing to download" in said or "total to download:" in said


@pytest.mark.slow
def test_a_reachable_cpu_index_gives_torch(index):
    done = install(index)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert f"torch 2.13.0: PyTorch's CPU-only build, from {index}" in said
    assert "not reachable" not in said


def test_the_plan_says_each_download_with_its_size_and_the_total(tmp_path):
    wheel = tmp_path / "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"x" * 2_500_000)
    report = tmp_path / "report.json"
    # pip install --dry-run --report's form (pip 23: "install", each with "metadata" and
    # "download_info"; the project itself, editable, by "dir_info")
    report.write_text(
        '{"version": "1", "install": ['
        f'{{"metadata": {{"name": "torch", "version": "2.13.0+cpu"}},'
        f' "download_info": {{"url": "{wheel.as_uri()}", "archive_info": {{}}}}}},'
        f'{{"metadata": {{"name": "micakit", "version": "0.1.0"}},'
        f' "download_info": {{"url": "{ROOT.as_uri()}", "dir_info": {{"editable": true}}}}}}'
        "]}"
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "install_plan.py"), "sizes", str(report)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "to download: 1 packages" in done.stderr
    assert "torch 2.13.0+cpu" in done.stderr and "2.5 MB" in done.stderr
    assert "total to download: 2.5 MB" in done.stderr
    assert "micakit" not in done.stderr
    assert Path(report).exists()

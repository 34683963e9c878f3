"""The README's runner-image line for a machine without a card, run exactly as written through
the Docker SDK: `--smoke --device cpu`, no `--gpus`, the results on the host as the calling user.

It needs what the line needs: a real nanoGPT checkout at the pinned commit (MICAKIT_NANOGPT),
tiny Shakespeare's input.txt (MICAKIT_INPUT, else the checkout's data/shakespeare_char/) and
the kit's PyTorch image under its default name (`micakit images build --only pytorch`); without
them it is skipped, saying which is missing. The runner image is built as
tests/integration/test_docker.py builds it.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from kit.executors.docker import building, kit_images
from kit.protocol.load import load
from kit.results.store import ResultsDir, sha256_file
from tests.conftest import ROOT
from tests.integration.conftest import base_image as _base

pytestmark = [pytest.mark.docker, pytest.mark.slow]

WHEELHOUSE = Path(os.environ.get("MICAKIT_WHEELHOUSE", ROOT / "wheelhouse"))
# the README's line, after `mkdir -p results && docker run --rm` and its mounts (README#cpu)
README_CPU = "micakit series --smoke --device cpu --out /results/smoke --nanogpt /nanogpt --input /data/input.txt"


def test_the_readme_cpu_line_runs_a_smoke_series_without_a_card(client, tmp_path):
    nanogpt = os.environ.get("MICAKIT_NANOGPT")
    if not nanogpt or not Path(nanogpt, "train.py").is_file():
        pytest.skip("MICAKIT_NANOGPT names no nanoGPT checkout at the pinned commit")
    protocol = load(None)
    text = Path(os.environ.get("MICAKIT_INPUT") or Path(nanogpt, "data/shakespeare_char/input.txt"))
    if not text.is_file() or sha256_file(text) != protocol.data.input_sha256:
        pytest.skip(f"no tiny Shakespeare at {text}: name its input.txt with MICAKIT_INPUT")
    pytorch = kit_images.ref("pytorch", protocol)
    if building.image_id(client, pytorch) is None:
        pytest.skip(f"no {pytorch} on the engine: `micakit images build --only pytorch` makes it")
    runner = "micakit-test-runner:ci"
    building.build_image(
        client,
        ROOT / "Dockerfile.runner",
        kit_images.runner_context(tmp_path / "context"),
        runner,
        {"BASE": _base(client)},
        WHEELHOUSE,
    )
    results = tmp_path / "results"
    results.mkdir()
    words = shlex.split(README_CPU)
    assert words[0] == "micakit"  # the runner's entrypoint is micakit
    sock = "/var/run/docker.sock"
    logs = client.containers.run(
        runner,
        words[1:],
        remove=True,
        user=f"{os.getuid()}:{os.getgid()}",
        group_add=[str(os.stat(sock).st_gid)],
        volumes={
            sock: {"bind": sock, "mode": "rw"},
            str(results): {"bind": "/results", "mode": "rw"},
            nanogpt: {"bind": "/nanogpt", "mode": "ro"},
            str(text): {"bind": "/data/input.txt", "mode": "ro"},
        },
        # no device_requests: the line has no --gpus, and the machine no card
    ).decode()
    out = results / "smoke"
    assert (out / "report.md").is_file(), logs[-3000:]
    assert ResultsDir.open(out).manifest().smoke
    assert (out / "summary.json").is_file() and (out / "rerun.sh").is_file()

"""kit/files/cloud-series.sh, what each rented machine runs, on this machine with stand-ins for
docker, curl, sudo and stat that record their calls: nanoGPT and tiny Shakespeare fetched there,
the runner image pulled and run by digest with the card and the Docker socket."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from kit.cloud import task
from kit.sides import data, nanogpt

RUNNER = "registry.example/micakit@sha256:" + "a" * 64
PYTORCH = "registry.example/micakit-pytorch@sha256:" + "b" * 64
TEXT = b"First Citizen:\n"

RECORDER = """#!{python}
import json, os, sys
with open(os.environ["CALLS"], "a") as f:
    f.write(json.dumps([os.path.basename(sys.argv[0]), sys.argv[1:]]) + "\\n")
"""

CURL = (
    RECORDER
    + """
import io, tarfile
url, out = sys.argv[-3], sys.argv[sys.argv.index("-o") + 1]
if url.endswith(".tar.gz"):
    with tarfile.open(out, "w:gz") as tar:
        info = tarfile.TarInfo(os.environ["TOP"] + "/train.py")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"#\\n"))
else:
    open(out, "wb").write({text!r})
"""
)


def _tools(tmp_path: Path) -> Path:
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, body in (
        ("docker", RECORDER),
        ("sudo", RECORDER),
        ("curl", CURL),
        ("stat", RECORDER + 'print("999")\n'),
    ):
        path = tools / name
        path.write_text(body.format(python=sys.executable, text=TEXT))
        path.chmod(0o755)
    return tools


def _run(tmp_path: Path, contender: Path | None, *series_args: str) -> list:
    home = tmp_path / "home"
    home.mkdir()
    calls = tmp_path / "calls.jsonl"
    envs = task.environment(task.Images(RUNNER, PYTORCH), "machine-1", contender, series_args)
    envs["MICAKIT_INPUT_SHA256"] = hashlib.sha256(TEXT).hexdigest()
    if contender:
        (home / ".micakit").mkdir()
        (home / ".micakit" / "contender").write_bytes(contender.read_bytes())
    env = {
        **os.environ, **envs, "HOME": str(home), "CALLS": str(calls),
        "TOP": f"nanoGPT-{nanogpt.COMMIT}",
        "PATH": f"{_tools(tmp_path)}{os.pathsep}{os.environ['PATH']}",
    }  # fmt: skip
    subprocess.run(["bash", str(task.script())], env=env, check=True, cwd=tmp_path)
    assert (home / "micakit" / "data" / "input.txt").read_bytes() == TEXT
    assert (home / "micakit" / f"nanoGPT-{nanogpt.COMMIT}" / "train.py").is_file()
    return [json.loads(line) for line in calls.read_text().splitlines()]


def test_the_machine_runs_the_runner_by_digest_with_the_card_and_the_socket(tmp_path) -> None:
    calls = _run(tmp_path, None, "--model", "shakespeare-char", "--precision", "float32")
    docker = [args for name, args in calls if name == "docker"]
    home = tmp_path / "home" / "micakit"
    assert ["pull", "--quiet", RUNNER] in docker
    run = docker[-1]
    assert run[:3] == ["run", "--rm", "--gpus"] and run[3] == "all"
    assert run[run.index("--group-add") + 1] == "999"
    mounts = [run[i + 1] for i, a in enumerate(run) if a == "-v"]
    assert mounts == [
        "/var/run/docker.sock:/var/run/docker.sock",
        f"{home}/results:/results",
        f"{home}/nanoGPT-{nanogpt.COMMIT}:/nanogpt:ro",
        f"{home}/data/input.txt:/data/input.txt:ro",
    ]
    image = run.index(RUNNER)
    assert run[image + 1 :] == [
        "series", "--out", "/results/machine-1", "--pytorch-image", PYTORCH,
        "--nanogpt", "/nanogpt", "--input", "/data/input.txt",
        "--model", "shakespeare-char", "--precision", "float32",
    ]  # fmt: skip
    fetched = [args[-3] for name, args in calls if name == "curl"]
    assert fetched == [nanogpt.ARCHIVE_URL.format(commit=nanogpt.COMMIT), data.INPUT_URL]


def test_a_contender_is_built_into_its_image_first(tmp_path) -> None:
    program = tmp_path / "mica"
    program.write_bytes(b"\x7fELF")
    calls = _run(tmp_path, program)
    docker = [args for name, args in calls if name == "docker"]
    build, series = docker[-2], docker[-1]
    assert build[build.index(RUNNER) + 1 :] == [
        "images", "build", "--only", "mica", "--contender", "/results/mica/program",
    ]  # fmt: skip
    assert series[-2:] == ["--contender", "/results/mica/program"]
    assert (
        tmp_path / "home" / "micakit" / "results" / "mica" / "program"
    ).read_bytes() == b"\x7fELF"


def _run_with(tmp_path: Path, machine_env: dict[str, str]) -> subprocess.CompletedProcess:
    """The script with the machine's own settings (what it has instead of the downloads)."""
    home = tmp_path / "home"
    home.mkdir()
    envs = task.environment(task.Images(RUNNER, PYTORCH), "machine-1", None, [])
    envs["MICAKIT_INPUT_SHA256"] = hashlib.sha256(TEXT).hexdigest()
    env = {
        **os.environ, **envs, **machine_env, "HOME": str(home),
        "CALLS": str(tmp_path / "calls.jsonl"),
        "PATH": f"{_tools(tmp_path)}{os.pathsep}{os.environ['PATH']}",
    }  # fmt: skip
    return subprocess.run(
        ["bash", str(task.script())], env=env, cwd=tmp_path, capture_output=True, text=True
    )


def test_a_machine_without_network_or_card_is_given_the_downloads_and_no_gpus(tmp_path) -> None:
    tree = tmp_path / "nanoGPT"
    tree.mkdir()
    (tree / "train.py").write_text("# nanoGPT\n")
    text = tmp_path / "input.txt"
    text.write_bytes(TEXT)
    done = _run_with(
        tmp_path,
        {"MICAKIT_NANOGPT_DIR": str(tree), "MICAKIT_INPUT_FILE": str(text), "MICAKIT_GPUS": ""},
    )
    assert done.returncode == 0, done.stderr
    home = tmp_path / "home" / "micakit"
    assert (home / f"nanoGPT-{nanogpt.COMMIT}" / "train.py").read_text() == "# nanoGPT\n"
    assert (home / "data" / "input.txt").read_bytes() == TEXT
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [name for name, _ in calls if name == "curl"] == []  # nothing downloaded
    run = [args for name, args in calls if name == "docker"][-1]
    assert run[:2] == ["run", "--rm"] and "--gpus" not in run


def test_a_machines_own_text_is_checked_as_the_download_is(tmp_path) -> None:
    tree = tmp_path / "nanoGPT"
    tree.mkdir()
    text = tmp_path / "input.txt"
    text.write_bytes(TEXT + b"changed\n")
    done = _run_with(tmp_path, {"MICAKIT_NANOGPT_DIR": str(tree), "MICAKIT_INPUT_FILE": str(text)})
    assert done.returncode != 0
    assert "data/input.txt.part: FAILED" in done.stdout + done.stderr
    assert not (tmp_path / "home" / "micakit" / "data" / "input.txt").exists()

"""report.html and rerun.sh in every results directory (§3 rule 7), through whole series with fakes."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kit.report import rerun
from kit.results.store import ResultsDir
from tests.conftest import (
    CONTENDER,
    ROOT,
    contender_args,
    fake_nanogpt_protocol,
    pytorch_args,
    write_protocol,
)

M1_SIZE = "a 10.7-million-parameter model with a 256-character context"
# documentation a page may name as a plain link; nothing is ever loaded from anywhere
DOCS = ("https://docs.nvidia.com/",)
VERDICT_WORDS = ("faster", "level", "slower")


class Page(HTMLParser):
    """Every tag with its attributes, and the text of each figure caption."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.captions: list[str] = []
        self._caption: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        if tag == "figcaption":
            self._caption = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "figcaption" and self._caption is not None:
            self.captions.append("".join(self._caption))
            self._caption = None

    def handle_data(self, data: str) -> None:
        if self._caption is not None:
            self._caption.append(data)


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text("utf-8"))
    return page


# both_sides' fakes: reduce-overhead the fastest mode, the contender a little slower
BOTH_SIDES_MS = {
    "eager": 4.0,
    "default": 3.0,
    "reduce-overhead": 2.5,
    "max-autotune": 2.8,
    "mica": 2.7,
}


def both_sides_args(root: Path) -> list:
    """`micakit series` of both sides, two rounds, into root/r (its protocol written beside)."""
    protocol = fake_nanogpt_protocol(root / "p.toml", runs=2)
    return pytorch_args(root / "r", protocol, "--contender", CONTENDER)


def both_sides(tmp_path: Path, cli, fake_env) -> Path:
    """A series of both sides (`both_sides_args`) in tmp_path/r, published as a preview."""
    fake_env(step_ms=BOTH_SIDES_MS)
    out = tmp_path / "r"
    res = cli(*both_sides_args(tmp_path))
    assert res.exit_code == 0, res.output
    # rule 6: no correctness check ran, so the times are shown only in a preview
    assert cli("publish", out, "--preview").exit_code == 0
    return out


def assert_self_contained(out: Path, page: Page) -> None:
    """Opens offline: no script, no external style or font, every image a data: URI."""
    tags = [t for t, _ in page.tags]
    assert "script" not in tags and "iframe" not in tags and "object" not in tags
    for tag, attrs in page.tags:
        for key in ("src", "href", "srcset", "data"):
            value = attrs.get(key)
            if value is None:
                continue
            if tag == "img":
                assert key == "src" and value.startswith("data:image/png;base64,"), value[:60]
            elif tag == "link":
                assert attrs.get("rel") == "icon" and value == "data:,", attrs
            elif value.startswith(("http://", "https://")):
                assert tag == "a" and value.startswith(DOCS), (tag, value)
            elif tag == "a" and not value.startswith("#"):
                # a relative link to the raw files: it must lead somewhere in the directory
                assert (out / value).exists(), value
    heads = [a for t, a in page.tags if t == "meta" and a.get("http-equiv")]
    assert heads and "default-src 'none'" in heads[0]["content"]


@pytest.mark.slow  # runs whole series: more than a few seconds
def test_report_html_is_self_contained_and_keeps_the_reports_words(tmp_path, cli, fake_env):
    out = both_sides(tmp_path, cli, fake_env)
    html_path = out / "report.html"
    text = html_path.read_text("utf-8")
    page = parse(html_path)
    assert_self_contained(out, page)
    # the comparison table of D1, with §9's naming of PyTorch and M1's size sentence
    torch = json.loads((out / "versions.json").read_text())["pytorch"]["torch"]
    assert "<table>" in text and "contender build" in text and "ratio P/M" in text
    assert f"PyTorch {torch} reduce-overhead mode, float32, attention: " in text
    assert M1_SIZE in text
    assert "Hypothesis, not a protocol result" in text
    # every row that carries numbers links its runs' raw logs (rule 4)
    assert "raw logs" in text and 'href="runs/0004-shakespeare-char.float32.contender.mica' in text
    # the plots, embedded and as files, each caption naming raw files it came from
    imgs = [a["src"] for t, a in page.tags if t == "img"]
    files = sorted((out / "plots").glob("*.png"))
    assert {p.name.split(".")[0] for p in files} == {"step-times", "compile-costs", "loss"}
    assert sorted(base64.b64decode(s.split(",", 1)[1]) for s in imgs) == sorted(
        p.read_bytes() for p in files
    )
    assert len(page.captions) == len(files)
    for caption in page.captions:
        assert "stdout.log" in caption and M1_SIZE in caption
        # §9: the verdict words belong to D1's table; a caption never uses them
        assert not any(w in caption.lower().split() for w in VERDICT_WORDS), caption
    # the summary first, the metadata folded, the versions a table in words
    assert text.index('id="summary"') < text.index('<details id="metadata">')
    assert "<summary>How this series was run: metadata and versions</summary>" in text
    assert "&lt;details" not in text and ">nanoGPT commit</td>" in text
    # what compiling costs: a table in report.md, the plot in the page, from the stamps
    md = (out / "report.md").read_text()
    costs = md.split("## What compiling costs")[1].split("\n## ")[0]
    assert "| configuration" in costs and "break-even against eager (steps)" in costs
    assert "eager is the reference" in costs
    assert 'id="compile-costs.cpu.shakespeare-char.float32"' in text
    costs_html = text.split("What compiling costs</h2>")[1].split("<h2")[0]
    assert "raw logs" in costs_html and "/stdout.log" in costs_html
    # plot titles are short: the model's sentence and the labels stand in the captions
    assert all(len(a["alt"]) < 400 for t, a in page.tags if t == "img")
    # a CPU series has no card samples, and says so
    assert "This is a CPU series: no card was sampled" in text
    # rerun.sh is linked, its commands are not on the page (pages of shell)
    assert 'href="rerun.sh"' in text
    assert 'micakit series --out "$TARGET" "${args[@]}"' not in text
    # the same raw files give the same bytes (plots deterministic, for `micakit verify`)
    before = {p: p.read_bytes() for p in [html_path, *files, out / "rerun.sh"]}
    assert cli("publish", out, "--preview").exit_code == 0
    assert {p: p.read_bytes() for p in before} == before


def micakit_on_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has `micakit`: this checkout's kit under this Python."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "micakit"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kit.cli.main "$@"\n')
    shim.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    return {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT)}


@pytest.mark.slow
def test_rerun_sh_runs_the_series_again_and_recomputes_it(tmp_path, fast_protocol, fake_env, cli):
    fake_env(step_ms={"mica": 2.0})
    out = tmp_path / "r"
    assert cli(*contender_args(out, fast_protocol, "--precision", "float32")).exit_code == 0
    script = out / "rerun.sh"
    assert script.stat().st_mode & stat.S_IXUSR
    lines = script.read_text().splitlines()
    assert lines[0] == "#!/usr/bin/env bash" and "set -euo pipefail" in lines
    again = tmp_path / "again"
    run = subprocess.run(
        [str(script), str(again)],
        env=micakit_on_path(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "every published number matches" in run.stdout  # verify: the original, then the new
    new = json.loads((again / "manifest.json").read_text())
    old = json.loads((out / "manifest.json").read_text())
    assert new["protocol_sha256"] == old["protocol_sha256"]
    for key in ("models", "precisions", "device", "sides", "executor", "contender"):
        assert new["options"][key] == old["options"][key], key
    assert (again / "report.html").exists() and (again / "rerun.sh").exists()
    # a contender that is not the program the series ran is refused, naming both digests
    other = tmp_path / "other"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    env = {**micakit_on_path(tmp_path), "CONTENDER": str(other)}
    run = subprocess.run(
        [str(script), str(tmp_path / "x")], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2 and "not the series'" in run.stderr


def fake_docker(tmp_path: Path, image_id: str) -> tuple[dict[str, str], Path]:
    """A `docker` that records its calls, knows one image, and runs nothing."""
    calls = tmp_path / "docker-calls"
    bin_dir = tmp_path / "docker-bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$*" >> "{calls}"\n'
        f'if [ "$1 $2 $3" = "image inspect --format" ]; then echo "{image_id}"; fi\n'
    )
    docker.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, calls


def test_rerun_sh_in_the_runner_image_pins_what_was_recorded(tmp_path, fast_protocol):
    # a Docker series' records, as the Docker executor may write them
    out = tmp_path / "series"
    out.mkdir()
    program = tmp_path / "inputs" / "mica"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    import hashlib

    digest = hashlib.sha256(program.read_bytes()).hexdigest()
    manifest = {
        "schema": 1,
        "kit_version": "0.1.0",
        "kit_commit": "c0ffee" * 6 + "c0ff",
        "protocol_name": "TR-2",
        "protocol_sha256": "ab" * 32,
        "executor": "docker",
        "command": ["micakit", "series", "--out", "/results/L4"],
        "date_utc": "2026-10-05",
        "series": {"card": "NVIDIA L4", "device": "cuda", "models": ["shakespeare-char"]},
        "options": {
            "device": "cuda",
            "models": ["shakespeare-char"],
            "precisions": ["float32"],
            "sides": ["pytorch", "contender"],
            "contender": str(program),
            "gpu": "GPU-1234",
            "idle_timeout_s": 60.0,
            "env": {"CUDA_MODULE_LOADING": "LAZY"},
            "protocol": "/opt/micakit/benchmarks/NanoGpt/protocol.toml",
        },
    }
    versions = {
        "card": {"name": "NVIDIA L4"},
        "contender": {"says": "mica 7.7.0", "program_sha256": digest},
        "images": {
            "runner": {
                "image_id": "sha256:" + "1" * 64,
                "repo_digests": ["micakit@sha256:" + "2" * 64],
            },
            "pytorch": {"image_id": "sha256:" + "3" * 64},
        },
    }
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "versions.json").write_text(json.dumps(versions))
    script = rerun.write(ResultsDir(out))
    text = script.read_text()
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert "IMAGE=${IMAGE:-micakit@sha256:" + "2" * 64 + "}" in text
    assert "versions.json: images.pytorch.image_id = sha256:" + "3" * 64 in text
    assert "GPU=${GPU-''}  # recorded: GPU-1234" in text  # a UUID names the original card only
    env, calls = fake_docker(tmp_path, "sha256:" + "1" * 64)
    new = tmp_path / "results" / "again"
    run = subprocess.run([str(script), str(new)], env=env, capture_output=True, text=True)
    # the fake runs nothing, so the last check finds no manifest: every command before it ran
    assert run.returncode == 2, run.stderr
    called = calls.read_text().splitlines()
    # every image is looked for; the one whose id differs from the record is named
    assert f"image inspect micakit-pytorch:0.1.0-{'ab' * 6}" in called
    assert "not the series' sha256:" + "3" * 64 in run.stderr
    runs = [c for c in called if c.startswith("run ")]
    image = "micakit@sha256:" + "2" * 64
    mounts = (
        f"run --rm --gpus all -v /var/run/docker.sock:/var/run/docker.sock "
        f"-v {new.parent}:/results -v {out}:/original:ro -v {program.parent}:/inputs/contender:ro "
        f"{image}"
    )
    assert runs == [
        f"{mounts} verify /original",
        f"{mounts} series --out /results/again --device cuda --model shakespeare-char "
        f"--precision float32 --executor docker --idle-timeout 60 --env CUDA_MODULE_LOADING=LAZY "
        f"--contender /inputs/contender/mica --pytorch-image micakit-pytorch:0.1.0-{'ab' * 6} "
        f"--mica-image micakit-mica:0.1.0-{'ab' * 6}",
        f"{mounts} report /results/again",
        f"{mounts} verify /results/again",
    ]


def test_rerun_sh_from_a_directory_that_recorded_little(tmp_path):
    """An old directory: no options, no versions.json; the script still says what it can."""
    out = tmp_path / "old"
    out.mkdir()
    (out / "manifest.json").write_text(
        json.dumps(
            {
                "schema": 1,
                "kit_version": "0.0.9",
                "protocol_sha256": "cd" * 32,
                "series": {
                    "card": "cpu",
                    "device": "cpu",
                    "smoke": True,
                    "models": ["shakespeare-char"],
                    "precisions": ["float32"],
                    "sides": ["pytorch"],
                    "extra": {},
                },
            }
        )
    )
    text = rerun.script(ResultsDir(out))
    assert subprocess.run(["bash", "-n", "-c", text]).returncode == 0
    assert "MODE=${MODE:-local}" in text and "IMAGE=${IMAGE:-micakit:0.0.9-cdcdcdcdcdcd}" in text
    assert "args=(--smoke --device cpu --model shakespeare-char --precision float32)" in text
    assert "none: this series ran before images were recorded" in text


@pytest.mark.slow
def test_card_conditions_and_kernel_families_are_plotted(tmp_path, cli, fake_env, monkeypatch):
    """A scripted card and a stand-in Nsight Systems: every kind of plot, captions naming files."""
    from kit.telemetry import nvml
    from tests.cli.test_conditions import ScriptedCard

    nsys = tmp_path / "bin" / "nsys"
    nsys.parent.mkdir()
    nsys.write_text(FAKE_NSYS)
    nsys.chmod(0o755)
    monkeypatch.setenv("PATH", f"{nsys.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NSYS_TABLE", str(ROOT / "tests/fixtures/nsys/kernsum_contender.txt"))
    monkeypatch.setattr(nvml, "open_card", lambda *a: ScriptedCard())
    protocol = write_protocol(tmp_path / "p.toml", runs=2)
    fake_env(step_ms={"*": 15.0})  # a window of 1.2 s: the 1 s sampler lands inside it
    out = tmp_path / "r"
    args = contender_args(out, protocol, "--precision", "float32", device="cuda")
    res = cli(*args)
    assert res.exit_code == 0, res.output
    # rule 6 withholds the unchecked step times, so there is no step time to draw...
    steps = (out / "report.html").read_text().split("<h3>Step times</h3>")[1].split("<h3>")[0]
    assert "no step time to draw" in steps and "<figure" not in steps
    # ...until a preview shows them, labelled
    assert cli("publish", out, "--preview").exit_code == 0
    page = parse(out / "report.html")
    assert_self_contained(out, page)
    names = sorted(p.name.split(".")[0] for p in (out / "plots").glob("*.png"))
    assert names == ["conditions", "kernel-families", "loss", "step-times"]
    captions = " ".join(page.captions)
    assert "samples.jsonl" in captions and "nsys-stats/stdout.log" in captions
    assert "profiled run's kernel time" in captions


# `nsys profile ... PROGRAM` runs the program; `nsys stats` prints a recorded kernel table
FAKE_NSYS = """#!/usr/bin/env python3
import os, sys
args = sys.argv[1:]
if args[0] == "profile":
    open(args[args.index("--output") + 1] + ".nsys-rep", "w").write("fake report")
    program = args[args.index("--cpuctxsw") + 2:]
    os.execvp(program[0], program)
sys.stdout.write(open(os.environ["FAKE_NSYS_TABLE"]).read())
"""

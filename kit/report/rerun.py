"""rerun.sh: the exact commands that run a series again on another machine, and recompute it.

§3 rule 7 publishes "every log, kernel table, loss curve and script, so anyone can recompute
every number from the container", so every results directory carries the commands that run
its series again, with image digests, and `micakit report`/`verify` to recompute it.
The script is built from manifest.json and versions.json alone, so `micakit publish` writes it
again for any directory, old ones included: a field an older kit did not record is left out
and the script says what it could not pin.

Two ways to run it, as the series ran: in the runner image (`docker run ... micakit:TAG series
...`, the Docker executor), or with `micakit` on PATH (the local executor, e.g. a CPU smoke
series). Paths of the original machine (the contender, local copies of nanoGPT and its data)
default to what was recorded and are overridden by environment variables; the contender is
checked by its recorded SHA-256, nanoGPT and the data by the kit itself against the protocol.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from kit.results import store
from kit.results.documents import Manifest
from kit.results.planned import SIDES
from kit.results.store import ResultsDir

RERUN = "rerun.sh"
BODY = "rerun-body.sh"  # in kit/files
# the reference protocol, as the checkout and the installed package (kit/files) name it
DEFAULT_PROTOCOL = ("benchmarks/NanoGpt/protocol.toml", "kit/files/protocol.toml")
# keys under which a record names an image; the Docker executor's records may add more
IMAGE_KEYS = ("image", "image_id", "image_digest", "repo_digest", "repo_digests", "digests")
# inputs that lie on the original machine: (option, environment variable, what it is)
INPUTS = (
    ("nanogpt", "NANOGPT", "a nanoGPT checkout (empty: downloaded at the pinned commit)"),
    ("input", "INPUT", "tiny Shakespeare's input.txt (empty: downloaded)"),
    ("tiktoken_files", "TIKTOKEN_FILES", "GPT-2's vocab.bpe and encoder.json (empty: fetched)"),
)


def image_records(docs: Mapping[str, object]) -> list[tuple[str, str]]:
    """Every image reference the records hold: ("versions.json: pytorch.image_id", "sha256:…").

    Searched by key rather than by place, so the Docker executor can record its images where
    it likes (a side's entry, an "images" map) and this script still pins them.
    """

    def walk(obj: object, where: str) -> Iterator[tuple[str, str]]:
        if isinstance(obj, dict):
            for k, v in obj.items():
                here = f"{where}.{k}" if where else str(k)
                if k in IMAGE_KEYS and isinstance(v, str) and v:
                    yield here, v
                elif k in IMAGE_KEYS and isinstance(v, list):
                    yield from ((here, str(x)) for x in v if isinstance(x, str) and x)
                else:
                    yield from walk(v, here)

    out = []
    for name, doc in docs.items():
        out += [(f"{name}: {where}", value) for where, value in walk(doc, "")]
    return out


# the images of a Docker series: (role, name, words that mark the role's records)
IMAGES = (
    ("runner", "micakit", ("runner",)),
    ("pytorch", "micakit-pytorch", ("pytorch",)),
    ("mica", "micakit-mica", ("mica", "contender")),
)


def pinned_images(
    manifest: Manifest, o: Mapping[str, Any], records: list[tuple[str, str]]
) -> dict[str, tuple[str, str]]:
    """Per image, the reference to run and the image id to compare it with ("" if none).

    A registry digest (name@sha256:…) pins an image exactly; without one, the name the series
    named (--pytorch-image, --mica-image) or the tag the images are built under
    (scripts/build-images.sh, kit/images.py: the kit's version and the protocol's hash).
    """
    version = manifest.kit_version or "unknown"
    tag = f"{version}-{manifest.protocol_sha256[:12]}".rstrip("-")
    out = {}
    for role, name, words in IMAGES:
        mine = [v for where, v in records if any(w in where.lower() for w in words)]
        digest = next((v for v in mine if "@sha256:" in v), "")
        image_id = next((v for v in mine if v.startswith("sha256:")), "")
        out[role] = (digest or o.get(f"{role}_image") or f"{name}:{tag}", image_id)
    return out


def options(manifest: Manifest) -> dict[str, Any]:
    """The series' options: the resolved ones the manifest keeps, else its spec (old kits)."""
    o = dict(manifest.options)
    spec = manifest.series or {}
    o.setdefault("models", spec.get("models") or [])
    o.setdefault("precisions", spec.get("precisions") or [])
    o.setdefault("device", spec.get("device"))
    o.setdefault("smoke", bool(spec.get("smoke")))
    o.setdefault("sides", spec.get("sides") or list(SIDES))
    contender = (spec.get("extra") or {}).get("contender")
    o.setdefault("contender", None if contender in (None, "none given") else contender)
    return o


def _series_args(o: dict, executor: str) -> list[str]:
    """The fixed options, quoted: the same models, precisions, device, sides and card rules."""
    args = []
    if o.get("smoke"):
        args.append("--smoke")
    if o.get("device"):
        args += ["--device", str(o["device"])]
    if o.get("full_cpu"):
        args.append("--full-cpu")
    for m in o.get("models") or []:
        args += ["--model", str(m)]
    for p in o.get("precisions") or []:
        args += ["--precision", str(p)]
    if "pytorch" not in (o.get("sides") or ["pytorch"]):
        args.append("--no-pytorch")
    if executor in ("local", "docker"):
        args += ["--executor", executor]
    if o.get("refuse_busy"):
        args.append("--refuse-busy")
    if o.get("idle_timeout_s") is not None:
        args += ["--idle-timeout", f"{float(o['idle_timeout_s']):g}"]
    for key, value in (o.get("env") or {}).items():  # recorded: they reach every run
        args += ["--env", f"{key}={value}"]
    return [shlex.quote(a) for a in args]


def body_template() -> str:
    """rerun.sh's constant part, a shell file shipped in the package, less its own notes
    ("##" lines); script() fills in its @...@ places."""
    text = (resources.files("kit") / "files" / BODY).read_text()
    return "".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith("## "))


@dataclass(frozen=True)
class _Recorded:
    """What rerun.sh says of its series, read from manifest.json and versions.json."""

    manifest: Manifest
    options: dict[str, Any]
    executor: str  # "": not recorded
    records: list[tuple[str, str]]  # every image reference the records hold
    images: dict[str, tuple[str, str]]  # per image: the reference to run, its id
    sides: list[str]  # the images' roles: pytorch, mica
    kit_commit: str
    contender: str
    contender_sha: str
    protocol: str  # "": the kit's own
    gpu: str
    card: object  # the card's name, as recorded


def _recorded(rd: ResultsDir) -> _Recorded:
    manifest = rd.manifest()
    found = rd.versions()
    o = options(manifest)
    executor = str(manifest.executor or o.get("executor") or "")  # "": not recorded
    records = image_records({"manifest.json": manifest.to_json(), "versions.json": found.to_json()})
    kit_commit = manifest.kit_commit
    if kit_commit == "unknown":
        kit_commit = str(found.kit.get("commit") or "")
    protocol = str(o.get("protocol") or "")
    return _Recorded(
        manifest=manifest,
        options=o,
        executor=executor,
        records=records,
        images=pinned_images(manifest, o, records),
        sides=[r for r, k in (("pytorch", "pytorch"), ("mica", "contender")) if k in o["sides"]],
        kit_commit=kit_commit,
        contender=o.get("contender") or "",
        contender_sha=str(found.side("contender").get("program_sha256") or ""),
        protocol="" if protocol.endswith(DEFAULT_PROTOCOL) else protocol,
        gpu=str(o.get("gpu") or ""),
        card=found.card.get("name") or (manifest.series or {}).get("card"),
    )


def script(rd: ResultsDir) -> str:
    """The text of rerun.sh for this results directory."""
    s = _recorded(rd)
    return "\n".join([*_head(s), *_settings(s), _body(s)])


def _head(s: _Recorded) -> list[str]:
    """The comment that opens rerun.sh: the series, its usage, the images it recorded."""
    q = shlex.quote
    shown = [f"#   {where} = {value}" for where, value in s.records] or [
        "#   none: this series ran before images were recorded, or on the local executor;",
        "#   the runner image is named by its tag, and the versions check compares the rest",
    ]
    return [
        "#!/usr/bin/env bash",
        "# rerun.sh: run this series again on another machine, then recompute and check it.",
        "#",
        f"# Written by micakit {s.manifest.kit_version or '?'} (kit/rerun.py) from this "
        "directory's manifest.json",
        "# and versions.json; `micakit publish` writes it again.",
        f"# The series: {s.manifest.protocol_name or 'the protocol'} on {s.card}, "
        f"{s.manifest.date_utc or 'date not recorded'}, executor {s.executor};",
        f"# kit commit {s.kit_commit or 'not recorded'}; protocol SHA-256 "
        f"{s.manifest.protocol_sha256 or 'not recorded'}.",
        f"# Its command line: {' '.join(q(a) for a in s.manifest.command)}",
        "#",
        "# Usage: bash rerun.sh [NEW-RESULTS-DIR]   (default: ./rerun-<this directory's name>)",
        "# Environment, each defaulting to what the series recorded:",
        "#   MODE=docker|local  docker: in the runner image (a GPU needs the NVIDIA Container",
        "#                      Toolkit); local: `micakit` on PATH, installed at the kit commit",
        "#   IMAGE=REF          the runner image; PYTORCH_IMAGE, MICA_IMAGE: the sides' images",
        "#   DOCKER_ENGINE=URL  the engine the series drove (--docker-host; empty: this one)",
        "#   KIT=PATH           a micakit checkout at the kit commit: builds the image if absent",
        "#   CONTENDER=PATH     the contender program (checked by its SHA-256 in versions.json)",
        *[f"#   {(env + '=PATH').ljust(18)} {what}" for _, env, what in INPUTS],
        "#   PROTOCOL=PATH      the protocol file (default: the kit's own, as recorded)",
        "#   GPU=INDEX|UUID     the card (empty: card 0)",
        "# Images the series recorded:",
        *shown,
    ]


def _settings(s: _Recorded) -> list[str]:
    """The shell variables: each defaults to what the series recorded."""
    q = shlex.quote
    gpu_now = "" if s.gpu.startswith("GPU-") else s.gpu  # a UUID names the original card only
    return [
        "set -euo pipefail",
        "",
        'HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # the series to rerun',
        'OUT=$(realpath -m "${1:-$PWD/rerun-$(basename "$HERE")}")',
        f"MODE=${{MODE:-{'docker' if s.executor == 'docker' else 'local'}}}",
        f"IMAGE=${{IMAGE:-{q(s.images['runner'][0])}}}",
        f"IMAGE_ID={q(s.images['runner'][1])}",
        *[f"{r.upper()}_IMAGE=${{{r.upper()}_IMAGE:-{q(s.images[r][0])}}}" for r in s.sides],
        *[f"{r.upper()}_IMAGE_ID={q(s.images[r][1])}" for r in s.sides],
        f"DOCKER_ENGINE=${{DOCKER_ENGINE-{q(str(s.options.get('docker_host') or ''))}}}",
        f"KIT_VERSION={q(s.manifest.kit_version)}",
        f"KIT_COMMIT={q(s.kit_commit)}",
        f"PROTOCOL_SHA256={q(s.manifest.protocol_sha256)}",
        f"CONTENDER=${{CONTENDER-{q(s.contender)}}}",
        f"CONTENDER_SHA256={q(s.contender_sha)}",
        *[f"{env}=${{{env}-{q(str(s.options.get(key) or ''))}}}" for key, env, _ in INPUTS],
        f"PROTOCOL=${{PROTOCOL-{q(s.protocol)}}}",
        f"GPU=${{GPU-{q(gpu_now)}}}" + (f"  # recorded: {s.gpu}" if s.gpu != gpu_now else ""),
    ]


def _body(s: _Recorded) -> str:
    """rerun.sh's constant part, filled in with the series' options and images."""
    inputs = [
        f'if [ -n "${env}" ]; then seen {key} "${env}" {env} && '
        f'args+=(--{key.replace("_", "-")} "$SEEN"); fi'
        for key, env, _ in INPUTS
    ]
    side_images = " ".join(f'"{r}" "${r.upper()}_IMAGE" "${r.upper()}_IMAGE_ID"' for r in s.sides)
    if s.executor == "docker":  # the images each side ran in, named exactly
        inputs += [f'args+=(--{r}-image "${r.upper()}_IMAGE")' for r in s.sides]
    return (
        body_template()
        .replace("@ARGS@", " ".join(_series_args(s.options, s.executor)))
        .replace("@SIDE_IMAGES@", side_images)
        .replace("@INPUTS@", "\n".join(inputs))
        .replace("@GPUS@", " --gpus all" if s.options.get("device") != "cpu" else "")
    )


def write(rd: ResultsDir) -> Path:
    """rerun.sh, written whole and executable."""
    path = rd.root / RERUN
    store.write_atomic(path, script(rd))
    path.chmod(0o755)
    return path

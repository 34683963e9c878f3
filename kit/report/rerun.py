"""rerun.sh: the exact commands that run a series again on another machine, and recompute it.

§3 rule 7 publishes "every log, kernel table, loss curve and script, so anyone can recompute
every number from the container"; issue 7 asks every results directory to carry the commands
that run its series again, with image digests, and `micakit report`/`verify` to recompute it.
The script is built from manifest.json and versions.json alone, so `micakit report` writes it
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kit.engine import store
from kit.engine.store import ResultsDir

RERUN = "rerun.sh"
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


def image_records(docs: dict[str, Any]) -> list[tuple[str, str]]:
    """Every image reference the records hold: ("versions.json: pytorch.image_id", "sha256:…").

    Searched by key rather than by place, so the Docker executor can record its images where
    it likes (a side's entry, an "images" map) and this script still pins them.
    """

    def walk(obj: Any, where: str) -> Iterator[tuple[str, str]]:
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
    manifest: dict, o: dict, records: list[tuple[str, str]]
) -> dict[str, tuple[str, str]]:
    """Per image, the reference to run and the image id to compare it with ("" if none).

    A registry digest (name@sha256:…) pins an image exactly; without one, the name the series
    named (--pytorch-image, --mica-image) or the tag the images are built under
    (scripts/build-images.sh, kit/images.py: the kit's version and the protocol's hash).
    """
    version = manifest.get("kit_version", "unknown")
    tag = f"{version}-{str(manifest.get('protocol_sha256', ''))[:12]}".rstrip("-")
    out = {}
    for role, name, words in IMAGES:
        mine = [v for where, v in records if any(w in where.lower() for w in words)]
        digest = next((v for v in mine if "@sha256:" in v), "")
        image_id = next((v for v in mine if v.startswith("sha256:")), "")
        out[role] = (digest or o.get(f"{role}_image") or f"{name}:{tag}", image_id)
    return out


def options(manifest: dict) -> dict[str, Any]:
    """The series' options: the resolved ones the manifest keeps, else its spec (old kits)."""
    o = dict(manifest.get("options") or {})
    spec = manifest.get("series") or {}
    o.setdefault("models", spec.get("models") or [])
    o.setdefault("precisions", spec.get("precisions") or [])
    o.setdefault("device", spec.get("device"))
    o.setdefault("smoke", bool(spec.get("smoke")))
    o.setdefault("sides", spec.get("sides") or ["pytorch", "contender"])
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


def script(rd: ResultsDir) -> str:
    """The text of rerun.sh for this results directory."""
    manifest = rd.manifest()
    found = rd.read_json("versions.json") if (rd.root / "versions.json").exists() else {}
    o = options(manifest)
    executor = str(manifest.get("executor") or o.get("executor") or "")  # "": not recorded
    records = image_records({"manifest.json": manifest, "versions.json": found})
    images = pinned_images(manifest, o, records)
    sides = [r for r, k in (("pytorch", "pytorch"), ("mica", "contender")) if k in o["sides"]]
    q = shlex.quote
    kit_commit = str(manifest.get("kit_commit") or (found.get("kit") or {}).get("commit") or "")
    contender = o.get("contender") or ""
    contender_sha = str((found.get("contender") or {}).get("program_sha256") or "")
    protocol = str(o.get("protocol") or "")
    protocol = "" if protocol.endswith(DEFAULT_PROTOCOL) else protocol
    gpu = str(o.get("gpu") or "")
    card = (found.get("card") or {}).get("name") or (manifest.get("series") or {}).get("card")
    shown = [f"#   {where} = {value}" for where, value in records] or [
        "#   none: this series ran before images were recorded, or on the local executor;",
        "#   the runner image is named by its tag, and the versions check compares the rest",
    ]
    head = [
        "#!/usr/bin/env bash",
        "# rerun.sh: run this series again on another machine, then recompute and check it.",
        "#",
        f"# Written by micakit {manifest.get('kit_version', '?')} (kit/rerun.py) from this "
        "directory's manifest.json",
        "# and versions.json; `micakit report` writes it again.",
        f"# The series: {manifest.get('protocol_name', 'the protocol')} on {card}, "
        f"{manifest.get('date_utc', 'date not recorded')}, executor {executor};",
        f"# kit commit {kit_commit or 'not recorded'}; protocol SHA-256 "
        f"{manifest.get('protocol_sha256', 'not recorded')}.",
        f"# Its command line: {' '.join(q(str(a)) for a in manifest.get('command') or [])}",
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
    gpu_now = "" if gpu.startswith("GPU-") else gpu  # a UUID names the original card only
    settings = [
        "set -euo pipefail",
        "",
        'HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # the series to rerun',
        'OUT=$(realpath -m "${1:-$PWD/rerun-$(basename "$HERE")}")',
        f"MODE=${{MODE:-{'docker' if executor == 'docker' else 'local'}}}",
        f"IMAGE=${{IMAGE:-{q(images['runner'][0])}}}",
        f"IMAGE_ID={q(images['runner'][1])}",
        *[f"{r.upper()}_IMAGE=${{{r.upper()}_IMAGE:-{q(images[r][0])}}}" for r in sides],
        *[f"{r.upper()}_IMAGE_ID={q(images[r][1])}" for r in sides],
        f"DOCKER_ENGINE=${{DOCKER_ENGINE-{q(str(o.get('docker_host') or ''))}}}",
        f"KIT_VERSION={q(str(manifest.get('kit_version', '')))}",
        f"KIT_COMMIT={q(kit_commit)}",
        f"PROTOCOL_SHA256={q(str(manifest.get('protocol_sha256', '')))}",
        f"CONTENDER=${{CONTENDER-{q(contender)}}}",
        f"CONTENDER_SHA256={q(contender_sha)}",
        *[f"{env}=${{{env}-{q(str(o.get(key) or ''))}}}" for key, env, _ in INPUTS],
        f"PROTOCOL=${{PROTOCOL-{q(protocol)}}}",
        f"GPU=${{GPU-{q(gpu_now)}}}" + (f"  # recorded: {gpu}" if gpu != gpu_now else ""),
    ]
    inputs = [
        f'if [ -n "${env}" ]; then seen {key} "${env}" {env} && '
        f'args+=(--{key.replace("_", "-")} "$SEEN"); fi'
        for key, env, _ in INPUTS
    ]
    side_images = " ".join(f'"{r}" "${r.upper()}_IMAGE" "${r.upper()}_IMAGE_ID"' for r in sides)
    if executor == "docker":  # the images each side ran in, named exactly
        inputs += [f'args+=(--{r}-image "${r.upper()}_IMAGE")' for r in sides]
    body = (
        BODY.replace("@ARGS@", " ".join(_series_args(o, executor)))
        .replace("@SIDE_IMAGES@", side_images)
        .replace("@INPUTS@", "\n".join(inputs))
        .replace("@GPUS@", " --gpus all" if o.get("device") != "cpu" else "")
    )
    return "\n".join([*head, *settings, body])


# The constant part of the script; script() fills in the @...@ places.
BODY = r"""
die() {
    echo "rerun: error: $1" >&2
    [ $# -lt 2 ] || echo "  fix: $2" >&2
    exit 2
}

case $MODE in docker | local) ;; *) die "MODE is $MODE" "MODE=docker or MODE=local" ;; esac
[ ! -e "$OUT" ] || die "$OUT exists; a series never overwrites one" "bash rerun.sh NEW-DIR"

mounts=()
# An input as the series sees it: the path itself, or in the runner's container /inputs/NAME
# (a bind mount, which the Docker executor maps back to this host for the runs it starts).
seen() {
    local path
    path=$(realpath -e "$2") || die "no file or folder at $2" "set $3=PATH to your copy"
    SEEN=$path
    if [ "$MODE" = docker ] && [ -d "$path" ]; then
        mounts+=(-v "$path:/inputs/$1:ro")
        SEEN=/inputs/$1
    elif [ "$MODE" = docker ]; then
        mounts+=(-v "$(dirname "$path"):/inputs/$1:ro")
        SEEN=/inputs/$1/$(basename "$path")
    fi
}

args=(@ARGS@)
if [ -n "$CONTENDER" ]; then
    seen contender "$CONTENDER" CONTENDER
    if [ -n "$CONTENDER_SHA256" ]; then
        got=$(sha256sum "$CONTENDER" | cut -d" " -f1)
        [ "$got" = "$CONTENDER_SHA256" ] || die "$CONTENDER has SHA-256 $got, not the \
series' $CONTENDER_SHA256" "name the program the series ran: CONTENDER=PATH bash rerun.sh"
    fi
    args+=(--contender "$SEEN")
fi
@INPUTS@
if [ -n "$PROTOCOL" ]; then seen protocol "$PROTOCOL" PROTOCOL && args+=(--protocol "$SEEN"); fi
if [ -n "$GPU" ]; then args+=(--gpu "$GPU"); fi

if [ -n "$DOCKER_ENGINE" ]; then args+=(--docker-host "$DOCKER_ENGINE"); fi

# An image the rerun needs, pulled by its digest or built from the kit's checkout (KIT).
need_image() {
    docker image inspect "$1" >/dev/null 2>&1 && return 0
    case $1 in
        *@sha256:*) docker pull "$1" && return 0 ;;
    esac
    [ -n "${KIT:-}" ] || die "no image $1 on this machine" \
        "KIT=PATH/TO/micakit bash rerun.sh, with that checkout at $KIT_COMMIT"
    [ "$(git -C "$KIT" rev-parse HEAD)" = "$KIT_COMMIT" ] ||
        die "$KIT is not at the series' kit commit" "git -C $KIT checkout $KIT_COMMIT"
    # the three images, tagged with the kit's version and the protocol's hash
    (cd "$KIT" && bash scripts/build-images.sh -- ${CONTENDER:+--contender "$CONTENDER"})
}
# An image the series recorded by id: say so when this one differs (versions are checked).
same_image() {
    local got
    got=$(docker image inspect --format '{{.Id}}' "$1")
    if [ -n "$2" ] && [ "$got" != "$2" ]; then
        echo "rerun: note: $1 is $got, not the series' $2 (versions are checked)" >&2
    fi
}

if [ "$MODE" = docker ]; then
    set -- runner "$IMAGE" "$IMAGE_ID" @SIDE_IMAGES@
    while [ $# -gt 0 ]; do
        # the sides' images live on the engine the series drives; the series checks those
        if [ -n "$DOCKER_ENGINE" ] && [ "$1" != runner ]; then shift 3 && continue; fi
        need_image "$2"
        same_image "$2" "$3"
        shift 3
    done
    mkdir -p "$(dirname "$OUT")"
    # the kit inside the runner image: results under /results, the series to rerun at /original
    micakit() {
        docker run --rm@GPUS@ -v /var/run/docker.sock:/var/run/docker.sock \
            -v "$(dirname "$OUT"):/results" -v "$HERE:/original:ro" \
            ${mounts[@]+"${mounts[@]}"} "$IMAGE" "$@"
    }
    TARGET=/results/$(basename "$OUT")
    ORIGINAL=/original
else
    command -v micakit >/dev/null ||
        die "no micakit on PATH" "install the kit at $KIT_COMMIT (scripts/install.sh)"
    case $(micakit --version) in
        *" $KIT_VERSION") ;;
        *) die "$(micakit --version) is not the series' kit $KIT_VERSION" "install it" ;;
    esac
    TARGET=$OUT
    ORIGINAL=$HERE
fi

# 0. this series, recomputed from its own raw logs: every published number must match
micakit verify "$ORIGINAL"
# 1. the series again, with the options it recorded
micakit series --out "$TARGET" "${args[@]}"
# 2. every table of the new series recomputed from its raw logs, and checked
micakit report "$TARGET" >/dev/null
micakit verify "$TARGET"
# 3. under the same protocol file (§3 rule 1)
grep -q "\"protocol_sha256\": \"$PROTOCOL_SHA256\"" "$OUT/manifest.json" ||
    die "$OUT ran under another protocol than $PROTOCOL_SHA256" "PROTOCOL=PATH to its own"
echo "rerun: done; compare $HERE/report.html with $OUT/report.html" >&2
"""


def write(rd: ResultsDir) -> Path:
    """rerun.sh, written whole and executable."""
    path = rd.root / RERUN
    store.write_atomic(path, script(rd))
    path.chmod(0o755)
    return path

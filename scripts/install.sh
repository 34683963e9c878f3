#!/usr/bin/env bash
# Install the kit and what it runs with into .venv (idempotent): `micakit`, torch, pytest, ruff.
# torch is pinned by the protocol (benchmarks/NanoGpt/protocol.toml, pytorch.torch).
# Before it installs it says what pip will download and its size; pip's own progress follows.
#   --cpu-torch   torch's CPU-only build, from PyTorch's own index (MICAKIT_TORCH_INDEX, default
#                 https://download.pytorch.org/whl/cpu) where it answers; elsewhere from the
#                 default index, whose Linux wheel brings NVIDIA's CUDA libraries too (smoke.sh)
#   --plan        say what would be downloaded, and stop
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${MICAKIT_VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}
TORCH_INDEX=${MICAKIT_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
CPU_TORCH=0
PLAN=0
for arg in "$@"; do
    case $arg in
        --cpu-torch) CPU_TORCH=1 ;;
        --plan) PLAN=1 ;;
        *) echo "error: unknown option $arg" >&2; echo "  fix: give --cpu-torch, --plan or nothing" >&2; exit 2 ;;
    esac
done
say() { echo "micakit install: $*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
    say "step 1/3: a virtual environment at $VENV"
    "$PY" -m venv "$VENV"
else
    say "step 1/3: the virtual environment at $VENV is there"
fi
pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
helper=("$VENV/bin/python" "$ROOT/scripts/install_plan.py")
pin=$("${helper[@]}" torch-pin)
torch_from=()
if [ "$CPU_TORCH" = 0 ]; then
    say "torch $pin from the default index (with --cpu-torch: the CPU-only build)"
    built=$("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('torch'))" 2>/dev/null || true)
    if [ "${built%+cpu}" != "$built" ]; then
        say "torch $built in $VENV is the CPU-only build: a card needs" \
            "$VENV/bin/pip install --force-reinstall torch==$pin"
    fi
elif why=$("${helper[@]}" reachable "$TORCH_INDEX"); then
    torch_from=(--extra-index-url "$TORCH_INDEX")
    say "torch $pin: PyTorch's CPU-only build, from $TORCH_INDEX"
else
    say "PyTorch's CPU-only index is not reachable ($why)," \
        "so torch $pin comes from the default index: on Linux its wheel brings NVIDIA's CUDA" \
        "libraries, gigabytes more to download and keep than the CPU-only build"
fi

say "step 2/3: what pip will download (resolving, no download yet)"
report=$(mktemp)
trap 'rm -f "$report"' EXIT
"${pip[@]}" install --dry-run --report "$report" ${torch_from[@]+"${torch_from[@]}"} -e "$ROOT[train,dev]" >&2
"${helper[@]}" sizes "$report"
if [ "$PLAN" = 1 ]; then
    exit 0
fi

say "step 3/3: downloading and installing (pip's own progress)"
start=$SECONDS
"${pip[@]}" install ${torch_from[@]+"${torch_from[@]}"} -e "$ROOT[train,dev]" >&2
say "installed $("$VENV/bin/micakit" --version | head -1) in $((SECONDS - start)) s;" \
    "$VENV holds $(du -sh "$VENV" | cut -f1)"

#!/usr/bin/env bash
# Install the kit and what it runs with into .venv (idempotent): `micakit`, torch, pytest, ruff.
# torch is pinned by the protocol (benchmarks/NanoGpt/protocol.toml, pytorch.torch).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${MICAKIT_VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT[train,dev]"
echo "installed: $("$VENV/bin/micakit" --version)" >&2

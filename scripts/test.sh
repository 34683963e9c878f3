#!/usr/bin/env bash
# The README's test command, and exactly what CI runs (.ci/run): set up the machine (Docker
# engine, local base image, wheelhouse; scripts/ci-setup.sh), install the kit, run every test.
# Tests that need what this machine lacks (a GPU, a nanoGPT checkout) skip, saying why.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash scripts/ci-setup.sh
bash scripts/install.sh
.venv/bin/ruff check kit tests benchmarks run.py
.venv/bin/mypy kit
exec .venv/bin/python -m pytest "$@"

#!/usr/bin/env bash
# The README's main job on a machine without a GPU: install the kit, then run the CPU smoke
# series (scaled-down M1, PyTorch's four modes, the same engine, rounds and rotation) into
# results/smoke-<time>. Extra arguments go to `micakit series`, e.g.
#   --nanogpt PATH      a nanoGPT checkout at the pinned commit (when it cannot be downloaded)
#   --input PATH        your copy of tiny Shakespeare's input.txt (when it cannot be downloaded)
#   --contender PATH    a contender program to run beside nanoGPT
# The installation takes torch's CPU-only build from PyTorch's own index where it answers
# (scripts/install.sh --cpu-torch) and says what it downloads, and its size, before it starts.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
echo "smoke: 1/2 installing the kit and torch (CPU-only) into .venv; 2/2 the CPU smoke series" >&2
start=$SECONDS
bash "$ROOT/scripts/install.sh" --cpu-torch
installed=$((SECONDS - start))
out=${MICAKIT_OUT:-$ROOT/results/smoke-$(date -u +%Y%m%dT%H%M%SZ)}
start=$SECONDS
"$ROOT/.venv/bin/micakit" series --smoke --device cpu --executor local --out "$out" "$@"
"$ROOT/.venv/bin/micakit" verify "$out" >&2
echo "results: $out (report: $out/report.md)" >&2
echo "smoke: installation $installed s, series and verify $((SECONDS - start)) s" >&2
# the commands the result block names run as `micakit ...`: the kit lives in .venv
echo "to run them: export PATH=\"$ROOT/.venv/bin:\$PATH\"" >&2

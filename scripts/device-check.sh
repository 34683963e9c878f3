#!/usr/bin/env bash
# The device check: one prepared pass over what the kit does on a real NVIDIA card (NVML, a short
# real series with the local executor, a short A/A round beside it and `verify`, float16 through
# GradScaler, a forced CUDA out-of-memory run, library opens, graph breaks, nsys where it exists),
# every raw capture and a one-page summary.md in one folder ($OUT when set, else ./device-check).
# Under 8 minutes on one card. With --device cpu it runs here too, skipping (and naming) what needs a card.
#
#   bash scripts/device-check.sh --nanogpt PATH --input PATH/input.txt [--device cpu] [--out DIR]
#       [--protocol FILE] [--contender PROGRAM] [--keep-work]
#
# --protocol: another protocol file (default: the kit's own); the check runs a one-round copy of
# it, beside copies of the files it names beside itself. --contender: a contender program, run
# beside nanoGPT. --keep-work: keep the series' nanoGPT trees and datasets (removed by default).
# A step that fails says why in one line; the whole output of each program is in NAME.log.
#
# Needs a Python with torch (PYTHON, default python3) and the kit's dependencies. On a machine
# with no package index, carry them in a folder (pip install --target DIR, on a machine with the
# same Python) and name it in MICAKIT_SITE. No Docker engine, internet or nsys is needed, and a
# torch other than the protocol's pin is accepted: every number then reads "preparation".
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
if [ -n "${MICAKIT_SITE:-}" ]; then
    export PYTHONPATH="$MICAKIT_SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
exec "$PY" "$ROOT/scripts/device_check.py" "$@"

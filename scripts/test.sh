#!/usr/bin/env bash
# The README's test command, and exactly what CI runs (.ci/run): set up the machine (Docker
# engine, local base image, wheelhouse; scripts/ci-setup.sh), install the kit, run every test.
# Tests that need what this machine lacks (a GPU, a nanoGPT checkout, tiny Shakespeare) skip,
# saying why.
#
# pytest runs as on a fresh machine, as far as one can be emulated: HOME is an empty temporary
# folder (no ~/.cache/micakit, no ~/.ssh) and PATH holds no virtual environment, so the suite
# itself must start every program with the kit's interpreter; a hidden dependency on this
# machine fails here, not on the next one. Set MICAKIT_TEST_SETUP=0 to skip the set-up steps.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${MICAKIT_VENV:-$ROOT/.venv}
cd "$ROOT"
if [ "${MICAKIT_TEST_SETUP:-1}" != 0 ]; then
    # Debian's packages and the base image's root while the kit installs (neither needs the
    # other); then the kit's venv drives the rest of the set-up (a system Python may refuse
    # packages). The first part's output follows the installation's.
    prepared_log=$(mktemp)
    bash scripts/ci-setup.sh --prepare >"$prepared_log" 2>&1 &
    prepared=$!
    installed=0
    bash scripts/install.sh || installed=$?
    prepared_rc=0
    wait "$prepared" || prepared_rc=$?
    cat "$prepared_log" >&2
    rm -f "$prepared_log"
    [ "$installed" -eq 0 ] || exit "$installed"
    [ "$prepared_rc" -eq 0 ] || exit "$prepared_rc"
fi
home=$(mktemp -d)
scratch=$(mktemp -d)  # the suites' temporary folders and logs, apart from the empty HOME
trap 'rm -rf "$home" "$scratch"' EXIT
# PATH without any virtual environment (this one, or one the caller activated)
path=
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
    [ -n "$d" ] && [ ! -f "$d/activate" ] && [ ! -f "$d/../pyvenv.cfg" ] || continue
    path=${path:+$path:}$d
done
rc=0
suite() { env -u VIRTUAL_ENV HOME="$home" PATH="$path" "$VENV/bin/python" -m pytest "$@"; }
# `micakit cloud`'s boundary is held against the real SkyPilot SDK: the extra micakit[cloud]
# (about 460 MB with its dependencies, from PyPI) in a venv of its own, so that the kit's venv
# stays without it and the suite passes where SkyPilot is not installed. The whole suite only
# (no arguments); MICAKIT_TEST_CLOUD=0 skips it. Made, and its tests run, while the rest of the
# set-up and the suite run; their output follows the rest's.
cloud=${MICAKIT_CLOUD_VENV:-$ROOT/.venv-cloud}
cloud_suite=
if [ $# -eq 0 ] && [ "${MICAKIT_TEST_CLOUD:-1}" != 0 ]; then
    (
        set -e
        [ -x "$cloud/bin/python" ] || "$VENV/bin/python" -m venv "$cloud"
        "$cloud/bin/python" -m pip install -q -e "$ROOT[cloud,dev]"
        env -u VIRTUAL_ENV HOME="$home" PATH="$path" "$cloud/bin/python" -m pytest \
            -p no:cacheprovider --basetemp "$scratch/cloud-tests" \
            tests/unit/cloud tests/cli/test_cloud.py tests/cli/test_cloud_fleet.py
    ) >"$scratch/cloud.log" 2>&1 &
    cloud_suite=$!
fi
# ruff and mypy while the rest of the set-up waits on the engine and the network; their output
# follows the set-up's
lint_log=$(mktemp)
{ "$VENV/bin/ruff" check kit tests benchmarks run.py && "$VENV/bin/mypy" kit; } >"$lint_log" 2>&1 &
linted=$!
setup_rc=0
if [ "${MICAKIT_TEST_SETUP:-1}" != 0 ]; then
    PYTHON="$VENV/bin/python" bash scripts/ci-setup.sh || setup_rc=$?
fi
lint_rc=0
wait "$linted" || lint_rc=$?
cat "$lint_log"
rm -f "$lint_log"
for failed in "$setup_rc" "$lint_rc"; do
    if [ "$failed" -ne 0 ]; then
        [ -z "$cloud_suite" ] || kill -- "$cloud_suite" 2>/dev/null || true
        exit "$failed"
    fi
done

if [ $# -eq 0 ]; then
    # The whole suite in parts at once. The tests that drive the Docker engine, one at a time
    # (they share the engine's tags, its registry and the disk), in the background: most of
    # their time is the engine building, pushing and pulling. Beside them the tests that need
    # no engine, in four workers (pytest-xdist; most of their time is fake programs sleeping
    # through their steps, so they share two cores well; a worker that is done takes tests
    # queued for another, so one long test does not hold the end). Each part has a folder of
    # its own for its temporary files; the Docker part's output follows the other's.
    echo "test.sh: the tests that drive Docker${cloud_suite:+ and the cloud tests} run meanwhile;" \
        "their output follows" >&2
    suite -m docker -p no:cacheprovider --basetemp "$scratch/docker-tests" \
        >"$scratch/docker.log" 2>&1 &
    docker_suite=$!
    suite -m "not docker" -n "${MICAKIT_TEST_WORKERS:-4}" --dist worksteal \
        --basetemp "$scratch/tests" || rc=$?
    docker_rc=0
    wait "$docker_suite" || docker_rc=$?
    cat "$scratch/docker.log"
    [ "$docker_rc" -eq 0 ] || rc=$docker_rc
else
    suite "$@" || rc=$?
fi
if [ -n "$cloud_suite" ]; then
    cloud_rc=0
    wait "$cloud_suite" || cloud_rc=$?
    cat "$scratch/cloud.log"
    [ "$cloud_rc" -eq 0 ] || rc=$cloud_rc
fi
exit "$rc"

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
# set-up and the suite run; their output follows the rest's. Its packages are not compiled to
# bytecode at install (--no-compile: a third of the install's CPU, taken from the suites beside
# it); Python compiles the modules the tests import, as it imports them.
cloud=${MICAKIT_CLOUD_VENV:-$ROOT/.venv-cloud}
cloud_suite=
if [ $# -eq 0 ] && [ "${MICAKIT_TEST_CLOUD:-1}" != 0 ]; then
    (
        set -e
        [ -x "$cloud/bin/python" ] || "$VENV/bin/python" -m venv "$cloud"
        "$cloud/bin/python" -m pip install -q --no-compile -e "$ROOT[cloud,dev]"
        env -u VIRTUAL_ENV HOME="$home" PATH="$path" "$cloud/bin/python" -m pytest \
            -p no:cacheprovider --basetemp "$scratch/cloud-tests" \
            tests/unit/cloud tests/cli/test_cloud.py tests/cli/test_cloud_fleet.py
    ) >"$scratch/cloud.log" 2>&1 &
    cloud_suite=$!
fi
# ruff and mypy beside the rest; their output follows the suites' (the whole suite) or the
# set-up's
lint_log=$scratch/lint.log
{ "$VENV/bin/ruff" check kit tests benchmarks run.py && "$VENV/bin/mypy" kit; } >"$lint_log" 2>&1 &
linted=$!
engine_setup() { # the Docker engine, the local base image and the wheelhouse
    [ "${MICAKIT_TEST_SETUP:-1}" = 0 ] || PYTHON="$VENV/bin/python" bash scripts/ci-setup.sh
}
waited() { # PID LOG: wait for a part, print its log; its exit status
    local part_rc=0
    wait "$1" || part_rc=$?
    cat "$2"
    return "$part_rc"
}

if [ $# -eq 0 ]; then
    # The whole suite in parts at once. The tests that need no engine start at once, in four
    # workers (pytest-xdist; most of their time is fake programs sleeping through their steps,
    # so they share two cores well; a worker that is done takes tests queued for another, so
    # one long test does not hold the end). Beside them, in the background: the engine's
    # set-up, then the tests that drive the Docker engine, one at a time (they share the
    # engine's tags, its registry and the disk; most of their time is the engine building,
    # pushing and pulling). Each part has a folder of its own for its temporary files; the
    # Docker part's output (its set-up's first) follows the other's, then lint's.
    also=${cloud_suite:+, and the cloud tests,}
    echo "test.sh: the engine's set-up and the tests that drive Docker$also run meanwhile;" \
        "their output follows" >&2
    (
        engine_setup || exit
        suite -m docker -p no:cacheprovider --basetemp "$scratch/docker-tests"
    ) >"$scratch/docker.log" 2>&1 &
    docker_suite=$!
    suite -m "not docker" -n "${MICAKIT_TEST_WORKERS:-4}" --dist worksteal \
        --basetemp "$scratch/tests" || rc=$?
    waited "$docker_suite" "$scratch/docker.log" || rc=$?
    waited "$linted" "$lint_log" || rc=$?
else
    setup_rc=0
    engine_setup || setup_rc=$?
    lint_rc=0
    waited "$linted" "$lint_log" || lint_rc=$?
    for failed in "$setup_rc" "$lint_rc"; do
        if [ "$failed" -ne 0 ]; then
            [ -z "$cloud_suite" ] || kill -- "$cloud_suite" 2>/dev/null || true
            exit "$failed"
        fi
    done
    suite "$@" || rc=$?
fi
if [ -n "$cloud_suite" ]; then
    waited "$cloud_suite" "$scratch/cloud.log" || rc=$?
fi
exit "$rc"

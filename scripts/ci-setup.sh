#!/usr/bin/env bash
# Set up a machine to build and test micakit's images, idempotently: the Docker engine,
# debootstrap and a registry to push to (docker-registry) from Debian, a running engine, a local
# base image built from Debian's archive (no image registry needed), and wheelhouse/ filled with
# the wheels the images install, so every image builds with no package index (§8 images; README
# "Set-up").
#
# Each step says how long it took on stderr. Environment:
#   MICAKIT_BASE_IMAGE    the local base image to build  (default micakit-base:bookworm)
#   MICAKIT_DEBIAN_MIRROR Debian mirror for debootstrap (default http://deb.debian.org/debian)
#   MICAKIT_DOCKERD_LOG   where a dockerd started here logs (default /var/log/micakit-dockerd.log)
#   MICAKIT_WHEELHOUSE    the wheel folder               (default <repo>/wheelhouse)
#   MICAKIT_ROOTFS_TAR    the base image's Debian root, kept between runs
#                                                        (default <repo>/.cache/base-rootfs.tar)
#   PYTHON                the Python that runs the kit   (default python3)
#
# `ci-setup.sh --prepare` does the steps that need no Python of the kit's: Debian's packages and
# the base image's root (debootstrap, into MICAKIT_ROOTFS_TAR), so scripts/test.sh runs them
# while the kit installs; the rest (the engine, the image imported, the wheels) follows after.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE_IMAGE=${MICAKIT_BASE_IMAGE:-micakit-base:bookworm}
MIRROR=${MICAKIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
DOCKERD_LOG=${MICAKIT_DOCKERD_LOG:-/var/log/micakit-dockerd.log}
WHEELHOUSE=${MICAKIT_WHEELHOUSE:-$ROOT/wheelhouse}
ROOTFS=${MICAKIT_ROOTFS_TAR:-$ROOT/.cache/base-rootfs.tar}
PY=${PYTHON:-python3}
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo

timed() { # NAME COMMAND...: run a step and say how long it took
    local name=$1 t0 t1
    shift
    t0=$(date +%s%N)
    "$@"
    t1=$(date +%s%N)
    printf 'ci-setup: %-10s %7.1f s\n' "$name" "$(((t1 - t0) / 1000000))e-3" >&2
}

packages() {
    debian_packages
    # the SDK talks to the engine below; `pip install -e .` brings the same package later
    "$PY" -c 'import docker' 2>/dev/null || "$PY" -m pip install -q 'docker>=7.1'
}

debian_packages() {
    local need=()
    command -v dockerd >/dev/null || need+=(docker.io)
    command -v debootstrap >/dev/null || need+=(debootstrap)
    # the SSH test of --docker-host drives this machine's engine through a loopback sshd
    [ -x /usr/sbin/sshd ] || need+=(openssh-server)
    # report.html is checked in headless Chromium (tests/integration/test_chromium.py)
    [ -x /usr/bin/chromium ] || need+=(chromium)
    # `micakit images push` is tested against a registry of its own on 127.0.0.1
    # (tests/integration/test_registry.py); the test starts it, so its service stays off
    [ -x /usr/bin/docker-registry ] || need+=(docker-registry)
    # `micakit cloud run` pulls each machine's results with rsync (tests/cli/test_cloud.py,
    # over ssh on loopback in tests/integration/test_cloud_machine.py)
    command -v rsync >/dev/null || need+=(rsync)
    if [ ${#need[@]} -gt 0 ]; then
        # a download the mirror drops midway is tried again, as `rootfs` does
        $SUDO apt-get update -q -o Acquire::Retries=3
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
            -o Acquire::Retries=3 "${need[@]}"
    fi
}

engine_answers() {
    "$PY" -c 'import docker; docker.from_env(timeout=5).ping()' >/dev/null 2>&1
}

engine() {
    engine_answers && return 0
    if [ -n "${DOCKER_HOST:-}" ]; then
        echo "ci-setup: no engine answers at DOCKER_HOST=$DOCKER_HOST" >&2
        return 1
    fi
    echo "ci-setup: starting dockerd, log in $DOCKERD_LOG" >&2
    $SUDO sh -c "nohup dockerd >'$DOCKERD_LOG' 2>&1 &"
    for _ in $(seq 120); do
        engine_answers && return 0
        sleep 0.5
    done
    echo "ci-setup: dockerd did not answer within 60 s; the end of its log:" >&2
    tail -n 30 "$DOCKERD_LOG" >&2 || true
    return 1
}

base_image() {
    if "$PY" -c 'import docker, sys; docker.from_env().images.get(sys.argv[1])' \
        "$BASE_IMAGE" >/dev/null 2>&1; then
        return 0
    fi
    [ -f "$ROOTFS" ] || rootfs
    "$PY" - "$ROOTFS" "$BASE_IMAGE" <<'PYCODE'
import sys

import docker

path, ref = sys.argv[1:]
repository, _, tag = ref.rpartition(":")
changes = [
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["/bin/bash"]',
]
client = docker.from_env(timeout=600)
client.api.import_image_from_file(path, repository=repository, tag=tag, changes=changes)
print("ci-setup: imported", ref, client.images.get(ref).id, file=sys.stderr)
PYCODE
}

rootfs() {
    # the base image's root as a tar (MICAKIT_ROOTFS_TAR), made once and kept: a later set-up
    # imports it again without Debian's archive
    [ -f "$ROOTFS" ] && return 0
    local tmp attempt
    tmp=$(mktemp -d)
    # minbase: dpkg, apt and essentials only; python3-venv brings ensurepip for the images' venvs.
    # A mirror drops a download now and then ("E: Couldn't download packages: …"): debootstrap
    # stops at the first, so it is run again, up to three times, into a fresh root; the
    # packages it had fetched stay in its cache, and only what is missing is fetched again
    mkdir -p "$tmp/cache"
    for attempt in 1 2 3; do
        $SUDO rm -rf "$tmp/root"
        $SUDO debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
            --cache-dir="$tmp/cache" bookworm "$tmp/root" "$MIRROR" \
            >"$tmp/debootstrap.log" 2>&1 && break
        if [ "$attempt" = 3 ]; then
            tail -n 30 "$tmp/debootstrap.log" >&2
            echo "ci-setup: debootstrap failed 3 times from $MIRROR (its last lines above);" \
                "another mirror: MICAKIT_DEBIAN_MIRROR=URL" >&2
            $SUDO rm -rf "$tmp"
            return 1
        fi
        echo "ci-setup: debootstrap attempt $attempt failed" \
            "($(grep -m1 '^E:' "$tmp/debootstrap.log" || tail -n 1 "$tmp/debootstrap.log"));" \
            "trying again in 10 s" >&2
        sleep 10
    done
    # as debian:bookworm-slim does: no docs or manuals in this or any later layer
    $SUDO tee "$tmp/root/etc/dpkg/dpkg.cfg.d/docker" >/dev/null <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
CFG
    $SUDO sh -c "cd '$tmp/root' && rm -rf var/cache/apt/archives/*.deb var/lib/apt/lists/* \
        usr/share/man/* usr/share/info/* usr/share/locale/* \
        && find usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete"
    mkdir -p "$(dirname "$ROOTFS")"
    $SUDO tar -C "$tmp/root" --numeric-owner -cf "$ROOTFS.part" .
    mv "$ROOTFS.part" "$ROOTFS"  # whole or absent: a set-up stopped midway makes it again
    $SUDO rm -rf "$tmp"
}

wheelhouse() {
    # What the images install: the kit and its dependencies (runner), torch and numpy (PyTorch's
    # image), and setuptools to build the kit. Wheels for the images' Python (3.11, glibc 2.36),
    # whatever Python runs this script. torch comes from pip's configured find-links when one
    # holds it (the CPU wheel on CI machines).
    local reqs platforms=()
    reqs=$("$PY" - "$ROOT/pyproject.toml" <<'PYCODE'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
reqs = list(project["dependencies"]) + list(project["optional-dependencies"]["train"])
reqs += ["numpy", "setuptools>=61", "wheel"]
print("\n".join(sorted(set(reqs))))
PYCODE
)
    mkdir -p "$WHEELHOUSE"
    if [ -f "$WHEELHOUSE/.requirements" ] && [ "$(cat "$WHEELHOUSE/.requirements")" = "$reqs" ]; then
        return 0
    fi
    # pip before 24 does not widen --platform to older manylinux tags, so list them all
    for m in $(seq 36 -1 5); do platforms+=(--platform "manylinux_2_${m}_x86_64"); done
    for m in 2014 2010 1; do platforms+=(--platform "manylinux${m}_x86_64"); done
    # shellcheck disable=SC2086 # one requirement a line
    "$PY" -m pip download -q --dest "$WHEELHOUSE" --only-binary=:all: \
        --python-version 3.11 --implementation cp --abi cp311 "${platforms[@]}" $reqs
    printf '%s' "$reqs" >"$WHEELHOUSE/.requirements"
}

if [ "${1:-}" = --prepare ]; then
    timed packages debian_packages
    timed rootfs rootfs
    exit 0
fi
[ $# -eq 0 ] || { echo "error: unknown option $1" >&2; echo "  fix: give --prepare or nothing" >&2; exit 2; }
timed packages packages
timed engine engine
timed base-image base_image
timed wheelhouse wheelhouse

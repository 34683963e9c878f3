#!/usr/bin/env bash
# Rent a Google Cloud g2-standard-8 (one NVIDIA L4: the card anyone can rent, §4 and amendment
# 7), run a micakit series on it, bring its results directory back, and delete the machine:
# also when a step fails on the way, on Ctrl-C and on SIGTERM (--keep keeps it for debugging).
#
# This script is the path with no extra dependency: bash and the Google Cloud CLI, one machine,
# the images built on it from this checkout. For several machines, another card or cloud, the
# released images by digest, and machines that delete themselves when this computer is gone,
# use `micakit cloud run --machines 1 --instance-type g2-standard-8 --digests digests.json`
# (pip install 'micakit[cloud]': SkyPilot; docs/reproduce.md).
#
# Steps, each a gcloud command printed before it runs (--dry-run prints them and runs none):
#   1. gcloud compute instances create: a Deep Learning VM image that carries NVIDIA's driver
#   2. wait until SSH answers
#   3. install Docker and the NVIDIA Container Toolkit where absent; wait for the driver
#   4. copy this checkout's files (gcloud compute scp --recurse) and build the images there with
#      scripts/build-images.sh, in a python:3.11-slim container (the image's own Python is older)
#   5. docker run ... micakit series --out /results/NAME [SERIES-ARGS]; the copied checkout is
#      at /checkout in the runner, so a program in it is --contender /checkout/PATH
#   6. copy results/NAME back (gcloud compute scp --recurse), also when the series failed
#   7. gcloud compute instances delete
#
# Exit status: 0 done; 2 bad usage or a missing prerequisite; 130 Ctrl-C; 143 SIGTERM; else the
# status of the step that failed (the series' own: 3 a run ended it, see kit/errors.py).
#
# Environment (tests and special cases; the defaults are the recipe's):
#   CLOUDSDK_CORE_PROJECT, CLOUDSDK_COMPUTE_ZONE   project and zone, unless --project/--zone
#   MICAKIT_G2_IMAGE_FAMILY   default common-cu128-ubuntu-2204-nvidia-570 (Ubuntu 22.04, driver 570)
#   MICAKIT_G2_IMAGE_PROJECT  default deeplearning-platform-release
#   MICAKIT_G2_SSH_TRIES, MICAKIT_G2_SSH_WAIT_S   how often and how long to wait for SSH (30, 10)
#   PYTHON                    the local Python that computes the image tag (default python3)
set -euo pipefail
set -E # the ERR trap fires inside functions too

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MACHINE_TYPE=g2-standard-8 # the machine §4 names; not an option
ACCELERATOR=type=nvidia-l4,count=1
BOOT_DISK_SIZE=100GB # the OS, Docker, the three images and the build's layers
IMAGE_FAMILY=${MICAKIT_G2_IMAGE_FAMILY:-common-cu128-ubuntu-2204-nvidia-570}
IMAGE_PROJECT=${MICAKIT_G2_IMAGE_PROJECT:-deeplearning-platform-release}
SSH_TRIES=${MICAKIT_G2_SSH_TRIES:-30}
SSH_WAIT_S=${MICAKIT_G2_SSH_WAIT_S:-10}
# The on-demand price of g2-standard-8 in us-central1, from the pricing.yml of
# https://github.com/Cyclenerd/google-cloud-pricing-cost-calculator generated 2025-03-06 from
# Google's Cloud Billing Catalog API. Prices change and differ by region: the note says so.
PRICE_PER_HOUR=0.853624271
PRICE_SOURCE="https://github.com/Cyclenerd/google-cloud-pricing-cost-calculator (pricing.yml generated 2025-03-06 from Google's Cloud Billing Catalog)"
PRICING_PAGE=https://cloud.google.com/compute/gpus-pricing
GCLOUD_INSTALL=https://cloud.google.com/sdk/docs/install
REMOTE_DIR=micakit # in the remote user's home

usage() {
    cat <<EOF
usage: scripts/rent-g2.sh [OPTIONS] [-- SERIES-ARGS...]

Rent a Google Cloud g2-standard-8 (one NVIDIA L4), run \`micakit series\` on it, copy the
results directory back, and delete the machine (also when a step fails, or on Ctrl-C).
The path with no extra dependency (gcloud alone); for a fleet, other cards and machines that
delete themselves: micakit cloud run (pip install 'micakit[cloud]', docs/reproduce.md).

  --project ID    Google Cloud project (default: \$CLOUDSDK_CORE_PROJECT)
  --zone ZONE     a zone with L4s, e.g. us-central1-a (default: \$CLOUDSDK_COMPUTE_ZONE)
  --name NAME     the machine's name and the results directory's (default: micakit-l4-UTCTIME)
  --results DIR   where the results directory comes back to (default: <checkout>/results)
  --image REF     the runner image to run (default: micakit:VERSION-PROTOCOL, as
                  scripts/build-images.sh tags it)
  --keep          keep the machine when done or failed, for debugging (it is billed until
                  you delete it; the command to do so is printed)
  --dry-run       print every command instead of running it
  -h, --help      this message

Arguments after -- go to \`micakit series\`. The runner sees this checkout at /checkout: a
contender program inside it is --contender /checkout/PATH, e.g.
  scripts/rent-g2.sh --zone us-central1-a -- --model shakespeare-char --contender /checkout/PATH
EOF
}

say() { echo "rent-g2: $*" >&2; }

die() { # MESSAGE [FIX]: a usage error or a missing prerequisite, before anything is rented
    echo "rent-g2: error: $1" >&2
    [ $# -lt 2 ] || echo "  fix: $2" >&2
    exit 2
}

# -- options -----------------------------------------------------------------------------------

PROJECT=${CLOUDSDK_CORE_PROJECT:-}
ZONE=${CLOUDSDK_COMPUTE_ZONE:-}
NAME=
RESULTS=$ROOT/results
IMAGE=
KEEP=0
DRY_RUN=0
SERIES_ARGS=()

need_value() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value" "see scripts/rent-g2.sh --help"; }

while [ $# -gt 0 ]; do
    case $1 in
        --project) need_value "$@"; PROJECT=$2; shift ;;
        --project=*) PROJECT=${1#*=} ;;
        --zone) need_value "$@"; ZONE=$2; shift ;;
        --zone=*) ZONE=${1#*=} ;;
        --name) need_value "$@"; NAME=$2; shift ;;
        --name=*) NAME=${1#*=} ;;
        --results) need_value "$@"; RESULTS=$2; shift ;;
        --results=*) RESULTS=${1#*=} ;;
        --image) need_value "$@"; IMAGE=$2; shift ;;
        --image=*) IMAGE=${1#*=} ;;
        --keep) KEEP=1 ;;
        --dry-run) DRY_RUN=1 ;;
        -h | --help) usage; exit 0 ;;
        --) shift; SERIES_ARGS=("$@"); break ;;
        *) usage >&2; die "unknown argument: $1" "arguments for \`micakit series\` go after --" ;;
    esac
    shift
done

# -- prerequisites, all checked before anything is rented ----------------------------------

if [ "$DRY_RUN" = 0 ] && ! command -v gcloud >/dev/null 2>&1; then
    die "gcloud (the Google Cloud CLI) is not on PATH" \
        "install it ($GCLOUD_INSTALL), then run \`gcloud auth login\`"
fi
if [ -z "$PROJECT" ]; then
    echo "rent-g2: error: no project given" >&2
    echo "  fix: pass --project ID, or export CLOUDSDK_CORE_PROJECT=ID" >&2
fi
if [ -z "$ZONE" ]; then
    echo "rent-g2: error: no zone given" >&2
    echo "  fix: pass --zone ZONE (one with L4s: \`gcloud compute accelerator-types list" \
        "--filter=name=nvidia-l4\` lists them), or export CLOUDSDK_COMPUTE_ZONE=ZONE" >&2
fi
[ -n "$PROJECT" ] && [ -n "$ZONE" ] || exit 2
[ -n "$NAME" ] || NAME=micakit-l4-$(date -u +%Y%m%d-%H%M%S)
[[ $NAME =~ ^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$ ]] ||
    die "--name $NAME is not a Compute Engine name" \
        "use lower-case letters, digits and hyphens, starting with a letter, at most 63"
if [ -e "$RESULTS/$NAME" ]; then
    die "$RESULTS/$NAME already exists; a results directory is never overwritten" \
        "choose another --name or --results"
fi
if [ -z "$IMAGE" ]; then
    tag=$(bash "$ROOT/scripts/build-images.sh" --print-tag) ||
        die "could not compute the image tag" "the lines above say why"
    IMAGE=micakit:$tag
fi

GCLOUD_WHERE=(--project "$PROJECT" --zone "$ZONE")

# -- running commands ---------------------------------------------------------------------

CHILD=
show() { # COMMAND...: the command, quoted so that it can be pasted; stdout in a dry run
    if [ "$DRY_RUN" = 1 ]; then
        printf '+'; printf ' %q' "$@"; printf '\n'
    else
        { printf 'rent-g2: +'; printf ' %q' "$@"; printf '\n'; } >&2
    fi
}

run() { # COMMAND...: print it, then run it unless --dry-run, so that a signal stops it at once
    show "$@"
    [ "$DRY_RUN" = 0 ] || return 0
    # in the background and waited for: bash runs a trap only once its foreground child ends,
    # and the series runs for hours; the EXIT trap stops this child
    "$@" </dev/null &
    CHILD=$!
    local rc=0
    wait "$CHILD" || rc=$?
    CHILD=
    [ "$rc" = 0 ] || say "that command failed with status $rc"
    return "$rc"
}

remote() { # COMMAND-STRING: run it on the machine
    run gcloud compute ssh "$NAME" "${GCLOUD_WHERE[@]}" --quiet --command "$1"
}

# -- deleting, exactly once, whatever happens --------------------------------------------------

WHY="after the failure above" # why a deletion comes early
CREATING=0 # set before the create command: a create cut short may still leave a machine
DELETED=0
STARTED_S=
STAGE_TMP=

delete_command() { printf '%q ' gcloud compute instances delete "$NAME" "${GCLOUD_WHERE[@]}" --quiet; }

cleanup() {
    local rc=$?
    trap - EXIT ERR
    trap '' INT TERM # the deletion below is not cut short by a second Ctrl-C
    set +e
    if [ -n "$CHILD" ]; then # the step cut short, and what it started (gcloud starts ssh)
        pkill -TERM -P "$CHILD" 2>/dev/null
        kill -TERM "$CHILD" 2>/dev/null
        wait "$CHILD" 2>/dev/null
        CHILD=
    fi
    [ -z "$STAGE_TMP" ] || rm -rf "$STAGE_TMP"
    if [ "$CREATING" = 1 ] && [ "$DELETED" = 0 ]; then
        DELETED=1
        if [ "$KEEP" = 1 ]; then
            say "kept $NAME (--keep); it is billed until you delete it: $(delete_command)"
        else
            [ "$rc" = 0 ] || say "deleting $NAME $WHY"
            if ! run gcloud compute instances delete "$NAME" "${GCLOUD_WHERE[@]}" --quiet; then
                say "could not delete $NAME (where its create failed, there may be nothing to"
                say "  delete): check \`gcloud compute instances list --project $PROJECT\`, and delete"
                say "  what is there yourself, it is billed while it exists: $(delete_command)"
                [ "$rc" != 0 ] || rc=1
            fi
            held
        fi
    fi
    exit "$rc"
}

held() { # how long the machine was held, and what that costs at the cited price
    [ "$DRY_RUN" = 0 ] && [ -n "$STARTED_S" ] || return 0
    local s=$(($(date +%s) - STARTED_S))
    say "$(awk -v s="$s" -v p="$PRICE_PER_HOUR" 'BEGIN {
        printf "held the machine %dh %02dmin: about $%.2f at $%.2f/hour (the machine alone)", \
            s / 3600, (s % 3600) / 60, s / 3600 * p, p }')"
}

on_signal() { # NAME STATUS
    say "stopped by SIG$1"
    WHY="after SIG$1"
    exit "$2"
}

on_error() { # STATUS: stop at the first failed step, inside functions too (set -E)
    exit "$1"
}

trap cleanup EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_error $?' ERR

# -- the steps ---------------------------------------------------------------------------------

cat >&2 <<EOF
rent-g2: renting $MACHINE_TYPE (8 vCPUs, 32 GB, one NVIDIA L4) as $NAME in $ZONE, project $PROJECT.
  It is billed from its creation to its deletion: about \$0.85/hour on-demand in us-central1
  as listed at $PRICE_SOURCE.
  Other regions differ and prices change: see $PRICING_PAGE.
  The $BOOT_DISK_SIZE boot disk is billed beside it. How long the series takes depends on the
  models and precisions it measures; when the machine is deleted, this script says how long it
  was held and what that cost at the price above.
  results: $RESULTS/$NAME
  runner image: $IMAGE
EOF

CREATING=1
STARTED_S=$(date +%s)
run gcloud compute instances create "$NAME" "${GCLOUD_WHERE[@]}" \
    --machine-type="$MACHINE_TYPE" \
    --accelerator="$ACCELERATOR" \
    --maintenance-policy=TERMINATE \
    --image-family="$IMAGE_FAMILY" \
    --image-project="$IMAGE_PROJECT" \
    --boot-disk-size="$BOOT_DISK_SIZE" \
    --metadata=install-nvidia-driver=True

say "waiting for SSH on $NAME"
tries=0
until remote true; do
    tries=$((tries + 1))
    if [ "$tries" -ge "$SSH_TRIES" ]; then
        say "SSH did not answer after $tries tries"
        exit 1
    fi
    sleep "$SSH_WAIT_S"
done

# shellcheck disable=SC2016 # expanded on the machine, not here
SETUP='set -euo pipefail
get() { sudo DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -q "$@"; }
if ! command -v docker >/dev/null 2>&1; then
    get update && get install -y docker.io
fi
if ! command -v nvidia-ctk >/dev/null 2>&1; then
    # from the NVIDIA install guide: https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html
    keyring=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
    curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey | sudo gpg --dearmor --yes -o "$keyring"
    curl -fsSL https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list |
        sed "s#deb https://#deb [signed-by=$keyring] https://#g" |
        sudo tee /etc/apt/sources.list.d/nvidia-container-toolkit.list >/dev/null
    get update && get install -y nvidia-container-toolkit
fi
sudo nvidia-ctk runtime configure --runtime=docker
sudo systemctl restart docker
for _ in $(seq 90); do nvidia-smi >/dev/null 2>&1 && break; sleep 10; done
nvidia-smi'
say "installing Docker and the NVIDIA Container Toolkit where absent"
remote "$SETUP"

# a copy of this checkout's own files: no results, caches or virtual environments
if [ "$DRY_RUN" = 1 ]; then
    STAGE=${TMPDIR:-/tmp}/STAGE/$REMOTE_DIR
    echo "# copy the files of $ROOT that git tracks or does not ignore into $STAGE"
else
    STAGE_TMP=$(mktemp -d)
    STAGE=$STAGE_TMP/$REMOTE_DIR
    mkdir -p "$STAGE"
    if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
            while IFS= read -r -d '' f; do if [ -f "$f" ]; then printf '%s\0' "$f"; fi; done |
            tar --null -T - -cf -) | tar -C "$STAGE" -xf -
    else
        (cd "$ROOT" && tar --exclude=./results --exclude=./.git --exclude=./.venv \
            --exclude=./wheelhouse --exclude='*/__pycache__' -cf - .) | tar -C "$STAGE" -xf -
    fi
fi
run gcloud compute scp "${GCLOUD_WHERE[@]}" --quiet --recurse "$STAGE" "$NAME:$REMOTE_DIR"

say "building the images on $NAME"
# shellcheck disable=SC2016 # expanded on the machine, not here
remote 'cd '"$REMOTE_DIR"' && sudo docker run --rm -v /var/run/docker.sock:/var/run/docker.sock -v "$PWD:/src" -w /src python:3.11-slim bash -c "pip install --quiet --disable-pip-version-check --root-user-action=ignore /src && bash scripts/build-images.sh"'

say "running the series on $NAME"
# ${a[@]+...}: an empty array under set -u, in the bash 3.2 of macOS too
series=$(printf ' %q' "$IMAGE" series --out "/results/$NAME" ${SERIES_ARGS[@]+"${SERIES_ARGS[@]}"})
series_rc=0
# shellcheck disable=SC2016 # expanded on the machine, not here
remote 'cd '"$REMOTE_DIR"' && mkdir -p results && sudo docker run --rm --gpus all -v /var/run/docker.sock:/var/run/docker.sock -v "$PWD:/checkout:ro" -v "$PWD/results:/results"'"$series"'; rc=$?; sudo chown -R "$(id -u):$(id -g)" results; exit $rc' ||
    series_rc=$?

# the results come back also when the series failed: every finished run is in them
[ "$DRY_RUN" = 1 ] || mkdir -p "$RESULTS"
run gcloud compute scp "${GCLOUD_WHERE[@]}" --quiet --recurse \
    "$NAME:$REMOTE_DIR/results/$NAME" "$RESULTS/"

if [ "$DRY_RUN" = 1 ]; then
    exit 0
elif [ "$series_rc" != 0 ]; then
    say "the series stopped with status $series_rc; what it finished is in $RESULTS/$NAME"
    exit "$series_rc"
fi
say "results: $RESULTS/$NAME"
say "check them: micakit verify $RESULTS/$NAME; read them: micakit report $RESULTS/$NAME"

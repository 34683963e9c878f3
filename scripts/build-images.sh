#!/usr/bin/env bash
# Build micakit's three images (Dockerfile.pytorch, Dockerfile.mica, Dockerfile.runner) with the
# kit's own `images build`, tagged VERSION-PROTOCOL: the kit's version and the first 12 hex
# digits of the SHA-256 of benchmarks/NanoGpt/protocol.toml, so an image names the kit and the
# protocol it carries out (§3 rule 4: every number carries its conditions).
#
# The same script runs in CI (.github/workflows/images.yml), on a rented L4 (scripts/rent-g2.sh)
# and on your machine. Arguments after `--` go to `images build` unchanged.
#
# The runner image carries the kit's commit (build argument KIT_COMMIT, which `images build`
# passes: read from this checkout's .git, else from MICAKIT_COMMIT, e.g. CI's commit for a
# source archive); it becomes the image's label micakit.commit and its MICAKIT_COMMIT.
#
# Environment:
#   PYTHON          the Python that runs the kit (default python3)
#   MICAKIT_COMMIT  the kit's commit where this checkout has no .git
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
PROTOCOL=$ROOT/benchmarks/NanoGpt/protocol.toml

usage() {
    cat <<EOF
usage: scripts/build-images.sh [--dry-run] [--print-tag] [-- IMAGES-BUILD-ARGS...]

Build the three images with \`python run.py images build\`, tagged VERSION-PROTOCOL
(the kit's version, and the first 12 hex digits of the protocol file's SHA-256).

  --dry-run     print the command instead of running it
  --print-tag   print the tag and exit
  -h, --help    this message
EOF
}

die() {
    echo "build-images: error: $1" >&2
    [ $# -lt 2 ] || echo "  fix: $2" >&2
    exit 2
}

# The tag, computed in one place: rent-g2.sh and the CI workflow ask this script for it.
image_tag() {
    local version protocol_hash
    [ -f "$PROTOCOL" ] || die "no protocol file at $PROTOCOL" "run this script from a micakit checkout"
    command -v "$PY" >/dev/null 2>&1 ||
        die "no Python named $PY" "install Python 3, or name one with PYTHON=/path/to/python3"
    # kit/__init__.py imports only the standard library, so any Python 3 reads the version
    version=$(cd "$ROOT" && "$PY" -c 'import kit; print(kit.__version__)')
    protocol_hash=$("$PY" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest()[:12])' "$PROTOCOL")
    printf '%s-%s\n' "$version" "$protocol_hash"
}

# `images build --tag-suffix` where the kit has it; until then `--tag` (the same value).
tag_option() {
    if (cd "$ROOT" && "$PY" run.py images build --help 2>/dev/null) | grep -q -- '--tag-suffix'; then
        echo --tag-suffix
    else
        echo --tag
    fi
}

dry_run=0
print_tag=0
while [ $# -gt 0 ]; do
    case $1 in
        --dry-run) dry_run=1 ;;
        --print-tag) print_tag=1 ;;
        -h | --help) usage; exit 0 ;;
        --) shift; break ;;
        *) usage >&2; die "unknown argument: $1" "pass arguments for \`images build\` after --" ;;
    esac
    shift
done

tag=$(image_tag)
if [ "$print_tag" = 1 ]; then
    echo "$tag"
    exit 0
fi

cmd=("$PY" run.py images build "$(tag_option)" "$tag" "$@")
commit=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo "${MICAKIT_COMMIT:-unknown}")
export MICAKIT_COMMIT=$commit
echo "build-images: tag $tag, kit commit $commit" >&2
if [ "$dry_run" = 1 ]; then
    printf '+ cd %q &&' "$ROOT"
    printf ' %q' "${cmd[@]}"
    printf '\n'
    exit 0
fi
cd "$ROOT"
exec "${cmd[@]}"

## rerun.sh's constant part: kit/report/rerun.py writes the settings above it, fills in the
## @...@ places (@ARGS@, @INPUTS@, @SIDE_IMAGES@, @GPUS@) and drops these "##" lines.

die() {
    echo "rerun: error: $1" >&2
    [ $# -lt 2 ] || echo "  fix: $2" >&2
    exit 2
}

case $MODE in docker | local) ;; *) die "MODE is $MODE" "MODE=docker or MODE=local" ;; esac
[ ! -e "$OUT" ] || die "$OUT exists; a series never overwrites one" "bash rerun.sh NEW-DIR"

mounts=()
# An input as the series sees it: the path itself, or in the runner's container /inputs/NAME
# (a bind mount, which the Docker executor maps back to this host for the runs it starts).
seen() {
    local path
    path=$(realpath -e "$2") || die "no file or folder at $2" "set $3=PATH to your copy"
    SEEN=$path
    if [ "$MODE" = docker ] && [ -d "$path" ]; then
        mounts+=(-v "$path:/inputs/$1:ro")
        SEEN=/inputs/$1
    elif [ "$MODE" = docker ]; then
        mounts+=(-v "$(dirname "$path"):/inputs/$1:ro")
        SEEN=/inputs/$1/$(basename "$path")
    fi
}

args=(@ARGS@)
if [ -n "$CONTENDER" ]; then
    seen contender "$CONTENDER" CONTENDER
    if [ -n "$CONTENDER_SHA256" ]; then
        got=$(sha256sum "$CONTENDER" | cut -d" " -f1)
        [ "$got" = "$CONTENDER_SHA256" ] || die "$CONTENDER has SHA-256 $got, not the \
series' $CONTENDER_SHA256" "name the program the series ran: CONTENDER=PATH bash rerun.sh"
    fi
    args+=(--contender "$SEEN")
fi
@INPUTS@
if [ -n "$PROTOCOL" ]; then seen protocol "$PROTOCOL" PROTOCOL && args+=(--protocol "$SEEN"); fi
if [ -n "$GPU" ]; then args+=(--gpu "$GPU"); fi

if [ -n "$DOCKER_ENGINE" ]; then args+=(--docker-host "$DOCKER_ENGINE"); fi

# An image the rerun needs, pulled by its digest or built from the kit's checkout (KIT).
need_image() {
    docker image inspect "$1" >/dev/null 2>&1 && return 0
    case $1 in
        *@sha256:*) docker pull "$1" && return 0 ;;
    esac
    [ -n "${KIT:-}" ] || die "no image $1 on this machine" \
        "KIT=PATH/TO/micakit bash rerun.sh, with that checkout at $KIT_COMMIT"
    [ "$(git -C "$KIT" rev-parse HEAD)" = "$KIT_COMMIT" ] ||
        die "$KIT is not at the series' kit commit" "git -C $KIT checkout $KIT_COMMIT"
    # the three images, tagged with the kit's version and the protocol's hash
    (cd "$KIT" && bash scripts/build-images.sh -- ${CONTENDER:+--contender "$CONTENDER"})
}
# An image the series recorded by id: say so when this one differs (versions are checked).
same_image() {
    local got
    got=$(docker image inspect --format '{{.Id}}' "$1")
    if [ -n "$2" ] && [ "$got" != "$2" ]; then
        echo "rerun: note: $1 is $got, not the series' $2 (versions are checked)" >&2
    fi
}

if [ "$MODE" = docker ]; then
    set -- runner "$IMAGE" "$IMAGE_ID" @SIDE_IMAGES@
    while [ $# -gt 0 ]; do
        # the sides' images live on the engine the series drives; the series checks those
        if [ -n "$DOCKER_ENGINE" ] && [ "$1" != runner ]; then shift 3 && continue; fi
        need_image "$2"
        same_image "$2" "$3"
        shift 3
    done
    mkdir -p "$(dirname "$OUT")"
    # the kit inside the runner image: results under /results, the series to rerun at /original
    micakit() {
        docker run --rm@GPUS@ -v /var/run/docker.sock:/var/run/docker.sock \
            -v "$(dirname "$OUT"):/results" -v "$HERE:/original:ro" \
            ${mounts[@]+"${mounts[@]}"} "$IMAGE" "$@"
    }
    TARGET=/results/$(basename "$OUT")
    ORIGINAL=/original
else
    command -v micakit >/dev/null ||
        die "no micakit on PATH" "install the kit at $KIT_COMMIT (scripts/install.sh)"
    # one line of the output is "micakit, version VERSION" (its first; its last before 0.1.0's
    # second step)
    said=$(micakit --version) || die "micakit --version failed" "install the kit at $KIT_COMMIT"
    grep -qxF "micakit, version $KIT_VERSION" <<<"$said" ||
        die "$(head -n 1 <<<"$said") is not the series' kit $KIT_VERSION" "install it"
    TARGET=$OUT
    ORIGINAL=$HERE
fi

# 0. this series, recomputed from its own raw logs: every published number must match
micakit verify "$ORIGINAL"
# 1. the series again, with the options it recorded
micakit series --out "$TARGET" "${args[@]}"
# 2. every table of the new series recomputed from its raw logs, and checked
micakit report "$TARGET" >/dev/null
micakit verify "$TARGET"
# 3. under the same protocol file (§3 rule 1)
grep -q "\"protocol_sha256\": \"$PROTOCOL_SHA256\"" "$OUT/manifest.json" ||
    die "$OUT ran under another protocol than $PROTOCOL_SHA256" "PROTOCOL=PATH to its own"
echo "rerun: done; compare $HERE/report.html with $OUT/report.html" >&2

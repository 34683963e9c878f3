## The series on a rented machine (`micakit cloud run`): SkyPilot runs this as the task of each
## cluster, on its default VM image (Docker and NVIDIA's driver), with kit/cloud/task.py's
## settings in the environment. Lines starting "##" are this header.
##
##   MICAKIT_RUNNER        the runner image, by digest (REPO@sha256:...)
##   MICAKIT_PYTORCH       PyTorch's measured image, by digest
##   MICAKIT_NANOGPT_URL   nanoGPT's archive at its pinned commit (D2); MICAKIT_NANOGPT_COMMIT
##   MICAKIT_INPUT_URL     tiny Shakespeare; MICAKIT_INPUT_SHA256 its SHA-256
##   MICAKIT_NAME          the results directory's name, under ~/micakit/results
##   MICAKIT_CONTENDER     the contender program's path on the machine, or empty
##   MICAKIT_SERIES_ARGS   more options for `micakit series`, shell-quoted
##
## Honoured only where the machine sets them (the kit never does; its tests' machine has no
## network but this machine's): MICAKIT_NANOGPT_DIR, a nanoGPT tree at the pinned commit taken
## instead of the download (the series checks its files' SHA-256 all the same);
## MICAKIT_INPUT_FILE, tiny Shakespeare taken instead of the download (its SHA-256 checked
## here as the download's); MICAKIT_GPUS, `docker run --gpus`'s value, empty for none (a CPU
## series; default all).
set -euo pipefail

home=$HOME/micakit
mkdir -p "$home/results" "$home/data"
cd "$home"

# nanoGPT at its pinned commit and tiny Shakespeare, fetched here (the series checks both)
if [ ! -d "nanoGPT-$MICAKIT_NANOGPT_COMMIT" ]; then
    if [ -n "${MICAKIT_NANOGPT_DIR:-}" ]; then
        cp -R "$MICAKIT_NANOGPT_DIR" "nanoGPT-$MICAKIT_NANOGPT_COMMIT"
    else
        curl -fsSL --retry 5 "$MICAKIT_NANOGPT_URL" -o nanogpt.tar.gz
        tar -xzf nanogpt.tar.gz
    fi
fi
if [ ! -f data/input.txt ]; then
    if [ -n "${MICAKIT_INPUT_FILE:-}" ]; then
        cp "$MICAKIT_INPUT_FILE" data/input.txt.part
    else
        curl -fsSL --retry 5 "$MICAKIT_INPUT_URL" -o data/input.txt.part
    fi
    echo "$MICAKIT_INPUT_SHA256  data/input.txt.part" | sha256sum -c --quiet
    mv data/input.txt.part data/input.txt
fi

docker=(docker)
docker info >/dev/null 2>&1 || docker=(sudo docker) # the VM's user may not be in group docker
"${docker[@]}" pull --quiet "$MICAKIT_RUNNER"

# The README's `docker run` line: the card, the Docker socket, the results as this user
mounts=(
    -v /var/run/docker.sock:/var/run/docker.sock
    -v "$home/results:/results"
    -v "$home/nanoGPT-$MICAKIT_NANOGPT_COMMIT:/nanogpt:ro"
    -v "$home/data/input.txt:/data/input.txt:ro"
)
user=(--user "$(id -u):$(id -g)" --group-add "$(stat -c %g /var/run/docker.sock)")
series=(--out "/results/$MICAKIT_NAME" --pytorch-image "$MICAKIT_PYTORCH"
    --nanogpt /nanogpt --input /data/input.txt)
if [ -n "${MICAKIT_CONTENDER:-}" ]; then
    mkdir -p "$home/results/mica"
    cp "${MICAKIT_CONTENDER/#\~/$HOME}" "$home/results/mica/program"
    "${docker[@]}" run --rm "${user[@]}" "${mounts[@]}" "$MICAKIT_RUNNER" \
        images build --only mica --contender /results/mica/program
    series+=(--contender /results/mica/program)
fi
eval "extra=($MICAKIT_SERIES_ARGS)"
gpus=(--gpus "${MICAKIT_GPUS-all}")
[ -n "${MICAKIT_GPUS-all}" ] || gpus=()
# shellcheck disable=SC2154 # extra is set by the eval above
"${docker[@]}" run --rm ${gpus[@]+"${gpus[@]}"} "${user[@]}" "${mounts[@]}" "$MICAKIT_RUNNER" \
    series "${series[@]}" ${extra[@]+"${extra[@]}"}

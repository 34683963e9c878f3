"""`micakit images` (build, push) and `micakit footprint`: the measured images (§8) and the
runner image, through the Docker SDK. Imported only when one of them is called (or listed by
`micakit images --help`), so each command imports the Docker SDK and the engine inside itself,
when it runs (start-up speed)."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path

import click

from kit.cli import options
from kit.errors import ExitCode

KINDS = ["pytorch", "mica", "runner"]  # the images, as the user names them


def _only(help: str) -> Callable[[options.F], options.F]:
    """--only, the images a command works on."""
    return click.option("--only", "kinds", multiple=True, type=click.Choice(KINDS), help=help)


@click.group()
def images() -> None:
    """The measured images (§8) and the runner image."""


@images.command("build")
@_only("Build only these (default: pytorch and runner, and mica with --contender).")
@click.option("--base", help="The base image (e.g. micakit-base:bookworm, made by ci-setup.sh).")
@click.option(
    "--wheelhouse",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Wheels to install from, for a build with no package index.",
)
@click.option(
    "--contender",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The contender program the Mica image holds (builds that image too).",
)
@click.option(
    "--libs",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The libraries the contender opens, for the Mica image.",
)
@click.option("--nanogpt", type=click.Path(path_type=Path), help="A nanoGPT checkout to use.")
@click.option("--tag", "suffix", help="The tag (default: <kit version>-<protocol hash>).")
@click.option(
    "--attestations",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("attestations"),
    show_default=True,
    help="Where each image's provenance statement (<image>.intoto.json) is written.",
)
@click.option(
    "--check-reproducible",
    is_flag=True,
    help="Build each image a second time from the same inputs, every step again, and name "
    "every file whose list entry, size or content differs (exit 4 where any does).",
)
@options.protocol_option
@options.docker_host_option
@options.verbosity
def images_build(
    kinds: tuple[str, ...],
    base: str | None,
    wheelhouse: Path | None,
    contender: Path | None,
    libs: Path | None,
    nanogpt: Path | None,
    suffix: str | None,
    attestations: Path,
    check_reproducible: bool,
    protocol_path: Path | None,
    docker_host: str | None,
) -> None:
    """Build the images through the Docker SDK, streaming the build's output on stderr, and
    write each one's provenance statement (in-toto, SLSA v1) into its folder of attestations.

    \b
    Examples:
      micakit images build --contender PATH/TO/mica-program --libs PATH/TO/its-libs
      micakit images build --only pytorch --base micakit-base:bookworm --wheelhouse wheelhouse
      micakit images build --only mica --contender PROGRAM --check-reproducible
    """
    from kit.executors.docker import building, connection, reproducible
    from kit.executors.docker.failures import guard
    from kit.protocol.load import load
    from kit.sides import workspace

    p = load(protocol_path)
    if not kinds:
        kinds = ("pytorch", "runner") + (("mica",) if contender else ())
    client = connection.connect(docker_host)
    build = functools.partial(
        building.build_images,
        client,
        p,
        list(kinds),
        base=base,
        wheelhouse=wheelhouse,
        contender=contender,
        libs=libs,
        pytorch_context=functools.partial(
            workspace.image_context, p, str(nanogpt) if nanogpt else None
        ),
        on_line=options.say,
    )
    with guard("building the images"):
        built = build(suffix=suffix, attestations=attestations)
    for name, image_id in built.items():
        click.echo(f"{name}\t{image_id}")
    if check_reproducible:
        with guard("building the images again"):
            differences = reproducible.check(client, built, build)
        for line in differences:
            click.echo(line)
        if differences:
            options.say(f"micakit: {len(differences)} differences between the two builds")
            sys.exit(int(ExitCode.VERIFY_MISMATCH))
        options.say("the second build holds the same files, sizes and contents")


@images.command("push")
@click.option(
    "--registry",
    required=True,
    help="Where to: HOST[:PORT]/NAMESPACE, e.g. ghcr.io/OWNER (lower case).",
)
@_only("Push only these (default: every image built under the tag).")
@click.option("--tag", "suffix", help="The images' tag (default: <kit version>-<protocol hash>).")
@click.option(
    "--also-tag",
    "also",
    multiple=True,
    help="A further tag in the registry for the same images, e.g. v0.2.0 or latest; repeatable.",
)
@click.option(
    "--digests",
    "digests_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the record printed on stdout to this file (e.g. for a release).",
)
@click.option(
    "--attestations",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("attestations"),
    show_default=True,
    help="The statements `images build` wrote: each gains its image's registry digest, and "
    "each image's SBOM (<image>.cdx.json) is measured beside it; the record names both.",
)
@options.protocol_option
@options.docker_host_option
@options.verbosity
def images_push(
    registry: str,
    kinds: tuple[str, ...],
    suffix: str | None,
    also: tuple[str, ...],
    digests_path: Path | None,
    attestations: Path,
    protocol_path: Path | None,
    docker_host: str | None,
) -> None:
    """Push the images to an image registry through the Docker SDK, and print each one's
    registry digest as JSON: `pinned` (REPOSITORY@sha256:...) names it exactly wherever it is
    pulled. Log in first (`docker login HOST`); the SDK reads those credentials.

    \b
    Examples:
      micakit images push --registry ghcr.io/OWNER --also-tag v0.2.0 --digests digests.json
      micakit images push --registry 127.0.0.1:5000/ci --only runner --tag ci
      docker run ghcr.io/OWNER/micakit:TAG series --help    (once pushed)
    """
    from kit.executors.docker import attachments, building, kit_images, registries
    from kit.executors.docker.connection import connect
    from kit.executors.docker.failures import guard
    from kit.protocol.load import load
    from kit.results import store

    registry = registries.check_registry(registry)  # before the engine is asked anything
    for t in (suffix, *also) if suffix else also:
        registries.check_tag(t)
    p = load(protocol_path)
    client = connect(docker_host)
    with guard("pushing the images"):
        pushing = list(kinds) or building.built_kinds(client, p, suffix)
        refs = {kind: kit_images.ref(kind, p, suffix) for kind in pushing}
        attachments.refuse_unready(client, refs, attestations)  # before anything is pushed
        record = building.push(
            client,
            p,
            registry,
            list(kinds) or None,
            suffix=suffix,
            also=tuple(also),
            on_line=options.say,
        )
        record = attachments.attach(client, record, attestations, options.say)
    text = json.dumps(record, indent=2) + "\n"
    if digests_path:
        store.write_atomic(digests_path, text)
    click.echo(text, nl=False)


@click.command()
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--pytorch", "pytorch_ref", help="PyTorch's measured image (default: this kit's).")
@click.option("--mica", "mica_ref", help="The Mica program's image (default: this kit's).")
@options.protocol_option
@options.docker_host_option
@options.json_option
@options.verbosity
def footprint(
    out: Path,
    pytorch_ref: str | None,
    mica_ref: str | None,
    protocol_path: Path | None,
    docker_host: str | None,
    as_json: bool,
) -> None:
    """Record both measured images' sizes and file lists in OUT/footprint/, and their ratio
    (§8), all or nothing.

    \b
    Example:
      micakit footprint results/footprint-L4 --json
    """
    from kit.executors.docker import connection, inventory, kit_images
    from kit.executors.docker.failures import guard
    from kit.protocol.load import load

    p = load(protocol_path)
    client = connection.connect(docker_host)
    refs = {
        "pytorch": pytorch_ref or kit_images.ref("pytorch", p),
        "mica": mica_ref or kit_images.ref("mica", p),
    }
    with guard("measuring the images' footprints (§8)"):
        ratio = inventory.measure_footprints(client, refs, out / "footprint")
    if as_json:
        click.echo(json.dumps(ratio, indent=2))  # bytes, every digit: for other tools
    else:
        for line in footprint_lines(ratio):
            click.echo(line)
        click.echo(f"file lists and sizes: {out / 'footprint'}")


MIB = 1024 * 1024


def footprint_lines(ratio: dict) -> list[str]:
    """The footprint's ratio for a reader: sizes in MiB, the ratio to three digits (§8); the
    JSON keeps the bytes."""
    lines = []
    for side in ("pytorch", "mica"):
        size = int(ratio[f"{side}_size_bytes"])
        lines.append(f"{side} image: {size / MIB:,.1f} MiB ({ratio[f'{side}_image']})")
    lines.append(f"PyTorch's image / Mica's: {float(ratio['pytorch_over_mica']):.3f}")
    if ratio.get("note"):
        lines.append(f"note: {ratio['note']}")
    return lines

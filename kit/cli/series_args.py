"""`micakit series`' options, declared once: each a field of `SeriesArgs` with its option's name,
help and default (kit.cli.declared builds the click options from them), and how they meet
`SeriesOptions`, the options a series keeps in its manifest (kit.cli.assemble.resolve).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from kit.cli import options
from kit.cli.declared import option

_MODELS = ", ".join(options.reference()["models"])
_PRECISIONS = ", ".join(options.reference()["precisions"]["names"])


@dataclass(frozen=True)
class SeriesArgs:
    """`micakit series` as click parsed it: one field for each of its options, in the order
    `--help` lists them. `resolve` reads it by attribute, which mypy checks."""

    out: Path | None = option(help="A new results directory.")
    resume: Path | None = option(help="Resume this results directory.")
    protocol_path: Path | None = option(
        "--protocol", help=options.PROTOCOL_HELP, type=options.PROTOCOL_FILE
    )
    models: tuple[str, ...] = option(
        "--model",
        help=f"One of the protocol's models: {_MODELS}; repeat for several (default: every "
        "model; with --smoke, the first).",
        shell_complete=options.complete_models,
    )
    precisions: tuple[str, ...] = option(
        "--precision",
        help=f"One of the protocol's precisions: {_PRECISIONS}; repeat for several (default: "
        "every one the card measures).",
        shell_complete=options.complete_precisions,
    )
    device: str | None = option(help="Default: cuda.", type=click.Choice(["cuda", "cpu"]))
    smoke: bool = option(help="Scaled-down models that train in seconds (CPU).")
    full_cpu: bool = option(
        help="With --device cpu and no --smoke: train the full-size models on the CPU, on "
        "purpose (hours to days); without it that is refused."
    )
    contender: Path | None = option(help="The contender program (D4).")
    nanogpt: Path | None = option(help="A nanoGPT checkout to use.")
    no_pytorch: bool = option(help="Run the contender's configurations only.")
    executor: str | None = option(
        help="Default: docker where an engine answers, else local.",
        type=click.Choice(["local", "docker"]),
    )
    docker_host: str | None = option(help=options.DOCKER_HOST_HELP)
    env: tuple[str, ...] = option(help="KEY=VALUE for every run of both sides (recorded).")
    pytorch_image: str | None = option(help="PyTorch's measured image (default: this kit's tag).")
    mica_image: str | None = option(
        help="The contender's measured image (default: this kit's tag)."
    )
    gpu: str | None = option(help="The card by index or UUID (default 0), for NVML and Docker.")
    refuse_busy: bool = option(help="Refuse at once when the card (or the CPUs) is busy (§5).")
    idle_timeout: float = option(
        help="Seconds to wait for a busy card (§5); on a CPU, then go on marked busy.",
        default=60.0,
    )
    data_dir: Path | None = option(help="Prepared datasets (default: in the results directory).")
    input: Path | None = option(help="Your copy of tiny Shakespeare.")
    allow_torch: bool = option(
        help="Run under a torch other than the protocol's pin; every number reads preparation."
    )
    tiktoken_files: Path | None = option(
        help="GPT-2's vocab.bpe and encoder.json, for offline machines."
    )
    aa: tuple[str, ...] = option(
        help="After the timed rounds, A/A rounds: each chosen configuration against its "
        "identical twin, to measure this card's own noise. Alone: the contender's primary "
        "build and PyTorch's default mode; `all`; or configurations by id (repeat, or "
        "comma-separated).",
        is_flag=False,
        flag_value="primary",
        metavar="[all|CONFIG]",
    )


# How `micakit series`' parameters and `SeriesOptions`' fields meet; every other parameter is
# the field of the same name. The parameters that are no option of the series:
CLI_ONLY = {
    "resume": "names a directory whose manifest.json holds the options",
    "no_pytorch": "read into `sides`",
}
# a parameter whose field has another name: the parameter's name -> the field's
RENAMED = {"protocol_path": "protocol", "idle_timeout": "idle_timeout_s"}
# the fields no parameter gives
DERIVED = {
    "sides": "from --no-pytorch and --contender",
    "python": "the kit's own interpreter unless a caller of the library names another",
}

"""`micakit`: a thin click layer over the kit's keyword API. Parse, call, render, exit.

Exit codes (kit.errors.ExitCode): 0 done; 2 bad input, the message says what to fix; 3 a run
failed and ended the series; 4 `verify` found a difference; 130 interrupted, resumable.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console

from kit import __version__
from kit.cli import assemble
from kit.engine.series import Interrupted
from kit.engine.store import ResultsDir
from kit.errors import ExitCode, UserError
from kit.report import publish
from kit.report import tables as report


class KitGroup(click.Group):
    """Maps what the user must fix to a message and an exit code; bugs keep their traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except UserError as e:
            click.echo(f"micakit: error: {e.message}", err=True)
            if e.fix:
                click.echo(f"  fix: {e.fix}", err=True)
            ctx.exit(int(e.exit_code))
        except (KeyboardInterrupt, Interrupted) as e:
            where = f" during {e}" if str(e) else ""
            click.echo(f"micakit: interrupted{where}; finished runs are kept.", err=True)
            resume = ctx.meta.get("resume_hint")
            if resume:
                click.echo(f"  resume with: micakit series --resume {resume}", err=True)
            ctx.exit(int(ExitCode.INTERRUPTED))


@click.group(cls=KitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="micakit")
def main() -> None:
    """Carry out the TR-2 measurement protocol and leave a results directory anyone can rerun."""


@main.command()
@click.option("--out", type=click.Path(path_type=Path), help="A new results directory.")
@click.option("--resume", type=click.Path(path_type=Path), help="Resume this results directory.")
@click.option("--protocol", "protocol_path", type=click.Path(path_type=Path), help="Protocol file.")
@click.option("--model", "models", multiple=True, help="shakespeare-char, gpt2-small, gpt2-medium.")
@click.option("--precision", "precisions", multiple=True, help="float32, bfloat16, float16.")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default=None, help="Default: cuda.")
@click.option("--smoke", is_flag=True, help="Scaled-down models that train in seconds (CPU).")
@click.option("--contender", type=click.Path(path_type=Path), help="The contender program (D4).")
@click.option("--nanogpt", type=click.Path(path_type=Path), help="A nanoGPT checkout to use.")
@click.option("--no-pytorch", is_flag=True, help="Run the contender's configurations only.")
@click.option("--executor", type=click.Choice(["local", "docker"]), default=None,
              help="Default: docker where an engine answers, else local.")  # fmt: skip
@click.option("--docker-host", help="Drive another machine's engine, e.g. ssh://user@host.")
@click.option("--env", multiple=True, help="KEY=VALUE for every run of both sides (recorded).")
@click.option("--pytorch-image", help="PyTorch's measured image (default: this kit's tag).")
@click.option("--mica-image", help="The contender's measured image (default: this kit's tag).")
@click.option("--gpu", help="The card by index or UUID (default 0), for NVML and Docker.")
@click.option("--refuse-busy", is_flag=True, help="Refuse at once when the card is busy (§5).")
@click.option("--idle-timeout", type=float, help="Seconds to wait for a busy card (default 60).")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    help="Prepared datasets (default: in the results directory).",
)
@click.option("--input", type=click.Path(path_type=Path), help="Your copy of tiny Shakespeare.")
@click.option("--tiktoken-files", type=click.Path(path_type=Path),
              help="GPT-2's vocab.bpe and encoder.json, for offline machines.")  # fmt: skip
@click.pass_context
def series(ctx: click.Context, **options) -> None:
    """Run a series: one discarded run per configuration, then five rotating rounds."""
    console = Console(stderr=True)
    target = options["resume"] or options["out"]
    ctx.meta["resume_hint"] = target
    s, hooks = assemble.series(options, sys.argv, console)
    try:
        s.run()
        if s.complete():
            s.executor.finish()
    finally:
        hooks.close()
        if s.rd.records():
            publish.write(s.rd, report.tables(s.rd))
    click.echo(f"{s.rd.root / 'report.md'}")
    if not s.complete():  # pragma: no cover - run() either finishes or raises
        raise UserError("the series stopped before its last run", f"resume {s.rd.root}")


@main.command("report")
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--checks", "check_dirs", multiple=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="`micakit correctness` results that gate the verdicts.")  # fmt: skip
@click.option("--preview", is_flag=True, help="Show every time, labelled as preparation (rule 6).")
def report_cmd(results: Path, check_dirs: tuple[Path, ...], preview: bool) -> None:
    """Recompute every table of RESULTS from its raw stamped logs, and print the report.

    Rule 6: a speed is given only for a configuration whose correctness check (--checks)
    passed for its model, precision and contender build; --preview shows every time, each
    labelled as preparation.
    """
    rd = _series_dir(results)
    rd.write_json(report.PUBLICATION, {"preview": preview})
    if check_dirs:
        from kit.correctness import run as checkrun

        statuses = checkrun.checks_for_series(results, list(check_dirs))
        rd.write_json(
            report.GATING,
            {"check_dirs": [str(Path(d).resolve()) for d in check_dirs], "statuses": statuses},
        )
    try:
        t = report.tables(rd)
    except ValueError as e:
        raise UserError(
            f"cannot recompute {results}: {e}", f"`micakit verify {results}` names what changed"
        ) from None
    publish.write(rd, t)
    click.echo((rd.root / "report.md").read_text("utf-8"))


def _series_dir(results: Path) -> ResultsDir:
    rd = ResultsDir.open(results)
    if rd.manifest().get("kind") == "correctness":
        raise UserError(
            f"{results} holds a correctness check, not a series",
            f"its verdict is in {results / 'correctness.md'}; gate a series with "
            f"`micakit report SERIES --checks {results}`",
        )
    return rd


@main.command()
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=Path))
def verify(results: Path) -> None:
    """Recompute RESULTS and exit non-zero, naming each number or raw file that differs."""
    rd = _series_dir(results)
    problems = publish.verify(rd)
    for p in problems:
        click.echo(p)
    if problems:
        click.echo(f"micakit: {len(problems)} differences in {results}", err=True)
        sys.exit(int(ExitCode.VERIFY_MISMATCH))
    click.echo(f"{results}: every published number matches its recomputation from the raw logs")


@main.group()
def images() -> None:
    """The measured images (§8) and the runner image."""


@images.command("build")
@click.option(
    "--only",
    "kinds",
    multiple=True,
    type=click.Choice(["pytorch", "mica", "runner"]),
    help="Build only these (default: pytorch and runner, and mica with --contender).",
)
@click.option("--base", help="The base image (e.g. micakit-base:bookworm, made by ci-setup.sh).")
@click.option(
    "--wheelhouse",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Wheels to install from, for a build with no package index.",
)
@click.option("--contender", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--libs",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The libraries the contender opens, for the Mica image.",
)
@click.option("--nanogpt", type=click.Path(path_type=Path), help="A nanoGPT checkout to use.")
@click.option("--tag", "suffix", help="The tag (default: <kit version>-<protocol hash>).")
@click.option("--protocol", "protocol_path", type=click.Path(path_type=Path))
@click.option("--docker-host", help="Another engine, e.g. ssh://user@host.")
def images_build(
    kinds, base, wheelhouse, contender, libs, nanogpt, suffix, protocol_path, docker_host
) -> None:
    """Build the images through the Docker SDK, streaming the build's output."""
    from kit.executors.docker import engine as dockerapi
    from kit.executors.docker import images as images_mod
    from kit.protocol import load as protocol_mod

    p = protocol_mod.load(protocol_path)
    if not kinds:
        kinds = ["pytorch", "runner"] + (["mica"] if contender else [])
    client = dockerapi.connect(docker_host)
    built = images_mod.build(
        client,
        p,
        list(kinds),
        base=base,
        wheelhouse=wheelhouse,
        contender=contender,
        libs=libs,
        nanogpt_checkout=str(nanogpt) if nanogpt else None,
        suffix=suffix,
        on_line=lambda line: click.echo(line, err=True),
    )
    for name, image_id in built.items():
        click.echo(f"{name}\t{image_id}")


@main.command()
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--pytorch", "pytorch_ref", help="PyTorch's measured image (default: this kit's).")
@click.option("--mica", "mica_ref", help="The Mica program's image (default: this kit's).")
@click.option("--protocol", "protocol_path", type=click.Path(path_type=Path))
@click.option("--docker-host", help="Another engine, e.g. ssh://user@host.")
def footprint(out: Path, pytorch_ref, mica_ref, protocol_path, docker_host) -> None:
    """Record both measured images' sizes and file lists in OUT, and their ratio (§8)."""
    from kit.engine import store
    from kit.executors.docker import engine as dockerapi
    from kit.executors.docker import images as images_mod
    from kit.protocol import load as protocol_mod

    p = protocol_mod.load(protocol_path)
    client = dockerapi.connect(docker_host)
    refs = {"pytorch": pytorch_ref or images_mod.ref("pytorch", p),
            "mica": mica_ref or images_mod.ref("mica", p)}  # fmt: skip
    found = {side: dockerapi.footprint(client, r, out / "footprint" / side)
             for side, r in refs.items()}  # fmt: skip
    ratio = dockerapi.footprint_ratio(found["mica"], found["pytorch"])
    store.write_json(out / "footprint" / "ratio.json", ratio)
    click.echo(json.dumps(ratio, indent=2))


@main.command("merge")
@click.argument("dirs", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))  # fmt: skip
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="A new directory for release.csv and release.md.")  # fmt: skip
def merge_cmd(dirs: tuple[Path, ...], out: Path) -> None:
    """Merge several cards' results directories into one release table, from their raw logs."""
    from kit.report import merge

    for path in merge.merge(list(dirs), out):
        click.echo(path)


from kit.cli.correctness import correctness  # noqa: E402 - a command of its own module

main.add_command(correctness)

if __name__ == "__main__":  # pragma: no cover
    main()

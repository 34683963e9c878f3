"""`micakit`: a thin click layer over the kit's keyword API. Parse, call, render, exit.

Exit codes (kit.errors.ExitCode): 0 done; 2 bad input, the message says what to fix; 3 a run
failed and ended the series; 4 `verify` found a difference; 130 interrupted, resumable.
"""

from __future__ import annotations

import errno
import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kit import __version__
from kit.engine import lock
from kit.errors import ExitCode, Interrupted, UserError

if TYPE_CHECKING:
    from kit.engine.store import ResultsDir

# `micakit --help` and `--version` import nothing but click: pandas, matplotlib, rich, docker and
# the kit's engine and report are imported inside the commands that use them (start-up speed,
# measured by benchmarks/kit/startup.py).

_MACHINE_ERRORS = {
    errno.ENOSPC: "free space on that file system",
    errno.EDQUOT: "free space within your quota",
    errno.EROFS: "name a folder on a writable file system",
    errno.EACCES: "name a folder you can write to, or change its permissions",
    errno.EPERM: "name a folder you can write to, or change its permissions",
}


class KitGroup(click.Group):
    """Maps what the user must fix to a message and an exit code; bugs keep their traceback.

    `lazy` names commands kept in modules of their own, imported only when the command is called
    (start-up speed): name -> (module, attribute, the one line `micakit --help` shows).
    """

    def __init__(self, *args, lazy: dict[str, tuple[str, str, str]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, attribute, _ = self.lazy[cmd_name]
            # lazy: the command's module imports numpy and the kit's engine (start-up speed)
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click lists commands, but a lazy one by its stored line, left unimported."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            if name in self.lazy and name not in self.commands:
                stub = click.Command(name, help=self.lazy[name][2])
                rows.append((name, stub.get_short_help_str(limit)))
                continue
            cmd = self.commands[name]
            if not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except UserError as e:
            click.echo(f"micakit: error: {e.message}", err=True)
            if e.fix:
                click.echo(f"  fix: {e.fix}", err=True)
            ctx.exit(int(e.exit_code))
        except OSError as e:
            if e.errno not in _MACHINE_ERRORS:
                raise  # a bug keeps its traceback
            # the machine's, not the kit's: a full disk, a quota, a read-only or unwritable
            # folder; every finished run is kept (fsynced records), so freeing it and resuming
            # goes on
            where = f" ({e.filename})" if e.filename else ""
            click.echo(f"micakit: error: {e.strerror}{where}", err=True)
            resume = ctx.meta.get("resume_hint")
            then = f", then `micakit {ctx.invoked_subcommand} --resume {resume}`" if resume else ""
            click.echo(f"  fix: {_MACHINE_ERRORS[e.errno]}{then}", err=True)
            ctx.exit(int(ExitCode.USER_ERROR))
        except (KeyboardInterrupt, Interrupted) as e:
            where = f" during {e}" if str(e) else ""
            click.echo(f"micakit: interrupted{where}; finished runs are kept.", err=True)
            resume = ctx.meta.get("resume_hint")
            if resume:
                click.echo(f"  resume with: micakit series --resume {resume}", err=True)
            ctx.exit(int(ExitCode.INTERRUPTED))
        finally:
            lock.release_all()


@click.group(
    cls=KitGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    lazy={
        "correctness": (
            "kit.cli.correctness",
            "correctness",
            "Run §7's correctness check (method A or B) for one model and precision on this card.",
        ),
        "compare": (
            "kit.cli.compare",
            "compare",
            "Compare two results directories: medians, ranges, their ratio, overlap.",
        ),
    },
)
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
@click.option(
    "--executor",
    type=click.Choice(["local", "docker"]),
    default=None,
    help="Default: docker where an engine answers, else local.",
)
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
@click.option(
    "--allow-torch",
    is_flag=True,
    help="Run under a torch other than the protocol's pin; every number reads preparation.",
)
@click.option(
    "--tiktoken-files",
    type=click.Path(path_type=Path),
    help="GPT-2's vocab.bpe and encoder.json, for offline machines.",
)
@click.pass_context
def series(ctx: click.Context, **options) -> None:
    """Run a series: one discarded run per configuration, then five rotating rounds."""
    # lazy: the engine, rich and the report import pandas and matplotlib (start-up speed)
    from rich.console import Console

    from kit.cli import assemble
    from kit.engine import store
    from kit.report import publish
    from kit.report import tables as report

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
        store.publish_modes(s.rd.root)  # whatever the umask, the results are readable (D6)
    click.echo(f"{s.rd.root / 'report.md'}")
    if not s.complete():  # pragma: no cover - run() either finishes or raises
        raise UserError("the series stopped before its last run", f"resume {s.rd.root}")


@main.command("report")
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--checks",
    "check_dirs",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="`micakit correctness` results that gate the verdicts.",
)
@click.option("--preview", is_flag=True, help="Show every time, labelled as preparation (rule 6).")
def report_cmd(results: Path, check_dirs: tuple[Path, ...], preview: bool) -> None:
    """Recompute every table of RESULTS from its raw stamped logs, and print the report.

    Rule 6: a speed is given only for a configuration whose correctness check (--checks)
    passed for its model, precision and contender build; --preview shows every time, each
    labelled as preparation.
    """
    # lazy: the report imports pandas and matplotlib (start-up speed)
    from kit.engine import store
    from kit.report import publish
    from kit.report import tables as report

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
    store.publish_modes(rd.root)
    click.echo((rd.root / "report.md").read_text("utf-8"))


def _series_dir(results: Path) -> ResultsDir:
    # lazy: the store imports numpy (start-up speed)
    from kit.engine.store import ResultsDir

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
    # lazy: the report imports pandas and matplotlib (start-up speed)
    from kit.report import publish

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
    from kit.executors.docker import engine as dockerapi
    from kit.executors.docker import images as images_mod
    from kit.protocol import load as protocol_mod

    p = protocol_mod.load(protocol_path)
    client = dockerapi.connect(docker_host)
    refs = {
        "pytorch": pytorch_ref or images_mod.ref("pytorch", p),
        "mica": mica_ref or images_mod.ref("mica", p),
    }
    ratio = dockerapi.measure_footprints(client, refs, out / "footprint")
    click.echo(json.dumps(ratio, indent=2))


@main.command("merge")
@click.argument(
    "dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path)
)
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="A new directory for release.csv and release.md.",
)
def merge_cmd(dirs: tuple[Path, ...], out: Path) -> None:
    """Merge several cards' results directories into one release table, from their raw logs."""
    from kit.report import merge

    for path in merge.merge(list(dirs), out):
        click.echo(path)


if __name__ == "__main__":  # pragma: no cover
    main()

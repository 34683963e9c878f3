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
from kit.cli import options
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


def _reference() -> dict:
    """The shipped protocol's tables, read as plain TOML: `--help` names its models and
    precisions without loading (and checking) the whole protocol."""
    import tomllib  # the standard library's, quick
    from importlib import resources

    return tomllib.loads((resources.files("kit") / "files" / "protocol.toml").read_text("utf-8"))


_REFERENCE = _reference()
_PRECISIONS = _REFERENCE["precisions"]["names"]


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
            # the one writer's locks, where a command took one (its module is then imported)
            lock = sys.modules.get("kit.engine.lock")
            if lock is not None:
                lock.release_all()


@click.group(
    cls=KitGroup,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
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
        "images": ("kit.cli.images", "images", "The measured images (§8) and the runner image."),
        "footprint": (
            "kit.cli.images",
            "footprint",
            "Record both measured images' sizes and file lists in OUT/footprint/, and their ratio",
        ),
    },
)
@click.version_option(__version__, prog_name="micakit")
def main() -> None:
    """Carry out the TR-2 measurement protocol and leave a results directory anyone can rerun.

    \b
    Examples:
      micakit series --smoke --device cpu --executor local --out results/smoke
      micakit verify results/smoke
      micakit COMMAND --help      (every command's options, with an example)
    """


@main.command()
@click.option("--out", type=click.Path(path_type=Path), help="A new results directory.")
@click.option("--resume", type=click.Path(path_type=Path), help="Resume this results directory.")
@options.protocol_option
@click.option(
    "--model",
    "models",
    multiple=True,
    help=f"One of the protocol's models: {', '.join(_REFERENCE['models'])}; repeat for several "
    "(default: every model; with --smoke, the first).",
)
@click.option(
    "--precision",
    "precisions",
    multiple=True,
    help=f"One of the protocol's precisions: {', '.join(_PRECISIONS)}; repeat for several "
    "(default: every one the card measures).",
)
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
@options.docker_host_option
@click.option("--env", multiple=True, help="KEY=VALUE for every run of both sides (recorded).")
@click.option("--pytorch-image", help="PyTorch's measured image (default: this kit's tag).")
@click.option("--mica-image", help="The contender's measured image (default: this kit's tag).")
@click.option("--gpu", help="The card by index or UUID (default 0), for NVML and Docker.")
@click.option("--refuse-busy", is_flag=True, help="Refuse at once when the card is busy (§5).")
@click.option(
    "--idle-timeout", type=float, default=60.0, help="Seconds to wait for a busy card (§5)."
)
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
@options.verbosity
@click.pass_context
def series(ctx: click.Context, **opts) -> None:
    """Run a series: one discarded run per configuration, then five rotating rounds, §6's
    separate records, and publish its results directory. Resume one after any stop.

    \b
    Examples:
      micakit series --out results/L4 --contender PATH/TO/mica-program
      micakit series --out results/L4-m1 --model shakespeare-char --precision float32
      micakit series --smoke --device cpu --executor local --out results/smoke
      micakit series --resume results/L4
    """
    # lazy: the engine, rich and the report import pandas and matplotlib (start-up speed)
    from rich.console import Console

    from kit.cli import assemble
    from kit.engine import store
    from kit.report import publish
    from kit.report import tables as report

    console = Console(stderr=True, quiet=options.level(ctx) == options.QUIET)
    target = opts["resume"] or opts["out"]
    ctx.meta["resume_hint"] = target
    s, hooks = assemble.series(opts, sys.argv, console)
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
@options.checks_option
@options.preview_option
@options.json_option
@options.verbosity
def report_cmd(results: Path, check_dirs: tuple[Path, ...], preview: bool, as_json: bool) -> None:
    """Print the report of RESULTS, every number recomputed from its raw stamped logs. Reading
    never writes: `micakit publish` writes the published files.

    Rule 6: a speed is given only for a configuration whose correctness check passed for its
    model, precision and contender build (the checks `publish --checks` saved, or --checks
    here); --preview shows every time, each labelled as preparation.

    \b
    Examples:
      micakit report results/L4 > report.md
      micakit report results/L4 --checks results/check-m1-A --checks results/check-m1-B-L4
      micakit report results/smoke --json | jq '.configurations[].state'
    """
    options.reads_only()
    # lazy: the report imports pandas and matplotlib (start-up speed)
    from kit.engine import audit
    from kit.report import summary
    from kit.report.markdown import markdown_report

    rd = _series_dir(results)
    checks = _check_statuses(results, check_dirs) if check_dirs else None
    t = _tables(rd, results, checks, True if preview else None)
    click.echo(summary.text(rd, t) if as_json else markdown_report(rd, t), nl=False)
    for line in audit.torn(rd):  # its run reads as not run: the report is of the runs before it
        options.say(f"micakit: {line}")


@main.command("publish")
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=Path))
@options.checks_option
@options.preview_option
@options.verbosity
def publish_cmd(results: Path, check_dirs: tuple[Path, ...], preview: bool) -> None:
    """Write the published files of RESULTS from its raw logs: tables/, report.md, report.html,
    summary.json, rerun.sh and plots/. A series does this at its end; run it again to gate the
    verdicts by correctness checks (saved in gating.json) or to publish a preview.

    \b
    Examples:
      micakit publish results/L4 --checks results/check-m1-A --checks results/check-m1-B-L4
      micakit publish results/L4 --preview
    """
    # lazy: the report imports pandas and matplotlib (start-up speed)
    from kit.engine import store
    from kit.report import publish
    from kit.report import tables as report

    rd = _series_dir(results)
    rd.write_json(report.PUBLICATION, {"preview": preview})
    if check_dirs:
        statuses = _check_statuses(results, check_dirs)
        rd.write_json(
            report.GATING,
            {"check_dirs": [str(Path(d).resolve()) for d in check_dirs], "statuses": statuses},
        )
    for path in publish.write(rd, _tables(rd, results)):
        click.echo(path)
    store.publish_modes(rd.root)


def _check_statuses(results: Path, check_dirs: tuple[Path, ...]) -> dict[str, str]:
    from kit.correctness import gate  # lazy: the check records and the protocol (start-up speed)

    return gate.checks_for_series(results, list(check_dirs))


def _tables(rd: ResultsDir, results: Path, checks=None, preview: bool | None = None):
    from kit.report import tables as report  # lazy: pandas (start-up speed)

    try:
        return report.tables(rd, checks, preview)
    except ValueError as e:
        raise UserError(
            f"cannot recompute {results}: {e}", f"`micakit verify {results}` names what changed"
        ) from None


def _series_dir(results: Path) -> ResultsDir:
    # lazy: the store imports numpy (start-up speed)
    from kit.engine.store import ResultsDir

    rd = ResultsDir.open(results)
    if rd.manifest().is_check:
        raise UserError(
            f"{results} holds a correctness check, not a series",
            f"its verdict is in {results / 'correctness.md'}; gate a series with "
            f"`micakit publish SERIES --checks {results}`",
        )
    return rd


@main.command()
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=Path))
@options.json_option
@options.verbosity
def verify(results: Path, as_json: bool) -> None:
    """Recompute RESULTS from its raw logs and compare: exit 4, naming each record, raw file,
    table or report line that differs; exit 0 when every published number matches. Writes
    nothing.

    \b
    Example:
      micakit verify results/L4 && echo clean
    """
    options.reads_only()
    rd = _series_dir(results)
    from kit.engine import audit  # lazy: the store (start-up speed)

    # a large directory's folders are audited and its raw files hashed by forked processes
    # while the report's modules load
    examined = audit.Examination(rd)
    # lazy: the report imports pandas and matplotlib (start-up speed)
    from kit.report import publish

    problems = publish.verify(rd, examined=examined)
    if as_json:
        click.echo(json.dumps({"results": str(results), "clean": not problems,
                               "differences": problems}, indent=2))  # fmt: skip
    else:
        for p in problems:
            click.echo(p)
    if problems:
        options.say(f"micakit: {len(problems)} differences in {results}")
        sys.exit(int(ExitCode.VERIFY_MISMATCH))
    if not as_json:
        click.echo(f"{results}: every published number matches its recomputation from the raw logs")


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
@options.verbosity
def merge_cmd(dirs: tuple[Path, ...], out: Path) -> None:
    """Merge several cards' results directories into one release table, from their raw logs.

    \b
    Example:
      micakit merge results/4090 results/3090Ti results/L4 --out results/release
    """
    from kit.report import merge  # lazy: the report imports pandas (start-up speed)

    for path in merge.merge(list(dirs), out):
        click.echo(path)


if __name__ == "__main__":  # pragma: no cover
    main()

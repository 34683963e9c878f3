"""`micakit`: a thin click layer over the kit's keyword API. Parse, call, render, exit.

Exit codes (kit.errors.ExitCode): 0 done; 2 bad input, the message says what to fix; 3 a run
failed and ended the series; 4 `verify` found a difference; 130 interrupted, resumable.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from kit import __version__
from kit.cli import options
from kit.errors import (
    ExitCode,
    Interrupted,
    MachineError,
    UserError,
    machine_error,
    sigterm_as_interrupt,
)

if TYPE_CHECKING:
    from kit.correctness.gate import GatingJson
    from kit.report.tables import Tables
    from kit.results.store import ResultsDir

# `micakit --help` and `--version` import nothing but click: pandas, matplotlib, rich, docker and
# the kit's engine and report are imported inside the commands that use them (start-up speed,
# measured by benchmarks/kit/startup.py).


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

    def __init__(
        self, *args: Any, lazy: dict[str, tuple[str, str, str]] | None = None, **kwargs: Any
    ) -> None:
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

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:  # the group's own: `micakit --bogus`
            _usage(ctx, e)

    def invoke(self, ctx: click.Context) -> object:
        # SIGTERM is Ctrl-C from the command's first act: a stop during start-up (the data, the
        # manifest, the versions' probes) ends like a stop at any other moment
        with sigterm_as_interrupt():
            return self._mapped(ctx)

    def _mapped(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except click.UsageError as e:  # a command's options and arguments, an unknown command
            _usage(ctx, e)
        except UserError as e:
            fix = e.fix
            if isinstance(e, MachineError):
                # every finished run is kept (fsynced records): once fixed, the series goes on
                fix = f"{fix}, then {_again(ctx)}" if _again(ctx) else fix
            _say_error(e.message, fix)
            ctx.exit(int(e.exit_code))
        except OSError as e:
            hint = ctx.meta.get("resume_hint")
            # a write that failed names no file; the writes of the data and the kit's cache
            # name their folders themselves (kit.errors.writing), so this one was the results
            # directory's
            unnamed = hint and not e.filename
            said = machine_error(e, hint, elsewhere="--out") if unnamed else machine_error(e)
            if said is None:
                raise  # a bug keeps its traceback
            again = _again(ctx)
            _say_error(said.message, f"{said.fix}, then {again}" if again else said.fix)
            ctx.exit(int(ExitCode.USER_ERROR))
        except (KeyboardInterrupt, Interrupted) as e:
            where = f" during {e}" if str(e) else ""
            hint = ctx.meta.get("resume_hint")
            if hint and not _started(ctx):
                # README: a series stopped before its manifest was written measured nothing
                click.echo(f"micakit: interrupted{where}, before its first run.", err=True)
                click.echo("  nothing was measured yet: the same command starts it again", err=True)
            else:
                click.echo(f"micakit: interrupted{where}; finished runs are kept.", err=True)
                if hint:
                    resume = f"micakit {ctx.invoked_subcommand} --resume {hint}"
                    click.echo(f"  resume with: {resume}", err=True)
            ctx.exit(int(ExitCode.INTERRUPTED))
        finally:
            # the one writer's locks, where a command took one (its module is then imported)
            lock = sys.modules.get("kit.results.lock")
            if lock is not None:
                lock.release_all()


def _usage(ctx: click.Context, e: click.UsageError) -> NoReturn:
    """Click's usage errors in the kit's form, error and fix, exit 2 (ExitCode.USER_ERROR).

    A type of the kit's may carry its own fix (options.Unusable); any other usage error points
    at the command's help, which lists every option with an example.
    """
    if isinstance(e, _SHOWS_HELP):
        raise e  # `micakit` alone: click's help, as asked
    # as the README names it, whether it ran as `micakit` or `python run.py`
    command = " ".join(["micakit", *(e.ctx or ctx).command_path.split()[1:]])
    fix = getattr(e, "fix", None) or f"`{command} --help` lists what it takes, with an example"
    message = e.format_message()
    # the kit's messages begin in lower case ("error: no such option"), click's in upper case
    _say_error(message[:1].lower() + message[1:], fix)
    ctx.exit(int(ExitCode.USER_ERROR))


_SHOWS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click 8.2 and later


def _say_error(message: str, fix: str | None) -> None:
    click.echo(f"micakit: error: {message}", err=True)
    if fix:
        click.echo(f"  fix: {fix}", err=True)


def _started(ctx: click.Context) -> bool:
    """Whether the command's results directory has its manifest: a directory without one
    never started, and the same command starts it again (kit.engine.engine)."""
    from kit.results.store import MANIFEST  # lazy: the store imports numpy (start-up speed)

    return (Path(ctx.meta["resume_hint"]) / MANIFEST).is_file()


def _again(ctx: click.Context) -> str | None:
    """What goes on after a stop the user fixed: `--resume`, or the same command again."""
    if not ctx.meta.get("resume_hint"):
        return None
    if _started(ctx):
        return f"`micakit {ctx.invoked_subcommand} --resume {ctx.meta['resume_hint']}`"
    return "run the same command again (nothing was measured yet)"


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
            "Compare two results directories: does B reproduce A?",
        ),
        "cloud": (
            "kit.cli.cloud",
            "cloud",
            "Reproduce on rented cards through SkyPilot (pip install 'micakit[cloud]').",
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
@click.option(
    "--refuse-busy", is_flag=True, help="Refuse at once when the card (or the CPUs) is busy (§5)."
)
@click.option(
    "--idle-timeout",
    type=float,
    default=60.0,
    help="Seconds to wait for a busy card (§5); on a CPU, then go on marked busy.",
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
@click.option(
    "--aa",
    multiple=True,
    is_flag=False,
    flag_value="primary",
    metavar="[all|CONFIG]",
    help="After the timed rounds, A/A rounds: each chosen configuration against its identical "
    "twin, to measure this card's own noise. Alone: the contender's primary build and "
    "PyTorch's default mode; `all`; or configurations by id (repeat, or comma-separated).",
)
@options.verbosity
@click.pass_context
def series(ctx: click.Context, **opts: Any) -> None:
    """Run a series: one discarded run per configuration, then five rotating rounds, §6's
    separate records, and publish its results directory. Resume one after any stop.

    \b
    Examples:
      micakit series --out results/L4 --contender PATH/TO/mica-program
      micakit series --out results/L4-m1 --model shakespeare-char --precision float32
      micakit series --smoke --device cpu --executor local --out results/smoke
      micakit series --out results/L4 --contender PATH/TO/mica-program --aa
      micakit series --resume results/L4
    """
    # first, so that a stop or a full disk at any moment of start-up says how to go on
    ctx.meta["resume_hint"] = opts["resume"] or opts["out"]
    # lazy: the engine, rich and the report import pandas and matplotlib (start-up speed)
    from rich.console import Console

    from kit.cli import assemble
    from kit.report import publish, tables
    from kit.results import audit, store

    console = Console(stderr=True, quiet=options.level(ctx) == options.QUIET)
    s, hooks = assemble.series(assemble.SeriesArgs(**opts), sys.argv, console)
    disk_failed = False
    try:
        s.run()
        if s.complete():
            s.executor.finish()
    except (MachineError, OSError):
        # a full or unwritable disk: publishing would fail the same way and hide the error
        # that says so; `--resume` publishes once it is fixed
        disk_failed = True
        raise
    finally:
        hooks.close()
        if s.rd.records() and not disk_failed:
            # D6: numbers only from what a series wrote
            publish.write(s.rd, tables.tables(s.rd, listing=audit.refuse_if_altered(s.rd)))
        store.publish_modes(s.rd.root)  # whatever the umask, the results are readable (D6)
    click.echo(f"{s.rd.root / 'report.md'}")
    if not s.complete():  # pragma: no cover - run() either finishes or raises
        raise UserError("the series stopped before its last run", f"resume {s.rd.root}")


@main.command("report")
@click.argument("results", type=options.ResultsFolder())
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
    from kit.report import summary
    from kit.report.markdown import markdown_report
    from kit.results import audit

    rd = _series_dir(results)
    gating = _gating(results, check_dirs) if check_dirs else None
    checks = gating["statuses"] if gating else None
    t = _tables(rd, results, checks, True if preview else None)
    click.echo(summary.text(rd, t) if as_json else markdown_report(rd, t, gating), nl=False)
    for line in audit.torn(rd):  # its run reads as not run: the report is of the runs before it
        options.say(f"micakit: {line}")


@main.command("publish")
@click.argument("results", type=options.ResultsFolder())
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
    from kit.report import publish, tables
    from kit.results import store

    rd = _series_dir(results)
    rd.write_json(tables.PUBLICATION, {"preview": preview})
    if check_dirs:  # the statuses and the checks (directory, program) that gave them
        rd.write_json(tables.GATING, _gating(results, check_dirs))
    for path in publish.write(rd, _tables(rd, results)):
        click.echo(path)
    store.publish_modes(rd.root)


def _gating(results: Path, check_dirs: tuple[Path, ...]) -> GatingJson:
    """gating.json's content: each check's verdict computed again from its raw logs."""
    from kit.correctness import gate  # lazy: the check records and the protocol (start-up speed)

    return gate.gating(results, list(check_dirs)).to_json()


def _tables(
    rd: ResultsDir,
    results: Path,
    checks: dict[str, str] | None = None,
    preview: bool | None = None,
) -> Tables:
    """The tables of an audited directory (D6: numbers only from what a series wrote)."""
    from kit.report import tables  # lazy: pandas (start-up speed)
    from kit.results import audit  # lazy: the store (start-up speed)

    try:
        return tables.tables(rd, checks, preview, listing=audit.refuse_if_altered(rd))
    except ValueError as e:
        raise UserError(
            f"cannot recompute {results}: {e}", f"`micakit verify {results}` names what changed"
        ) from None


def _series_dir(results: Path) -> ResultsDir:
    # lazy: the store imports numpy (start-up speed)
    from kit.results.store import ResultsDir

    rd = ResultsDir.open(results)
    if rd.manifest().is_check:
        raise UserError(
            f"{results} holds a correctness check, not a series",
            f"its verdict is in {results / 'correctness.md'}; gate a series with "
            f"`micakit publish SERIES --checks {results}`",
        )
    return rd


@main.command()
@click.argument("results", type=options.ResultsFolder())
@options.json_option
@options.verbosity
def verify(results: Path, as_json: bool) -> None:
    """Recompute RESULTS from its raw logs and compare: exit 4, naming each record, raw file,
    table or report line that differs; exit 0 when every published number matches. Writes
    nothing. RESULTS is a series (its gating.json derived again from the checks it names) or
    a correctness check (its verdict, record, tables, plot and correctness.md).

    \b
    Examples:
      micakit verify results/L4 && echo clean
      micakit verify results/check-m1-A
    """
    options.reads_only()
    if _holds_check(results):
        from kit.correctness import check_verify  # lazy: pandas (start-up speed)

        _differences(results, check_verify.verify_check(results), as_json)
        return
    rd = _series_dir(results)
    from kit.results import audit  # lazy: the store (start-up speed)

    # a large directory's folders are audited and its raw files hashed by forked processes
    # while the report's modules load
    examined = audit.Examination(rd)
    # lazy: the report imports pandas and matplotlib (start-up speed)
    from kit.report import publish

    problems = publish.verify(rd, examined=examined)
    from kit.correctness import gate  # lazy: the check records (start-up speed)

    problems += gate.gating_differences(rd.root)  # gating.json, derived again from its checks
    _differences(results, problems, as_json)


def _holds_check(results: Path) -> bool:
    from kit.results.store import ResultsDir  # lazy: the store imports numpy (start-up speed)

    return ResultsDir.open(results).manifest().is_check


def _differences(results: Path, problems: list[str], as_json: bool) -> None:
    """verify's answer: every difference named, exit 4; or that every number matches."""
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
@click.argument("dirs", nargs=-1, required=True, type=options.ResultsFolder())
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

"""`micakit`: a thin click layer over the kit's keyword API. Parse, call, render, exit.

Exit codes (kit.errors.ExitCode): 0 done; 2 bad input, the message says what to fix; 3 a run
failed and ended the series; 4 `verify` found a difference; 5, 6, 7 `compare --fail-slower`'s
gate (B slower; B lacks what A has; undecided with --fail-ambiguous); 130 interrupted.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kit import __version__
from kit.cli import options
from kit.cli.group import KitGroup
from kit.errors import ExitCode, MachineError, UserError

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


def _version(ctx: click.Context) -> None:
    """`micakit --version`: the kit's version, its commit and the SHA-256 of the protocol it
    ships (the hash a results directory's manifest records), all that names this kit."""
    import hashlib
    from importlib import resources

    from kit import kit_commit

    shipped = (resources.files("kit") / "files" / "protocol.toml").read_bytes()
    click.echo(f"commit {kit_commit()}")
    click.echo(f"protocol sha256 {hashlib.sha256(shipped).hexdigest()}")
    # last, and as click wrote it: every published rerun.sh checks that the output ends with
    # " VERSION" (kit/files/rerun-body.sh)
    click.echo(f"micakit, version {__version__}")
    ctx.exit(0)


_REFERENCE = _reference()
_PRECISIONS = _REFERENCE["precisions"]["names"]


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
@click.option(
    "--version",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=lambda ctx, _, value: _version(ctx) if value else None,
    help="Show the version, the commit it was built from and the protocol's hash, and exit.",
)
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
    shell_complete=options.complete_models,
    help=f"One of the protocol's models: {', '.join(_REFERENCE['models'])}; repeat for several "
    "(default: every model; with --smoke, the first).",
)
@click.option(
    "--precision",
    "precisions",
    multiple=True,
    shell_complete=options.complete_precisions,
    help=f"One of the protocol's precisions: {', '.join(_PRECISIONS)}; repeat for several "
    "(default: every one the card measures).",
)
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default=None, help="Default: cuda.")
@click.option("--smoke", is_flag=True, help="Scaled-down models that train in seconds (CPU).")
@click.option(
    "--full-cpu",
    is_flag=True,
    help="With --device cpu and no --smoke: train the full-size models on the CPU, on purpose "
    "(hours to days); without it that is refused.",
)
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

    quiet = options.level(ctx) == options.QUIET
    console = Console(stderr=True, quiet=quiet)
    s, hooks = assemble.series(assemble.SeriesArgs(**opts), sys.argv, console)
    disk_failed = False
    published: Tables | None = None
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
            published = tables.tables(s.rd, listing=audit.refuse_if_altered(s.rd))
            publish.write(s.rd, published)
        store.publish_modes(s.rd.root)  # whatever the umask, the results are readable (D6)
    if quiet or published is None:  # -q: the report's path alone, for scripts
        click.echo(f"{s.rd.root / 'report.md'}")
    else:  # the result in hyperfine's manner, with the commands that apply next
        _result(s.rd, published, s.executor.host_path)
    if not s.complete():  # pragma: no cover - run() either finishes or raises
        raise UserError("the series stopped before its last run", f"resume {s.rd.root}")


def _result(
    rd: ResultsDir, t: Tables, host_path: Callable[[Path], str | None] | None = None
) -> None:
    """The result block on stdout (kit.report.terminal), paths as the user's shell sees them."""
    from kit.cli import shown  # lazy: the report's modules load with it (start-up speed)
    from kit.report import terminal
    from kit.results import store

    where = shown.mapper(host_path)
    protocol = store.load_protocol(rd)
    click.echo(terminal.block(rd, t, protocol, where(str(rd.root)), where), nl=False)


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
    from kit.report import publish, summary
    from kit.results import audit

    rd = _series_dir(results)
    gating = _gating(results, check_dirs) if check_dirs else None
    checks = gating["statuses"] if gating else None
    t = _tables(rd, results, checks, True if preview else None)
    click.echo(summary.text(rd, t) if as_json else publish.report_md(rd, t, gating), nl=False)
    if not as_json and sys.stdout.isatty():  # on a terminal, the result block ends the report
        _result(rd, t)
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
        from kit.results import differences  # lazy: pandas (start-up speed)

        found = [differences.as_object(p) for p in problems]
        click.echo(json.dumps({"schema_version": differences.VERIFY_SCHEMA, "results": str(results),
                               "clean": not problems, "differences": found}, indent=2))  # fmt: skip
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

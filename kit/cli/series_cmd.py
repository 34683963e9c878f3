"""`micakit series`: a series run, resumed and published (kit.cli.assemble makes it ready)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from kit.cli import options, reading
from kit.cli.declared import takes
from kit.cli.series_args import SeriesArgs
from kit.errors import DirectoryDiffers, Interrupted, MachineError, UserError

if TYPE_CHECKING:
    from kit.report.tables import Tables


@click.command("series")
@takes(SeriesArgs)
@options.verbosity
def series(args: SeriesArgs) -> None:
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
    run(args)


def run(args: SeriesArgs) -> None:
    """The series `args` names, run to its end (or resumed), published, and its result said."""
    # first, so that a stop or a full disk at any moment of start-up says how to go on
    click.get_current_context().meta["resume_hint"] = args.resume or args.out
    # lazy: the engine, rich and the report import pandas and matplotlib (start-up speed)
    from rich.console import Console

    from kit.cli import assemble
    from kit.report import publish, tables
    from kit.results import audit, store

    quiet = options.level() == options.QUIET
    console = Console(stderr=True, quiet=quiet)
    s, hooks = assemble.series(args, sys.argv, console)
    disk_failed = stopped = False
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
    except (KeyboardInterrupt, Interrupted):
        stopped = True
        raise
    finally:
        hooks.close()
        if s.rd.records() and not disk_failed:
            # D6: numbers only from what a series wrote
            try:
                published = tables.tables(s.rd, listing=audit.refuse_if_altered(s.rd))
                publish.write(s.rd, published)
            except DirectoryDiffers:
                if not stopped:
                    raise
                # a stop in the instant between a run's end and its record: its folder shows
                # a finished run without one, which `--resume` runs again before it publishes
                options.say("the report is left as it was: `--resume` publishes it")
        store.publish_modes(s.rd.root)  # whatever the umask, the results are readable (D6)
    if quiet or published is None:  # -q: the report's path alone, for scripts
        click.echo(f"{s.rd.root / 'report.md'}")
    else:  # the result in hyperfine's manner, with the commands that apply next
        reading.result(s.rd, published, s.executor.host_path)
    if not s.complete():  # pragma: no cover - run() either finishes or raises
        raise UserError("the series stopped before its last run", f"resume {s.rd.root}")

"""`micakit report RESULTS`: the report, every number recomputed from the raw stamped logs."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kit.cli import options, reading


@click.command("report")
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
    from kit.results import audit  # lazy: the store (start-up speed)

    rd = reading.series_dir(results)
    # a large directory's folders are audited and its runs judged again by forked processes
    # while the report's modules load
    survey = audit.Survey(rd)
    # lazy: the report imports pandas and matplotlib (start-up speed)
    from kit.report import publish, summary

    gating = reading.gating(results, check_dirs) if check_dirs else None
    checks = gating["statuses"] if gating else None
    t = reading.tables_of(rd, results, checks, True if preview else None, survey)
    click.echo(summary.text(rd, t) if as_json else publish.report_md(rd, t, gating), nl=False)
    if not as_json and sys.stdout.isatty():  # on a terminal, the result block ends the report
        reading.result(rd, t)
    for line in audit.torn(rd):  # its run reads as not run: the report is of the runs before it
        options.say(f"micakit: {line}")

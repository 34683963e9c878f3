"""`micakit publish RESULTS`: the published files written again from the raw logs, gated by
correctness checks or as a preview."""

from __future__ import annotations

from pathlib import Path

import click

from kit.cli import options, reading


@click.command("publish")
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
    from kit.report.drawer import Drawer  # lazy: the store (start-up speed)
    from kit.results import audit

    rd = reading.series_dir(results)
    # the plots' drawer loads matplotlib meanwhile, and a large directory's folders are
    # audited and its runs judged again by forked processes while the report's modules load
    # (neither reads what is written below)
    drawer = Drawer()
    survey = audit.Survey(rd)
    # lazy: the report imports pandas and matplotlib (start-up speed)
    from kit.report import publish, tables
    from kit.results import store

    rd.write_json(tables.PUBLICATION, {"preview": preview})
    if check_dirs:  # the statuses and the checks (directory, program) that gave them
        rd.write_json(tables.GATING, reading.gating(results, check_dirs))
    try:
        t = reading.tables_of(rd, results, survey=survey)
    except BaseException:
        drawer.close()
        raise
    for path in publish.write(rd, t, drawer):
        click.echo(path)
    store.publish_modes(rd.root)

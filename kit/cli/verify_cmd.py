"""`micakit verify RESULTS`: every published number recomputed from the raw logs and compared;
exit 4 naming each difference."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kit.cli import options, reading
from kit.errors import ExitCode


@click.command("verify")
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
    rd = reading.series_dir(results)
    from kit.report.drawer import Drawer  # lazy: the store (start-up speed)
    from kit.results import audit

    # the plots' drawer loads matplotlib meanwhile, and a large directory's folders are
    # audited and its raw files hashed by forked processes while the report's modules load
    drawer = Drawer()
    examined = audit.Examination(rd)
    # lazy: the report imports pandas and matplotlib (start-up speed)
    from kit.report import publish, tables

    problems = publish.verify(rd, examined=examined, drawer=drawer)
    if (rd.root / tables.GATING).exists():  # a series gated by its checks (`publish --checks`)
        from kit.correctness import gate  # lazy: the checks load the engine (start-up speed)

        problems += gate.gating_differences(rd.root)  # gating.json, derived again
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

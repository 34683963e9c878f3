"""What the commands that read a results directory share: the series' directory opened (a
check's refused), its tables recomputed from an audited directory, gating.json's content from
the checks, and the result block a series ends with on the terminal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kit.errors import UserError

if TYPE_CHECKING:
    from kit.correctness.gate import GatingJson
    from kit.report.tables import Tables
    from kit.results.audit import Survey
    from kit.results.store import ResultsDir


def result(
    rd: ResultsDir, t: Tables, host_path: Callable[[Path], str | None] | None = None
) -> None:
    """The result block on stdout (kit.report.terminal), paths as the user's shell sees them."""
    from kit.cli import shown  # lazy: the report's modules load with it (start-up speed)
    from kit.report import terminal
    from kit.results import store

    where = shown.mapper(host_path)
    protocol = store.load_protocol(rd)
    click.echo(terminal.block(rd, t, protocol, where(str(rd.root)), where), nl=False)


def gating(results: Path, check_dirs: tuple[Path, ...]) -> GatingJson:
    """gating.json's content: each check's verdict computed again from its raw logs."""
    from kit.correctness import gate  # lazy: the check records and the protocol (start-up speed)

    return gate.gating(results, list(check_dirs)).to_json()


def tables_of(
    rd: ResultsDir,
    results: Path,
    checks: dict[str, str] | None = None,
    preview: bool | None = None,
    survey: Survey | None = None,
) -> Tables:
    """The tables of an audited directory (D6: numbers only from what a series wrote).
    `survey`: the audit and the judging already started (`audit.Survey`), else done here."""
    from kit.report import tables  # lazy: pandas (start-up speed)
    from kit.results import audit  # lazy: the store (start-up speed)

    try:
        if survey is None:
            return tables.tables(rd, checks, preview, listing=audit.refuse_if_altered(rd))
        listing, judged, read = survey.refused()
        return tables.tables(rd, checks, preview, listing=listing, judged=judged, read=read)
    except ValueError as e:
        raise UserError(
            f"cannot recompute {results}: {e}", f"`micakit verify {results}` names what changed"
        ) from None


def series_dir(results: Path) -> ResultsDir:
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

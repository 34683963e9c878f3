"""`micakit compare A B`: two results directories side by side (kit/report/comparison.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import click

from kit.cli import options
from kit.errors import ExitCode, UserError


def _percent(name: str, help: str) -> Callable[[options.F], options.F]:
    """An option in percent, above 0 and below 100; unset by default."""
    kind = click.FloatRange(0, 100, max_open=True)
    return click.option(name, type=kind, default=None, metavar="PCT", help=help)


@click.command("compare")
@click.argument("a", type=options.ResultsFolder())
@click.argument("b", type=options.ResultsFolder())
@click.option(
    "--allow-protocol-change",
    is_flag=True,
    help="Compare directories that ran under different protocols; the output says so.",
)
@click.option(
    "--preview",
    is_flag=True,
    help="Show times whose correctness check has not passed, labelled preparation (rule 6).",
)
@_percent(
    "--threshold",
    "The smallest difference worth a word, in percent "
    "[default: the protocol's [diagnostics] threshold].",
)
@_percent(
    "--fail-slower",
    "A gate for CI: exit 5 when any configuration of B is slower than A by more than PCT "
    "percent, its interval (below 5 runs a side, its range) clear of it; exit 6 when B lacks "
    "a configuration or a time A has (B's runs failed, were void or ran out of memory). Where "
    "it cannot decide (runs flagged, an A/A not level, a difference the runs cannot resolve) "
    "it says why on stderr and passes. See docs/compare.md.",
)
@click.option(
    "--allow-missing",
    is_flag=True,
    help="With --fail-slower: do not fail where B lacks a configuration or a time A has "
    "(each is still named on stderr).",
)
@click.option(
    "--fail-ambiguous",
    is_flag=True,
    help="With --fail-slower: exit 7 where the gate cannot decide (a class `ambiguous`, or no "
    "time to compare), instead of passing.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of Markdown.")
@options.verbosity
def compare(
    a: Path,
    b: Path,
    allow_protocol_change: bool,
    preview: bool,
    threshold: float | None,
    fail_slower: float | None,
    allow_missing: bool,
    fail_ambiguous: bool,
    as_json: bool,
) -> None:
    """Compare two results directories: does B reproduce A?

    Per configuration in both: both medians and ranges, the ratio B / A (above 1: B slower)
    with its bootstrap interval (from 5 runs a side), each side's flagged runs and A/A, and a
    class: same, faster, slower or ambiguous, with the reason; what is in one only is listed.
    Runs flagged on either side (a busy machine, a throttled card, clocks that differed) or an
    A/A not level make the class ambiguous. On a terminal the table is drawn; redirected, it
    is Markdown.

    \b
    Example:
      micakit compare results/L4-torch-2.13 results/L4-torch-2.14 --preview
      micakit compare results/main results/branch --preview --fail-slower 2
    """
    options.reads_only()
    if (allow_missing or fail_ambiguous) and fail_slower is None:
        raise UserError(
            "--allow-missing and --fail-ambiguous shape --fail-slower's gate, which was not given",
            "add --fail-slower PCT, or leave them out",
        )
    # lazy import for start-up speed: pandas and the report load only when the command runs
    from kit.report import compare_gate, compare_view, comparison

    result = comparison.compare(
        comparison.read(a, preview=preview),
        comparison.read(b, preview=preview),
        allow_protocol_change=allow_protocol_change,
        preview=preview,
        threshold=None if threshold is None else threshold / 100,
    )
    found = None
    if fail_slower is not None:
        found = compare_gate.gate(
            result,
            fail_slower / 100,
            allow_missing=allow_missing,
            fail_ambiguous=fail_ambiguous,
        )
        result["gate"] = found.to_json()
    if as_json:
        click.echo(json.dumps(result, indent=2))
    elif sys.stdout.isatty():
        # lazy import for start-up speed, as above
        from rich.console import Console

        compare_view.terminal(result, Console())
    else:
        click.echo(compare_view.markdown(result), nl=False)
    if found is not None:
        for line in found.lines():
            click.echo(f"micakit: {line}", err=True)
        if found.exit_code() is not ExitCode.OK:
            raise SystemExit(int(found.exit_code()))

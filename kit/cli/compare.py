"""`micakit compare A B`: two results directories side by side (kit/report/comparison.py)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kit.cli import options
from kit.errors import ExitCode


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
@click.option(
    "--threshold",
    type=click.FloatRange(0, 100, max_open=True),
    default=None,
    metavar="PCT",
    help="The smallest difference worth a word, in percent "
    "[default: the protocol's [diagnostics] threshold].",
)
@click.option(
    "--fail-slower",
    type=click.FloatRange(0, 100, max_open=True),
    default=None,
    metavar="PCT",
    help="Exit 5 when any configuration of B is slower than A by more than PCT percent, "
    "its interval clear of it (a gate for CI).",
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
    as_json: bool,
) -> None:
    """Compare two results directories: does B reproduce A?

    Per configuration in both: both medians and ranges, their ratio and whether the ranges
    overlap, and a class: same, faster, slower or ambiguous, with the bootstrap interval of
    B / A and the reason; what is in one only is listed.

    \b
    Example:
      micakit compare results/L4-torch-2.13 results/L4-torch-2.14 --preview
      micakit compare results/main results/branch --preview --fail-slower 2
    """
    options.reads_only()
    # lazy import for start-up speed: pandas and the report load only when the command runs
    from kit.report import comparison

    result = comparison.compare(
        comparison.read(a, preview=preview),
        comparison.read(b, preview=preview),
        allow_protocol_change=allow_protocol_change,
        preview=preview,
        threshold=None if threshold is None else threshold / 100,
    )
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(comparison.markdown(result), nl=False)
    if fail_slower is not None:
        slower = comparison.slower_than(result, fail_slower / 100)
        for e in slower:
            click.echo(
                f"micakit: B slower than A by more than {fail_slower:g}%: {e['model']} · "
                f"{e['precision']} · {e['side']} · {e['variant']} ({e['reason']})",
                err=True,
            )
        if slower:
            raise SystemExit(int(ExitCode.SLOWER))

"""`micakit compare A B`: two results directories side by side (kit/report/comparison.py)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from kit.cli import options


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
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of Markdown.")
@options.verbosity
def compare(a: Path, b: Path, allow_protocol_change: bool, preview: bool, as_json: bool) -> None:
    """Compare two results directories: medians, ranges, their ratio, overlap.

    Per configuration in both: both medians and ranges, their ratio and whether the ranges
    overlap; what is in one only is listed.

    \b
    Example:
      micakit compare results/L4-torch-2.13 results/L4-torch-2.14 --preview
    """
    options.reads_only()
    # lazy import for start-up speed: pandas and the report load only when the command runs
    from kit.report import comparison

    result = comparison.compare(
        comparison.read(a, preview=preview),
        comparison.read(b, preview=preview),
        allow_protocol_change=allow_protocol_change,
        preview=preview,
    )
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(comparison.markdown(result), nl=False)

"""`micakit merge DIRS --out OUT`: several cards' results directories as one release table."""

from __future__ import annotations

from pathlib import Path

import click

from kit.cli import options


@click.command("merge")
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

"""`micakit`: the group every command hangs from, each command in a module of its own that is
imported only when it is called (kit.cli.group); a command parses, calls, renders and exits.

Exit codes (kit.errors.ExitCode): 0 done; 2 bad input, the message says what to fix; 3 a run
failed and ended the series; 4 `verify` found a difference; 5, 6, 7 `compare --fail-slower`'s
gate (B slower; B lacks what A has; undecided with --fail-ambiguous); 130 interrupted.
"""

from __future__ import annotations

import click

from kit import __version__
from kit.cli.group import KitGroup

# `micakit --help` and `--version` import nothing but click: pandas, matplotlib, rich, docker and
# the kit's engine and report are imported inside the commands that use them (start-up speed,
# measured by benchmarks/kit/startup.py).


def _version(ctx: click.Context) -> None:
    """`micakit --version`: the kit's version, its commit and the SHA-256 of the protocol it
    ships (the hash a results directory's manifest records), all that names this kit."""
    import hashlib
    from importlib import resources

    from kit import kit_commit

    shipped = (resources.files("kit") / "files" / "protocol.toml").read_bytes()
    # first, as click writes it: a published rerun.sh looks for "micakit, version VERSION" in
    # the output (kit/files/rerun-body.sh; those before 0.1.0's second step, at its end)
    click.echo(f"micakit, version {__version__}")
    click.echo(f"commit {kit_commit()}")
    click.echo(f"protocol sha256 {hashlib.sha256(shipped).hexdigest()}")
    ctx.exit(0)


@click.group(
    cls=KitGroup,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
    resumable=("series", "correctness"),
    lazy={
        "series": (
            "kit.cli.series_cmd",
            "series",
            "Run a series: one discarded run per configuration, then five rotating rounds, §6's",
        ),
        "report": (
            "kit.cli.report_cmd",
            "report_cmd",
            "Print the report of RESULTS, every number recomputed from its raw stamped logs. "
            "Reading",
        ),
        "publish": (
            "kit.cli.publish_cmd",
            "publish_cmd",
            "Write the published files of RESULTS from its raw logs: tables/, report.md, "
            "report.html,",
        ),
        "verify": (
            "kit.cli.verify_cmd",
            "verify",
            "Recompute RESULTS from its raw logs and compare: exit 4, naming each record, "
            "raw file,",
        ),
        "merge": (
            "kit.cli.merge_cmd",
            "merge_cmd",
            "Merge several cards' results directories into one release table, from their raw logs.",
        ),
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


if __name__ == "__main__":  # pragma: no cover
    main()

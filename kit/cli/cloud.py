"""`micakit cloud`: reproduce on rented cards through SkyPilot (the extra `micakit[cloud]`).

Imported only when `micakit cloud ...` is called (kit/cli/main.py's lazy table), and SkyPilot
itself only when a subcommand asks it something: `micakit --help` never imports either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kit.cli import options
from kit.cloud import fleet, plan, skypilot, task
from kit.errors import UserError

_CARD = click.option(
    "--card", default="L4", help="SkyPilot's name of the card: L4, A100, A100-80GB, H100, ..."
)
_INSTANCE = click.option(
    "--instance-type",
    default=None,
    help="The cloud's machine type (default: g2-standard-8 for an L4 on gcp, §4; else the "
    "cheapest SkyPilot finds with the card).",
)
_MACHINES = click.option(
    "--machines", type=int, default=1, help="How many machines, one card each."
)
_SPOT = click.option("--spot", is_flag=True, help="Spot (preemptible) machines: cheaper, may stop.")
_INFRA = click.option(
    "--infra", default="gcp", help="SkyPilot's infra: a cloud, or cloud/region (gcp/us-central1)."
)
_HOURS = click.option(
    "--hours", type=float, default=None, help="How long you expect a series to take, for the total."
)


@click.group()
def cloud() -> None:
    """Reproduce on rented cards through SkyPilot (pip install 'micakit[cloud]').

    plan, run, audit, down: what renting costs, a fleet's series, and nothing left billing.

    Needs the extra: pip install 'micakit[cloud]'; SkyPilot's credentials and quotas:
    https://docs.skypilot.co/en/latest/getting-started/installation.html (`sky check`).

    \b
    Examples:
      micakit cloud plan --machines 5
      micakit cloud run --machines 5 --digests digests.json --yes
      micakit cloud audit
    """


def _run_args(
    machines: int, card: str, instance_type: str | None, spot: bool, infra: str
) -> list[str]:
    args = [f"--machines {machines}"]
    args += [] if card == "L4" else [f"--card {card}"]
    args += [f"--instance-type {instance_type}"] if instance_type else []
    args += ["--spot"] if spot else []
    args += [] if infra == "gcp" else [f"--infra {infra}"]
    return [*args, "--digests digests.json"]


@cloud.command("plan")
@_MACHINES
@_CARD
@_INSTANCE
@_SPOT
@_INFRA
@_HOURS
@options.verbosity
def plan_cmd(
    machines: int, card: str, instance_type: str | None, spot: bool, infra: str, hours: float | None
) -> None:
    """Print what would be rented, per machine and in all, with prices from SkyPilot's
    catalog ("price unknown" where it cannot be read), and the commands that follow.

    \b
    Example:
      micakit cloud plan --machines 5 --card L4 --hours 6
    """
    p = plan.make(plan.new_series_id(), machines, card, instance_type, spot, infra, hours)
    for line in plan.lines(p, _run_args(machines, card, instance_type, spot, infra)):
        click.echo(line)


@cloud.command("run")
@_MACHINES
@_CARD
@_INSTANCE
@_SPOT
@_INFRA
@_HOURS
@click.option("--digests", type=click.Path(path_type=Path), help="The release's digests.json.")
@click.option("--image", "runner", help="The runner image by digest (REPO@sha256:...).")
@click.option("--pytorch-image", "pytorch", help="PyTorch's measured image by digest.")
@click.option("--contender", type=click.Path(path_type=Path), help="The contender program.")
@click.option("--series-id", help="The fleet's id (default: the UTC time).")
@click.option("--out", type=click.Path(path_type=Path), help="Default: results/<series-id>.")
@click.option("--yes", is_flag=True, help="Launch without asking.")
@click.argument("series_args", nargs=-1, type=click.UNPROCESSED)
@options.verbosity
def run_cmd(**o: Any) -> None:
    """Launch N machines, run a series on each (the runner image by digest), pull each results
    directory back, verify it, and tear every machine down, on success, failure or Ctrl-C.
    Arguments after -- go to `micakit series`. Without --yes it prints the plan and asks.

    \b
    Example:
      micakit cloud run --machines 1 --instance-type g2-standard-8 --digests digests.json --yes
    """
    imgs = task.images(o["digests"], o["runner"], o["pytorch"])
    series_id = plan.check_series_id(o["series_id"] or plan.new_series_id())
    p = plan.make(
        series_id, o["machines"], o["card"], o["instance_type"], o["spot"], o["infra"], o["hours"]
    )
    if not o["yes"]:
        for line in plan.lines(p)[:-4]:  # the plan without its "next" commands
            click.echo(line)
        if not click.confirm("Rent these machines?", default=False):
            raise UserError("nothing was rented", "answer y, or pass --yes")
    out = o["out"] or Path("results") / series_id
    held = fleet.run(p, out, imgs, o["contender"], list(o["series_args"]), options.say, _verify)
    for h in held:
        state = "verified" if h.pulled and not h.differences else "NOT verified"
        done = "series done" if h.succeeded else "series failed"
        click.echo(f"{out / h.directory}: {done}, {state}")
    click.echo(f"{out / fleet.FLEET}")
    _audit()  # nothing left billing, or each one named
    failed = [h for h in held if not (h.succeeded and h.pulled and not h.differences)]
    if failed:
        raise UserError(
            f"{len(failed)} of {len(held)} machines did not bring back a verified series: "
            + ", ".join(h.machine.cluster for h in failed),
            f"each machine's lines above say why; what came back is in {out}",
        )
    if len(held) > 1:
        dirs = " ".join(str(out / h.directory) for h in held)
        click.echo(f"next: micakit merge {dirs} --out {out / 'release'}")


@cloud.command("audit")
@options.verbosity
def audit_cmd() -> None:
    """List every cluster with the kit's label (SkyPilot's status, refreshed); exit 2 naming
    each one still up."""
    _audit()


@cloud.command("down")
@click.argument("series_id")
@options.verbosity
def down_cmd(series_id: str) -> None:
    """Tear down every machine of SERIES-ID that is left (micakit-SERIES-ID-<i>)."""
    found = [c for c in skypilot.clusters() if _of(c, series_id)]
    failed = []
    for c in found:
        try:
            skypilot.down(c.name)
        except Exception as e:  # noqa: BLE001 - each one named below, the others still go
            options.say(f"could not tear down {c.name}: {e}")
            failed.append(c.name)
            continue
        click.echo(f"tore down {c.name}")
    if failed:
        raise UserError(
            f"{len(failed)} machine(s) of series {series_id} are still up: {', '.join(failed)}",
            "the lines above say why; run the same command again, or `sky down NAME`, and "
            "check with `micakit cloud audit`",
        )
    if not found:
        click.echo(f"no machine of series {series_id} is left")


def _of(c: skypilot.Cluster, series_id: str) -> bool:
    return c.series_id == series_id or c.name.startswith(f"{skypilot.PREFIX}{series_id}-")


def _audit() -> None:
    found = skypilot.clusters()
    for c in found:
        autodown = (
            f"autodown after {c.autostop_min} idle minutes"
            if c.to_down and c.autostop_min is not None and c.autostop_min >= 0
            else "NO autodown"
        )
        click.echo(f"{c.name}\t{c.status}\t{c.region or 'region unknown'}\t{autodown}")
    if found:
        series = sorted({c.series_id or c.name for c in found})
        raise UserError(
            f"{len(found)} machine(s) of the kit are still up: {', '.join(c.name for c in found)}",
            "tear them down: " + "; ".join(f"`micakit cloud down {s}`" for s in series),
        )
    click.echo("no machine of the kit is up")


def _verify(directory: Path) -> list[str]:
    """`micakit verify` on a pulled directory: every difference, or none."""
    from kit.correctness import gate  # lazy: the check records (start-up speed)
    from kit.report import publish  # lazy: pandas and matplotlib (start-up speed)
    from kit.results.store import ResultsDir

    try:
        rd = ResultsDir.open(directory)
    except UserError as e:
        return [e.message]
    return [*publish.verify(rd), *gate.gating_differences(rd.root)]

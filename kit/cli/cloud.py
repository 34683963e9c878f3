"""`micakit cloud`: reproduce on rented cards through SkyPilot (the extra `micakit[cloud]`).

Imported only when `micakit cloud ...` is called (kit/cli/main.py's lazy table), and SkyPilot
itself only when a subcommand asks it something: `micakit --help` never imports either.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from kit.cli import options
from kit.cloud import fleet, plan, skypilot, task, yamlish
from kit.errors import FleetIncomplete, UserError

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
    "--infra",
    default="gcp",
    help="SkyPilot's infra: CLOUD[/REGION[/ZONE]] (gcp, gcp/us-central1, "
    "gcp/us-central1/us-central1-a); `cloud plan` lists the regions with the card.",
)
_ALSO = click.option(
    "--also",
    multiple=True,
    metavar="INSTANCE_TYPE",
    help="A fallback machine type (repeatable): SkyPilot takes the cheapest free of "
    "--instance-type and these (its any_of).",
)
_IDLE = click.option(
    "--idle-minutes",
    type=int,
    default=plan.IDLE_MINUTES,
    show_default=True,
    help="Autodown: each machine deletes itself this long after its series ends, also if this "
    "computer is gone; the kit pulls its results at once, so the pull only has to fit in it.",
)
_HOURS = click.option(
    "--hours", type=float, default=None, help="How long you expect a series to take, for the total."
)


def _fleet(command: options.F) -> options.F:
    """The options that say what to rent, shared by `cloud plan` and `cloud run`."""
    for option in reversed((_MACHINES, _CARD, _INSTANCE, _SPOT, _INFRA, _HOURS, _ALSO, _IDLE)):
        command = option(command)
    return command


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
    machines: int,
    card: str,
    instance_type: str | None,
    spot: bool,
    infra: str,
    also: tuple[str, ...] = (),
    idle_minutes: int = plan.IDLE_MINUTES,
) -> list[str]:
    args = [f"--machines {machines}"]
    args += [] if card == "L4" else [f"--card {card}"]
    args += [f"--instance-type {instance_type}"] if instance_type else []
    args += [f"--also {t}" for t in also]
    args += [] if idle_minutes == plan.IDLE_MINUTES else [f"--idle-minutes {idle_minutes}"]
    args += ["--spot"] if spot else []
    args += [] if infra == "gcp" else [f"--infra {infra}"]
    return args


@cloud.command("plan")
@_fleet
@options.verbosity
def plan_cmd(
    machines: int,
    card: str,
    instance_type: str | None,
    spot: bool,
    infra: str,
    hours: float | None,
    also: tuple[str, ...],
    idle_minutes: int,
) -> None:
    """Print what would be rented, per machine and in all, with prices from SkyPilot's
    catalog ("price unknown" where it cannot be read), and the commands that follow.

    \b
    Example:
      micakit cloud plan --machines 5 --card L4 --hours 6
    """
    p = plan.make(
        plan.new_series_id(), machines, card, instance_type, spot, infra, hours, idle_minutes, also
    )
    p = dataclasses.replace(p, recoveries=plan.RECOVERIES if spot else 0)  # run's default
    args = _run_args(machines, card, instance_type, spot, infra, also, idle_minutes)
    for line in plan.lines(p, [*args, "--digests digests.json"]):
        click.echo(line)


@cloud.command("run")
@_fleet
@click.option("--digests", type=click.Path(path_type=Path), help="The release's digests.json.")
@click.option("--image", "runner", help="The runner image by digest (REPO@sha256:...).")
@click.option("--pytorch-image", "pytorch", help="PyTorch's measured image by digest.")
@click.option("--contender", type=click.Path(path_type=Path), help="The contender program.")
@click.option("--series-id", help="The fleet's id (default: the UTC time).")
@click.option("--out", type=click.Path(path_type=Path), help="Default: results/<series-id>.")
@click.option(
    "--recoveries",
    type=click.IntRange(min=0),
    default=None,
    help=f"With --spot: how often a preempted machine is launched again, its series started "
    f"anew on the new card (default {plan.RECOVERIES}; 0: a preempted machine is a failed one).",
)
@click.option("--yes", is_flag=True, help="Launch without asking.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print each machine's task (SkyPilot's YAML) and the plan; rent nothing.",
)
@click.argument("series_args", nargs=-1, type=click.UNPROCESSED)
@options.verbosity
def run_cmd(**o: Any) -> None:
    """Launch N machines, run a series on each (the runner image by digest), and follow each
    on its own: the moment its series ends its results directory is pulled, verified, and the
    machine torn down; a machine that fails is named and the others go on. Ends with a table
    (machine, card, state, series, cost), fleet.json, and exit 0 only when every machine
    delivered a verified series (6 otherwise, naming the others). Arguments after -- go to
    `micakit series`. Without --yes it prints the plan and asks.

    \b
    Examples:
      micakit cloud run --machines 1 --instance-type g2-standard-8 --digests digests.json --yes
      micakit cloud run --machines 3 --digests digests.json --dry-run
    """
    imgs = task.images(o["digests"], o["runner"], o["pytorch"])
    series_id = plan.check_series_id(o["series_id"] or plan.new_series_id())
    p = plan.make(
        series_id, o["machines"], o["card"], o["instance_type"], o["spot"], o["infra"],
        o["hours"], o["idle_minutes"], o["also"],
    )  # fmt: skip
    if o["recoveries"] is not None and not o["spot"]:
        raise UserError(
            f"--recoveries {o['recoveries']} is for spot machines, and --spot is not given",
            "add --spot, or leave --recoveries out (an on-demand machine is not preempted)",
        )
    recoveries = plan.RECOVERIES if o["recoveries"] is None else o["recoveries"]
    p = dataclasses.replace(p, recoveries=recoveries if o["spot"] else 0)
    plan.check(p)  # a card, type or infra the catalog does not list: refused before renting
    if o["dry_run"]:
        _dry_run(p, imgs, o["contender"], list(o["series_args"]))
        return
    if not o["yes"]:
        for line in plan.lines(p)[:-4]:  # the plan without its "next" commands
            click.echo(line)
        if not click.confirm("Rent these machines?", default=False):
            raise UserError("nothing was rented", "answer y, or pass --yes")
    out = o["out"] or Path("results") / series_id
    held = fleet.run(p, out, imgs, o["contender"], list(o["series_args"]), options.say, _verify)
    _table(held, p, out)
    click.echo(f"{out / fleet.FLEET}")
    _api_server_left()
    _audit()  # nothing left billing, or each one named
    _delivered(held, out)


def _dry_run(p: plan.Plan, imgs: task.Images, contender: Path | None, args: list[str]) -> None:
    """What `cloud run` would ask SkyPilot for (`sky launch --dryrun`'s task), asking nothing."""
    mounts = task.mounts(contender)
    for i, m in enumerate(p.machines, 1):
        envs = task.environment(imgs, fleet.directory_name(i), contender, args)
        config = skypilot.task_yaml(m, task.run_command(), envs, mounts, p.idle_minutes)
        click.echo(f"# {m.cluster}: SkyPilot's task YAML (sky launch -c {m.cluster} TASK.yaml)")
        click.echo(yamlish.dump(config), nl=False)
        click.echo("---")
    for line in plan.lines(p)[:-4]:
        click.echo(line)
    click.echo("dry run: nothing was rented, SkyPilot was not asked")


def _table(held: list[fleet.Held], p: plan.Plan, out: Path) -> None:
    """Each machine's end: its card, state, series pulled (verified or not) and cost."""
    table = Table(title=f"fleet {p.series_id}: {out}", box=None, pad_edge=False)
    for name in ("machine", "card", "state", "series pulled", "cost"):
        table.add_column(name, overflow="fold")
    for h, price in zip(held, p.prices):
        _, usd = fleet.cost(h, price.usd_per_hour)
        if not h.pulled:
            pulled = "no"
        else:
            pulled = "verified" if not h.differences else f"NOT verified ({len(h.differences)})"
            pulled = f"{h.directory}: {pulled}"
        money = "price unknown" if usd is None else f"${usd:.2f}" if usd >= 0.01 else f"${usd:.4f}"
        state = h.state()
        if h.preemptions:
            state += f" (preempted {len(h.preemptions)}×, launched again)"
        table.add_row(h.machine.cluster, h.machine.card, state, pulled, money)
    console = Console(file=sys.stdout, width=max(100, Console().width))  # results: stdout
    console.print(table)


def _api_server_left() -> None:
    running = skypilot.api_server_running()
    if running:
        options.say(f"SkyPilot's local API server is still running: {skypilot.API_STOP}")
    elif running is False:
        options.say("SkyPilot's local API server is not running")


def _delivered(held: list[fleet.Held], out: Path) -> None:
    failed = [h for h in held if not h.delivered]
    if not failed:
        if len(held) > 1:
            dirs = " ".join(str(out / h.directory) for h in held)
            click.echo(f"next: micakit merge {dirs} --out {out / 'release'}")
        return
    ok = [h for h in held if h.delivered]
    if not ok and all(h.error is not None and h.launched is None for h in held):
        first = failed[0].error  # none came up: the error to fix, as SkyPilot's maps it
        assert first is not None
        raise first
    if len(ok) > 1:
        dirs = " ".join(str(out / h.directory) for h in ok)
        click.echo(f"next: micakit merge {dirs} --out {out / 'release'}")
    raise FleetIncomplete(
        f"{len(failed)} of {len(held)} machines did not bring back a verified series: "
        + ", ".join(f"{h.machine.cluster} ({h.state()})" for h in failed),
        f"the table above and {out / fleet.FLEET} say why and each one's fix; the verified "
        f"series are in {out}; rent the others again with `micakit cloud run`",
    )


@cloud.command("audit")
@options.verbosity
def audit_cmd() -> None:
    """List every cluster with the kit's label (SkyPilot's status, refreshed), one without
    autodown first; exit 2 naming each one still up."""
    options.say(skypilot.API_SERVER_NOTE)
    _audit()


@cloud.command("down")
@click.argument("series_id")
@options.verbosity
def down_cmd(series_id: str) -> None:
    """Tear down every machine of SERIES-ID that is left (micakit-SERIES-ID-<i>)."""
    options.say(skypilot.API_SERVER_NOTE)
    with skypilot.quiet():
        found = [c for c in skypilot.clusters() if _of(c, series_id)]
    failed = []
    for c in found:
        try:
            with skypilot.quiet():
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


def _autodown(c: skypilot.Cluster) -> bool:
    return c.to_down and c.autostop_min is not None and c.autostop_min >= 0


def _audit() -> None:
    with skypilot.quiet():
        found = skypilot.clusters()
    found.sort(key=lambda c: (_autodown(c), c.name))  # no autodown first: it bills on
    for c in found:
        autodown = (
            f"autodown after {c.autostop_min} idle minutes" if _autodown(c) else "NO autodown"
        )
        click.echo(f"{c.name}\t{c.status}\t{c.region or 'region unknown'}\t{autodown}")
    bare = [c for c in found if not _autodown(c)]
    if bare:
        series = sorted({c.series_id or c.name for c in bare})
        raise UserError(
            f"{len(bare)} machine(s) of the kit have NO autodown and bill until torn down: "
            + ", ".join(c.name for c in bare),
            "tear them down first: " + "; ".join(f"`micakit cloud down {s}`" for s in series),
        )
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

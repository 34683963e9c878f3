"""What `micakit cloud` would rent: the machines, their names and prices, and what follows.

Prices come from SkyPilot's catalog (the same sum its `Resources.get_cost` makes: the instance
type's price plus the card's, in one region, the cheapest region listed). The catalog is a set of
CSV files SkyPilot fetches from GitHub and keeps for hours; where it cannot be read (offline, no
SkyPilot), the plan says "price unknown" and goes on.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

from kit.cloud import skypilot
from kit.cloud.rented import Machine
from kit.cloud.sky_failures import SHOW_GPUS
from kit.errors import UserError

UNKNOWN = "price unknown"
# autodown's idle limit (--idle-minutes): the kit pulls a machine's results the moment its job
# ends, so the limit only has to cover the pull (rsync of one results directory) and verify
IDLE_MINUTES = 15
# how often `cloud run --spot` launches a preempted machine again, its series started anew
RECOVERIES = 2
# the protocol's rented machine (§4, amendment 7): an L4 on Google Cloud is a g2-standard-8
DEFAULT_INSTANCE = {("gcp", "L4"): "g2-standard-8"}
_SERIES_ID = re.compile(r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")


@dataclass(frozen=True)
class Price:
    """One machine's hourly price from SkyPilot's catalog, or why there is none."""

    usd_per_hour: float | None
    region: str | None  # where the catalog lists that price
    instance_type: str | None  # the instance type priced (the catalog's choice where not given)
    why_unknown: str | None = None

    def words(self) -> str:
        if self.usd_per_hour is None:
            return UNKNOWN
        return f"${self.usd_per_hour:.2f}/hour ({self.region}, SkyPilot's catalog)"


@dataclass(frozen=True)
class Plan:
    """The machines of one fleet, priced."""

    series_id: str
    machines: tuple[Machine, ...]
    prices: tuple[Price, ...]
    idle_minutes: int
    hours: float | None  # how long the user expects a series to take (--hours)
    recoveries: int = 0  # how often a preempted spot machine is launched again (--recoveries)

    @property
    def usd_per_hour(self) -> float | None:
        known = [p.usd_per_hour for p in self.prices]
        return None if any(p is None for p in known) else sum(p or 0.0 for p in known)


def new_series_id(now_s: float | None = None) -> str:
    """A fleet's id: its UTC start, a valid cluster-name part on every cloud."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now_s is None else now_s))


def check_series_id(series_id: str) -> str:
    if not _SERIES_ID.match(series_id):
        raise UserError(
            f"{series_id!r} is not a series id SkyPilot can name a cluster with",
            "use lower-case letters, digits and hyphens, at most 32, starting and ending with "
            "a letter or digit",
        )
    return series_id


def price(m: Machine) -> Price:
    """`m`'s hourly price from SkyPilot's catalog; "price unknown" where it cannot be read."""
    try:
        # SkyPilot reports its catalog's download on stdout, which carries the plan
        with skypilot.quiet():
            return _price(m)
    except UserError as e:  # SkyPilot is not installed: the extra to install
        return Price(None, None, m.instance_type, f"{e.message}: {e.fix}")
    except Exception as e:  # the catalog is fetched from GitHub: offline it cannot be read
        why = f"SkyPilot's catalog cannot be read ({type(e).__name__}: {_short(e)})"
        return Price(None, None, m.instance_type, why)


def _price(m: Machine) -> Price:
    """The instance type's price plus the card's, in the cheapest region that lists both."""
    cloud = m.infra.split("/")[0]
    catalog = skypilot.catalog()
    instance = m.instance_type or _cheapest_instance(catalog, m, cloud)
    if instance is None:
        return Price(None, None, None, f"the catalog lists no {cloud} machine with a {m.card}")
    best: tuple[float, str] | None = None
    for region in catalog.get_region_zones_for_instance_type(instance, m.spot, clouds=cloud):
        try:
            usd = catalog.get_hourly_cost(instance, m.spot, region.name, None, clouds=cloud)
            usd += catalog.get_accelerator_hourly_cost(
                m.card, 1, m.spot, region.name, None, clouds=cloud
            )
        except ValueError:  # no price for the card in that region
            continue
        if best is None or usd < best[0]:
            best = (float(usd), str(region.name))
    if best is None:
        return Price(None, None, instance, f"the catalog lists no price for {instance}")
    return Price(best[0], best[1], instance)


def make(
    series_id: str,
    count: int,
    card: str,
    instance_type: str | None,
    spot: bool,
    infra: str = "gcp",
    hours: float | None = None,
    idle_minutes: int = IDLE_MINUTES,
    also: Sequence[str] = (),
) -> Plan:
    """The fleet's machines, micakit-<series-id>-1 to micakit-<series-id>-N, each priced from
    SkyPilot's catalog; the options' faults refused before anything is asked."""
    if idle_minutes < 1:
        raise UserError(
            f"--idle-minutes {idle_minutes}: autodown needs at least 1 idle minute",
            f"--idle-minutes {IDLE_MINUTES} (the default) covers the pull of a results directory",
        )
    if count < 1:
        raise UserError(f"--machines {count}: a fleet has at least one machine", "--machines 1")
    check_series_id(series_id)
    if instance_type is None:
        instance_type = DEFAULT_INSTANCE.get((infra.split("/")[0], card))
    if also and instance_type is None:
        raise UserError(
            f"--also {also[0]} is a fallback for --instance-type, which is not given",
            f"name the first choice: --instance-type TYPE --also {also[0]}",
        )
    ms = tuple(
        Machine(
            f"{skypilot.PREFIX}{series_id}-{i}",
            series_id,
            infra,
            card,
            instance_type,
            spot,
            also=tuple(also),
        )
        for i in range(1, count + 1)
    )
    first = price(ms[0])  # one fleet, one kind of machine: priced once
    return Plan(series_id, ms, tuple(first for _ in ms), idle_minutes, hours)


def lines(p: Plan, run_args: Sequence[str] = ()) -> list[str]:
    """The plan as the user reads it: each machine, the whole, and the commands that follow."""
    out = [f"micakit cloud: series {p.series_id}, {len(p.machines)} machine(s)"]
    for m, pr in zip(p.machines, p.prices):
        kind = "spot" if m.spot else "on-demand"
        instance = m.instance_type or pr.instance_type or "the cheapest with the card"
        out.append(f"  {m.cluster}: 1 x {m.card}, {instance}, {kind}, {m.infra}: {pr.words()}")
    total = p.usd_per_hour
    for why in dict.fromkeys(pr.why_unknown for pr in p.prices if pr.why_unknown):
        out.append(f"  {UNKNOWN}: {why}")
    if total is None:
        out.append(f"  in all: {UNKNOWN} per hour for {len(p.machines)} machine(s)")
    else:
        out.append(f"  in all: ${total:.2f}/hour for {len(p.machines)} machine(s)")
    out.append(_series_total(p, total))
    m = p.machines[0]
    if m.also:
        out.append(f"  fallback: SkyPilot takes the cheapest free of {', '.join(_types(m))}")
    out.append(
        f"  autodown: each machine deletes itself {p.idle_minutes} idle minutes after its series "
        "ends, armed by SkyPilot once it is set up (also if this computer is gone); the kit "
        "pulls the results at the series' end and tears down a launch that fails"
    )
    if p.recoveries:
        out.append(
            f"  preemption: a spot machine the cloud takes back is launched again, up to "
            f"{p.recoveries} times, its series started anew (a series resumes only on its own "
            "card); each relaunch is billed as a new machine"
        )
    out += _regions(m)
    args = " ".join(run_args)
    out += [
        "next:",
        f"  micakit cloud run {args} --yes".replace("  --yes", " --yes"),
        "  micakit cloud audit                 # every machine of the kit still up",
        f"  micakit cloud down {p.series_id}   # tear down what is left of this series",
    ]
    return out


def _series_total(p: Plan, total: float | None) -> str:
    if p.hours is None:
        return (
            "  a full series: its length on this card is not measured by the kit; "
            "--hours H gives the estimate for H hours"
        )
    if total is None:
        return f"  a full series of {p.hours:g} hours: {UNKNOWN}"
    return f"  a full series of {p.hours:g} hours: about ${total * p.hours:.2f} in all"


def _short(e: BaseException, limit: int = 100) -> str:
    text = (str(e).strip().splitlines() or [""])[0]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cheapest_instance(catalog: ModuleType, m: Machine, cloud: str) -> str | None:
    found, _ = catalog.get_instance_type_for_accelerator(m.card, 1, use_spot=m.spot, clouds=cloud)
    return found[0] if found else None


def _types(m: Machine) -> list[str]:
    return [t for t in dict.fromkeys([m.instance_type, *m.also]) if t]


def _zones(n: int) -> str:
    return "1 zone" if n == 1 else f"{n} zones"


def _regions(m: Machine) -> list[str]:
    """The regions (zones) SkyPilot's catalog lists the card in, for --infra; none offline."""
    cloud = m.infra.split("/")[0]
    try:
        with skypilot.quiet():
            found = skypilot.catalog().get_region_zones_for_accelerators(
                m.card, 1, m.spot, clouds=cloud
            )
    except Exception:  # noqa: BLE001 - offline: the plan goes on without the list
        return []
    where = sorted(f"{r.name} ({_zones(len(getattr(r, 'zones', None) or []))})" for r in found)
    if not where:
        return []
    return [
        f"  {m.card} on {cloud} per SkyPilot's catalog (--infra {cloud}/REGION[/ZONE]): "
        + ", ".join(where)
    ]


def check(p: Plan) -> None:
    """A card, machine type or infra SkyPilot's catalog does not list, refused before renting;
    where the catalog cannot be read, the API server's answer says it (sky_failures.py)."""
    m = p.machines[0]
    cloud, *where = m.infra.split("/")
    region, zone = (where + [None, None])[:2]
    try:
        catalog = skypilot.catalog()
    except UserError:  # SkyPilot not installed: `cloud run` names the extra itself
        return
    try:
        with skypilot.quiet():
            if not catalog.get_region_zones_for_accelerators(m.card, 1, m.spot, clouds=cloud):
                raise UserError(
                    f"--card {m.card}: SkyPilot's catalog lists no {cloud} machine with it",
                    f"{SHOW_GPUS} (L4, A100, H100, ...)",
                )
            for t in _types(m):
                if not catalog.instance_type_exists(t, clouds=cloud):
                    raise UserError(
                        f"--instance-type {t}: SkyPilot's catalog lists no such {cloud} type",
                        SHOW_GPUS,
                    )
            if region or zone:
                catalog.validate_region_zone(region or None, zone or None, clouds=cloud)
    except UserError:
        raise
    except ValueError as e:  # sky/catalog/common.py: "Invalid region 'x'", an unknown cloud
        raise UserError(
            f"--infra {m.infra}: {_short(e, 160)}",
            "give it as CLOUD[/REGION[/ZONE]] (gcp, gcp/us-central1, "
            "gcp/us-central1/us-central1-a); `micakit cloud plan` lists the card's regions",
        ) from None
    except Exception:  # noqa: BLE001 - the catalog cannot be read: the server will check
        return

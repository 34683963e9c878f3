"""What `micakit cloud` would rent: the machines, their names and prices, and what follows.

Prices come from SkyPilot's catalog (the same sum its `Resources.get_cost` makes: the instance
type's price plus the card's, in one region, the cheapest region listed). The catalog is a set of
CSV files SkyPilot fetches from GitHub and keeps for hours; where it cannot be read (offline, no
SkyPilot), the plan says "price unknown" and goes on.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

from kit.cloud import skypilot
from kit.cloud.skypilot import Machine
from kit.errors import UserError

UNKNOWN = "price unknown"
IDLE_MINUTES = 30  # autodown's idle limit: the series' job ends, 30 minutes on the machine goes
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


def machines(
    series_id: str,
    count: int,
    card: str,
    instance_type: str | None,
    spot: bool,
    infra: str = "gcp",
) -> tuple[Machine, ...]:
    """The fleet's clusters, micakit-<series-id>-1 to micakit-<series-id>-N."""
    if count < 1:
        raise UserError(f"--machines {count}: a fleet has at least one machine", "--machines 1")
    check_series_id(series_id)
    if instance_type is None:
        instance_type = DEFAULT_INSTANCE.get((infra.split("/")[0], card))
    return tuple(
        Machine(f"{skypilot.PREFIX}{series_id}-{i}", series_id, infra, card, instance_type, spot)
        for i in range(1, count + 1)
    )


def price(m: Machine) -> Price:
    """`m`'s hourly price from SkyPilot's catalog; "price unknown" where it cannot be read."""
    try:
        # SkyPilot reports its catalog's download on stdout, which carries the plan
        with contextlib.redirect_stdout(sys.stderr):
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
) -> Plan:
    ms = machines(series_id, count, card, instance_type, spot, infra)
    first = price(ms[0])  # one fleet, one kind of machine: priced once
    return Plan(series_id, ms, tuple(first for _ in ms), IDLE_MINUTES, hours)


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
    out.append(
        f"  autodown: each machine deletes itself after {p.idle_minutes} idle minutes, armed at "
        "launch (also if this computer is gone); the disk is billed beside it until then"
    )
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

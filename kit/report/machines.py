"""Several machines with a card of one name, in one release (`micakit merge`).

Two directories of the same card name are two machines when their cards' identities differ
(versions.json's card: NVML's UUID, with the serial, VBIOS and driver where recorded); the
release then has a row per machine, and beside each configuration the spread between the
machines' medians and the largest spread within one machine (its rounds). The same card twice is
still one series too many.

A fleet rented by `micakit cloud run` leaves `fleet.json` beside its machines' directories:
where each ran (region, zone) and what it cost; the release says so where it is found.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from kit.errors import UserError
from kit.results.documents import Versions

FLEET = "fleet.json"  # written by kit.cloud.fleet beside the machines' results directories
FLEET_SCHEMA = 1
MACHINE = "machine"  # the release column naming the card (its UUID) a row was measured on
IDENTITY = ("uuid", "serial", "vbios_version", "driver_version")
_SIDES = (("contender", "Contender"), ("pytorch", "PyTorch"))


def identity(found: Versions) -> dict[str, str]:
    """What tells the card apart from others of its name; empty where nothing was recorded."""
    return {k: str(found.card[k]) for k in IDENTITY if found.card.get(k)}


def same_card(a: Versions, b: Versions) -> bool:
    """Whether two series ran on one card: the same UUID, or no UUID to tell them apart."""
    ua, ub = a.card.get("uuid"), b.card.get("uuid")
    return not ua or not ub or ua == ub


def read_fleet(folder: Path) -> dict[str, dict[str, Any]]:
    """fleet.json of `folder`, by machine directory name; empty where there is none."""
    path = folder / FLEET
    if not path.is_file():
        return {}
    record = json.loads(path.read_text("utf-8"))
    if int(record.get("schema_version", 0)) > FLEET_SCHEMA:
        raise UserError(f"{path} was written by a newer kit", "upgrade micakit to read it")
    return {str(m["directory"]): m for m in record.get("machines", [])}


def fleet_entry(directory: Path) -> dict[str, Any]:
    """What the fleet that rented `directory`'s machine recorded of it, or nothing."""
    resolved = Path(directory).resolve()
    return read_fleet(resolved.parent).get(resolved.name, {})


def machines_table(names: Sequence[str], found: Sequence[Versions], dirs: Sequence[Path]) -> str:
    """The machines: each card's identity, where it ran and what it cost (where known)."""
    rows = []
    for name, v, d in zip(names, found, dirs):
        ident, rented = identity(v), fleet_entry(d)
        usd = rented.get("usd")
        rows.append(
            {
                "source": name,
                "card": str(v.card.get("name", "")) or "not recorded",
                "UUID": ident.get("uuid", "not recorded"),
                "serial": ident.get("serial", "not readable"),
                "VBIOS": ident.get("vbios_version", "not recorded"),
                "driver": ident.get("driver_version", "not recorded"),
                "machine type": rented.get("instance_type") or "not recorded",
                "zone": rented.get("zone") or rented.get("region") or "not recorded",
                "cost": "not recorded" if usd is None else f"${usd:.2f}",
            }
        )
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def fleet_summary(found: Sequence[Versions], dirs: Sequence[Path]) -> list[str]:
    """How many machines, and what the rented ones cost in all."""
    rented = [fleet_entry(d) for d in dirs]
    costs = [r.get("usd") for r in rented if r]
    known = [float(c) for c in costs if c is not None]
    line = f"- machines: {len({identity(v).get('uuid') or i for i, v in enumerate(found)})}"
    if costs and len(known) == len(costs):
        line += f"; rented through SkyPilot for ${sum(known):.2f} in all ({FLEET})"
    elif costs:
        line += f"; rented through SkyPilot, the cost of some not recorded ({FLEET})"
    return [line]


def spread_table(table: pd.DataFrame) -> str | None:
    """Per configuration measured on several machines: the spread between the machines'
    medians beside the largest spread within one machine (its rounds), for each side."""
    keys = ["card", "model", "precision", "contender_build"]
    rows = []
    for key, group in table.groupby(keys, sort=False):
        if group[MACHINE].nunique() < 2:
            continue
        row: dict[str, Any] = dict(zip(keys, key))
        row["machines"] = int(group[MACHINE].nunique())
        for side, label in _SIDES:
            between, within = _spreads(group, side)
            row[f"{label} between machines %"] = _pct(between)
            row[f"{label} within a machine (largest) %"] = _pct(within)
        rows.append(row)
    if not rows:
        return None
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def _spreads(group: pd.DataFrame, side: str) -> tuple[float, float]:
    """(max − min) / median of the machines' medians, and the largest (max − min) / median of
    one machine's timed runs; NaN where a side has no time."""
    medians = pd.to_numeric(group[f"{side}_median_step_s"], errors="coerce").dropna()
    if len(medians) < 2:
        between = math.nan
    else:
        between = float((medians.max() - medians.min()) / medians.median())
    within = [
        (float(r[f"{side}_max_step_s"]) - float(r[f"{side}_min_step_s"]))
        / float(r[f"{side}_median_step_s"])
        for _, r in group.iterrows()
        if _number(r[f"{side}_median_step_s"]) and _number(r[f"{side}_max_step_s"])
    ]
    return between, max(within) if within else math.nan


def _number(value: object) -> bool:
    try:
        return not math.isnan(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _pct(value: float) -> str:
    return "—" if math.isnan(value) else f"{value * 100:.2f}"


def machine_column(found: Mapping[str, Versions]) -> dict[str, str]:
    """Each source's machine as the release names it: the card's UUID, or "not recorded"."""
    return {name: str(v.card.get("uuid") or "not recorded") for name, v in found.items()}

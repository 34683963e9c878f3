"""sky.catalog: prices as SkyPilot's catalog lists them, or, with the script's "catalog":
"offline", the error the real one raises when it cannot fetch its CSV files from GitHub."""

from __future__ import annotations

from typing import Any

import requests

import sky

# a made-up catalog: the fake's prices are no cloud's
_INSTANCES = {
    "g2-standard-8": {"us-central1": 0.5, "europe-west4": 0.6},
    "g2-standard-12": {"us-central1": 0.7, "europe-west4": 0.8},
}
_CARDS = {"L4": {"us-central1": 0.25, "europe-west4": 0.3}}
_ZONES = {"us-central1": ["us-central1-a", "us-central1-b"], "europe-west4": ["europe-west4-a"]}


class _Zone:
    def __init__(self, name: str) -> None:
        self.name = name


class _Region:  # sky/clouds/cloud.py, Region: a name and its zones
    def __init__(self, name: str) -> None:
        self.name = name
        self.zones = [_Zone(z) for z in _ZONES.get(name, [])]


def _reachable() -> None:
    # sky/catalog/common.py, read_catalog: "Updating gcp catalog" under rich_utils.safe_status,
    # printed as encoded status messages with no line end (rich_utils.EncodedStatus)
    print('<sky-payload>{"msg": "Updating gcp catalog: vms.csv"}</sky-payload>', end="")
    if sky.load()["script"].get("catalog") == "offline":
        raise requests.exceptions.ConnectionError(
            "HTTPSConnectionPool(host='raw.githubusercontent.com', port=443): Max retries exceeded"
        )


def get_region_zones_for_instance_type(
    instance_type: str, use_spot: bool, clouds: Any = None
) -> list[_Region]:
    _reachable()
    return [_Region(r) for r in _INSTANCES.get(instance_type, {})]


def get_hourly_cost(
    instance_type: str, use_spot: bool, region: str | None, zone: str | None, clouds: Any = None
) -> float:
    _reachable()
    price = _INSTANCES[instance_type][region or "us-central1"]
    return price / 3 if use_spot else price


def get_accelerator_hourly_cost(
    acc_name: str,
    acc_count: int,
    use_spot: bool,
    region: str | None = None,
    zone: str | None = None,
    clouds: Any = None,
) -> float:
    _reachable()
    if acc_name not in _CARDS:
        raise ValueError(f"no price for {acc_name}")
    price = _CARDS[acc_name][region or "us-central1"] * acc_count
    return price / 3 if use_spot else price


def get_instance_type_for_accelerator(
    acc_name: str,
    acc_count: int | float,
    cpus: str | None = None,
    memory: str | None = None,
    use_spot: bool = False,
    local_disk: str | None = None,
    region: str | None = None,
    zone: str | None = None,
    max_hourly_cost: float | None = None,
    clouds: Any = None,
) -> tuple[list[str] | None, list[str]]:
    _reachable()
    return (["g2-standard-8"] if acc_name == "L4" else None), []


def instance_type_exists(instance_type: str, clouds: Any = None) -> bool:
    _reachable()
    return instance_type in _INSTANCES


def validate_region_zone(
    region_name: str | None, zone_name: str | None, clouds: Any = None
) -> tuple[str | None, str | None]:
    """sky/catalog/common.py, validate_region_zone_impl: ValueError naming what is invalid."""
    _reachable()
    if region_name is not None and region_name not in _ZONES:
        raise ValueError(f"Invalid region {region_name!r}")
    if zone_name is not None and zone_name not in _ZONES.get(
        region_name or "", sum(_ZONES.values(), [])
    ):
        raise ValueError(f"Invalid zone {zone_name!r}")
    return region_name, zone_name


def get_region_zones_for_accelerators(
    acc_name: str, acc_count: int, use_spot: bool, clouds: Any = None
) -> list[_Region]:
    _reachable()
    return [_Region(r) for r in _CARDS.get(acc_name, {})]

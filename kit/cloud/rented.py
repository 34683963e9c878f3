"""One machine `micakit cloud` rents, as the plan names it: what SkyPilot is asked for
(kit/cloud/skypilot.py) and what its errors are worded with (kit/cloud/sky_failures.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Machine:
    """One cluster to rent: one card, on SkyPilot's default VM image (Docker and the driver)."""

    cluster: str  # micakit-<series-id>-<i>
    series_id: str
    infra: str  # SkyPilot's infra: "gcp", "aws", "gcp/us-central1", ...
    card: str  # SkyPilot's accelerator name: L4, A100, H100, ...
    instance_type: str | None  # None: the cheapest SkyPilot's optimizer finds for the card
    spot: bool
    disk_size_gb: int = 100  # the OS, Docker and the three images
    also: tuple[str, ...] = ()  # fallback instance types: SkyPilot's any_of (--also)

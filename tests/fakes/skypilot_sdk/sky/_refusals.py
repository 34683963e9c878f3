"""What the fake's API server refuses, and the errors its launches end with, each as SkyPilot
0.14 raises it (the file and function named beside each)."""

from __future__ import annotations

from typing import Any

import requests

from sky import catalog, exceptions


def validate(choices: list[dict[str, Any]]) -> str | None:
    """The API server's checks of the task against the catalog, which the client's Resources
    never makes in 0.14 (sky/resources.py, _try_validate_instance_type; sky/catalog/common.py,
    validate_region_zone_impl; sky/optimizer.py: no launchable resource for the card)."""
    for r in choices:
        card = str(r["accelerators"]).split(":")[0]
        if r["instance_type"] is not None and r["instance_type"] not in catalog._INSTANCES:
            return "badtype"
        region = (str(r["infra"]).split("/") + [None])[1]
        if region is not None and region not in catalog._ZONES:
            return "badregion"
        if card not in catalog._CARDS:
            return "nomachine"
    return None


# the optimizer's and the catalog's refusals, raised before a machine is asked for
VALIDATION = ("disabled", "nomachine", "badtype", "badregion", "notsupported")


def launch_error(kind: str, args: dict[str, Any]) -> BaseException:
    r = args["resources"]
    cloud = str(r["infra"] or "gcp").split("/")[0]
    return {
        # sky/backends/cloud_vm_ray_backend.py, _insufficient_resources_msg / GCP's errors
        "quota": exceptions.ResourcesUnavailableError(
            "Failed to acquire resources in all zones: Quota 'NVIDIA_L4_GPUS' exceeded. "
            "Limit: 0.0 in region us-central1."
        ),
        "capacity": exceptions.ResourcesUnavailableError(
            "Failed to acquire resources in us-central1-a: ZONE_RESOURCE_POOL_EXHAUSTED"
        ),
        # sky/optimizer.py, _check_specified_clouds
        "disabled": exceptions.ResourcesUnavailableError(
            f"Task {args['cluster_name']!r} requires {cloud.upper()} which is not enabled. To "
            f"enable access, change the task cloud requirement or run: sky check {cloud}"
        ),
        # sky/optimizer.py, _optimize_by_dp
        "nomachine": exceptions.ResourcesUnavailableError(
            f"No launchable resource found for task {args['cluster_name']}. To fix: relax its "
            "resource requirements.\nHint: 'sky gpus list --all' to list available "
            "accelerators.\n      'sky check' to check the enabled clouds."
        ),
        # sky/resources.py, _try_validate_instance_type; sky/catalog/common.py
        "badtype": ValueError(f"Invalid instance type {r['instance_type']!r} for cloud GCP."),
        "badregion": ValueError(f"Invalid region {(str(r['infra']).split('/') + [''])[1]!r}"),
        "notsupported": exceptions.NotSupportedError(f"{cloud} does not support autodown."),
        # sky/provision/gcp/instance_utils.py: the cloud's own error, wrapped
        "cloud": exceptions.CloudError(
            "Compute Engine API has not been used in project 1234 before or it is disabled.",
            "gcp",
            "accessNotConfigured",
        ),
        "filesync": exceptions.CommandError(
            255, "rsync ~/.micakit", "Failed to sync file mounts.", "Connection reset by peer"
        ),
        "cancelled": exceptions.RequestCancelled("Request req-0 cancelled"),
        "credentials": exceptions.NoCloudAccessError("No cloud access available for launching."),
        "api": exceptions.ApiServerConnectionError("http://127.0.0.1:46580"),
        "network": requests.exceptions.ConnectionError(
            "HTTPSConnectionPool(host='raw.githubusercontent.com', port=443): Max retries exceeded"
        ),
        "prechecks": exceptions.ProvisionPrechecksError(
            [exceptions.CloudUserIdentityError("GCP credentials are not set")]
        ),
    }[kind]

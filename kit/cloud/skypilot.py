"""SkyPilot's SDK, the one module of the kit that imports `sky` (the extra `micakit[cloud]`).

Every call the kit makes to SkyPilot is here, so that tests replace the SDK with a recording
fake of the same shapes (tests/fakes/sky/) and one test holds each call against the installed
SDK's signatures. SkyPilot 0.14's SDK is asynchronous: `sky.launch`, `sky.down` and
`sky.status` return a request id, and `sky.stream_and_get` / `sky.get` wait for its answer.

Imported only by `micakit cloud ...`; `sky` itself is imported when a function here is called,
so a kit without the extra names the extra to install instead of failing at import.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kit.errors import UserError

LABEL = "micakit"  # the kit's label on every cluster it rents; its value is the series id
PREFIX = "micakit-"  # every cluster's name: micakit-<series-id>-<i>
VERSIONS = "skypilot>=0.14,<0.15"  # the SDK this module is written against (pyproject's extra)
EXTRA_FIX = "install the extra: pip install 'micakit[cloud]' (SkyPilot's SDK, skypilot[gcp])"
DOCS = "https://docs.skypilot.co/en/latest/getting-started/installation.html"
QUOTA_DOCS = "https://docs.skypilot.co/en/latest/cloud-setup/quota.html"
CHECK_FIX = f"run `sky check` and set up the credentials it names ({DOCS})"


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


@dataclass(frozen=True)
class Launched:
    """A cluster that is up, its series submitted as SkyPilot job `job_id`."""

    cluster: str
    job_id: int | None
    region: str | None
    zone: str | None


@dataclass(frozen=True)
class Cluster:
    """A line of `sky status`, refreshed from the cloud."""

    name: str
    status: str  # SkyPilot's ClusterStatus: INIT, UP, STOPPED, AUTOSTOPPING, PENDING
    series_id: str | None  # the kit's label, where the cluster has it
    region: str | None
    autostop_min: int | None  # the idle limit armed on the machine; -1 or None: none
    to_down: bool  # autodown (deleted, not stopped, at the idle limit)


def sdk() -> ModuleType:
    """SkyPilot's SDK, or what to install."""
    try:
        return importlib.import_module("sky")
    except ImportError:
        raise UserError("SkyPilot is not installed", EXTRA_FIX) from None


def resources_args(m: Machine) -> dict[str, Any]:
    """`sky.Resources`' keywords for `m`, the kit's label among them."""
    return {
        "infra": m.infra,
        "accelerators": f"{m.card}:1",
        "instance_type": m.instance_type,
        "use_spot": m.spot,
        "disk_size": m.disk_size_gb,
        "labels": {LABEL: m.series_id},
    }


def task_args(
    m: Machine, run: str, envs: Mapping[str, str], mounts: Mapping[str, str]
) -> dict[str, Any]:
    """`sky.Task`'s keywords (its resources apart): the series' script and its settings."""
    return {"name": m.cluster, "run": run, "envs": dict(envs), "file_mounts": dict(mounts)}


def launch_args(m: Machine, idle_minutes: int) -> dict[str, Any]:
    """`sky.launch`'s keywords: autodown armed at launch, deleted (not stopped) when idle."""
    return {
        "cluster_name": m.cluster,
        "idle_minutes_to_autostop": idle_minutes,
        "down": True,
        "retry_until_up": False,
    }


def submit(
    m: Machine, run: str, envs: Mapping[str, str], mounts: Mapping[str, str], idle_minutes: int
) -> Any:
    """Ask SkyPilot to launch `m` and run `run` on it; the request id (nothing is waited for).

    Autodown is armed here, at launch (`down=True` with the idle limit): the machine deletes
    itself after `idle_minutes` without a job, also when the kit that launched it is gone."""
    sky = sdk()
    try:
        # the real Resources checks the machine against SkyPilot's catalog (fetched from GitHub)
        wanted = sky.Resources(**resources_args(m))
    except ValueError as e:
        raise UserError(
            f"SkyPilot knows no such machine: {_first_line(e)}",
            "`sky show-gpus` lists the cards and `micakit cloud plan` what they cost; check "
            "--card, --instance-type and --infra",
        ) from None
    except OSError as e:
        raise UserError(
            f"SkyPilot's catalog cannot be read: {_first_line(e)[:160]}",
            "SkyPilot fetches it from raw.githubusercontent.com: connect to the network, then "
            "run the same command again",
        ) from None
    task = sky.Task(**task_args(m, run, envs, mounts), resources=wanted)
    with mapped(m):
        return sky.launch(task, **launch_args(m, idle_minutes))


def wait_launched(m: Machine, request: Any) -> Launched:
    """Wait for the launch `request` of `m`: the cluster is up and its job submitted."""
    sky = sdk()
    with mapped(m):
        job_id, handle = sky.stream_and_get(request)
    where = getattr(handle, "launched_resources", None)
    return Launched(
        m.cluster,
        None if job_id is None else int(job_id),
        _text(getattr(where, "region", None)),
        _text(getattr(where, "zone", None)),
    )


def wait_job(launched: Launched) -> bool:
    """Follow the series' output until its job ends; whether it succeeded."""
    sky = sdk()
    # the series' own output, on stderr: stdout carries the kit's results
    sky.tail_logs(launched.cluster, launched.job_id, follow=True, output_stream=sys.stderr)
    statuses = sky.get(sky.job_status(launched.cluster, [launched.job_id]))
    status = statuses.get(launched.job_id)
    return getattr(status, "name", str(status)) == "SUCCEEDED"


def cancel(requests: list[Any]) -> None:
    """Cancel launch requests not yet answered (a stop while the fleet was launching)."""
    if requests:
        sky = sdk()
        sky.get(sky.api_cancel(requests, silent=True))


def down(cluster: str) -> None:
    """Tear `cluster` down (deleted, not stopped: nothing is left billing), and its ssh entry."""
    sky = sdk()
    sky.get(sky.down(cluster))
    _ssh_config().remove_cluster(cluster)


def write_ssh_entry(cluster: str) -> bool:
    """Write the ssh entry `ssh CLUSTER` for a cluster that is up; whether it was written.

    SkyPilot's CLI writes it after `sky launch` and `sky status`; its SDK leaves that to the
    caller ("we should move this function into SDK", SkyPilot 0.14's cli/command.py), so the kit
    does what the CLI does for a VM: the cluster's record with its credentials, then SkyPilot's
    own SSHConfigHelper (an entry under ~/.sky/generated/ssh, included from ~/.ssh/config)."""
    sky = sdk()
    records = sky.get(sky.status([cluster], all_users=True, _include_credentials=True))
    written = False
    for r in records:
        handle, credentials = _field(r, "handle"), _field(r, "credentials")
        if handle is None or not credentials or not handle.cached_external_ips:
            continue
        _ssh_config().add_cluster(
            handle.cluster_name,
            handle.cluster_name_on_cloud,
            handle.cached_external_ips,
            credentials,
            handle.cached_external_ssh_ports,
            handle.docker_user,
            handle.ssh_user,
        )
        written = True
    return written


def _ssh_config() -> Any:
    return importlib.import_module("sky.utils.cluster_utils").SSHConfigHelper


def clusters() -> list[Cluster]:
    """Every cluster of the kit (its label, or its name), SkyPilot's status refreshed."""
    sky = sdk()
    with mapped(None):
        found = sky.get(sky.status(refresh=sky.StatusRefreshMode.FORCE))
    out = []
    for r in found:
        labels = _field(r, "labels") or {}
        name = str(_field(r, "name"))
        if LABEL not in labels and not name.startswith(PREFIX):
            continue
        status = _field(r, "status")
        autostop = _field(r, "autostop")
        out.append(
            Cluster(
                name=name,
                status=str(getattr(status, "name", status)),
                series_id=labels.get(LABEL),
                region=_text(_field(r, "region")),
                autostop_min=None if autostop is None else int(autostop),
                to_down=bool(_field(r, "to_down")),
            )
        )
    return sorted(out, key=lambda c: c.name)


def catalog() -> ModuleType:
    """SkyPilot's catalog of instance types and their prices."""
    sdk()  # the extra's own message where SkyPilot is missing
    return importlib.import_module("sky.catalog")


@contextmanager
def mapped(m: Machine | None) -> Iterator[None]:
    """SkyPilot's launch failures as what the user must fix (exit 2), never a traceback."""
    errors = sdk().exceptions
    try:
        yield
    except errors.ResourcesUnavailableError as e:
        raise UserError(
            f"no machine could be launched: {_first_line(e)}", _capacity_fix(m, e)
        ) from None
    except (errors.NoCloudAccessError, errors.CloudUserIdentityError) as e:
        raise UserError(
            f"no cloud credentials SkyPilot can use: {_first_line(e)}", CHECK_FIX
        ) from None
    except errors.ApiServerConnectionError as e:
        raise UserError(
            f"SkyPilot's API server does not answer: {_first_line(e)}",
            f"start it with `sky api start`, then {CHECK_FIX}",
        ) from None
    except OSError as e:  # requests' errors too: the catalog, the cloud's API
        raise UserError(
            f"SkyPilot could not reach the network: {_first_line(e)[:160]}",
            "SkyPilot fetches its catalog from raw.githubusercontent.com and asks the cloud's "
            "API: connect to the network, then run the same command again",
        ) from None
    except errors.ProvisionPrechecksError as e:
        reasons = "; ".join(_first_line(r) for r in getattr(e, "reasons", []) or [e])
        raise UserError(f"SkyPilot refused to launch: {reasons}", CHECK_FIX) from None


def _capacity_fix(m: Machine | None, e: BaseException) -> str:
    card = m.card if m else "the card"
    if "quota" in str(e).lower():
        return (
            f"ask the cloud for quota for {card} GPUs in the region (Google Cloud: IAM & Admin "
            f"→ Quotas, NVIDIA_{card.upper()}_GPUS per region; "
            f"{'PREEMPTIBLE_NVIDIA_' + card.upper() + '_GPUS for --spot; ' if m and m.spot else ''}"
            f"see {QUOTA_DOCS}), then run the same command again"
        )
    return (
        "no zone had the machine free: run the same command again later, name another region "
        "with --infra (e.g. gcp/us-east4), or try without --spot or with it"
    )


def _first_line(e: object) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _field(record: Any, name: str) -> Any:
    """A field of a status record: SkyPilot 0.14 answers with objects, older ones with dicts."""
    if isinstance(record, Mapping):
        return record.get(name)
    return getattr(record, name, None)


def _text(value: object) -> str | None:
    return None if value is None else str(value)

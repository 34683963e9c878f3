"""What each SkyPilot error means to the user, and what to do: one `error:` and one `fix:`.

The table is looked up by the names of the error's classes, most specific first (SkyPilot's
`ClusterDoesNotExist` is a `ValueError`), so that this module needs no `sky` and the CLI gets
the same answer whichever of SkyPilot's requests raised it: the SDK re-raises on the client
the exception the API server raised (sky/exceptions.py, deserialize_exception).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kit.cloud.rented import Machine
from kit.errors import UserError

DOCS = "https://docs.skypilot.co/en/latest/getting-started/installation.html"
QUOTA_DOCS = "https://docs.skypilot.co/en/latest/cloud-setup/quota.html"
CHECK_FIX = f"run `sky check` and set up the credentials it names ({DOCS})"
SHOW_GPUS = "`sky show-gpus CARD --infra CLOUD` lists where a card is offered and its types"


@dataclass(frozen=True)
class Context:
    """Who asked: the machine (None for the whole fleet's requests)."""

    m: Machine | None

    @property
    def cluster(self) -> str:
        return self.m.cluster if self.m else "the machine"

    @property
    def cloud(self) -> str:
        return self.m.infra.split("/")[0] if self.m else "gcp"

    @property
    def card(self) -> str:
        return self.m.card if self.m else "the card"


def _unavailable(e: BaseException, c: Context) -> tuple[str, str]:
    """SkyPilot raises ResourcesUnavailableError for three causes the user fixes apart."""
    text = str(e)
    low = text.lower()
    if "no launchable resource" in low:  # sky/optimizer.py, _optimize_by_dp: no such machine
        return (
            f"SkyPilot knows no machine with a {c.card} on {c.cloud}: {first_line(e)}",
            f"check --card, --instance-type and --infra; {SHOW_GPUS}",
        )
    if "not enabled" in low:  # sky/optimizer.py, _check_specified_clouds: "... sky check gcp"
        return (
            f"SkyPilot cannot rent on {c.cloud}: {first_line(e)}",
            f"run `sky check {c.cloud}` and set up what it names ({DOCS}), or name a cloud "
            "it lists as enabled with --infra",
        )
    if "quota" in low:  # backends/cloud_vm_ray_backend.py, GCP's QUOTA_EXCEEDED
        spot = c.m is not None and c.m.spot
        return (
            f"no quota for the machine: {first_line(e)}",
            f"ask the cloud for quota for {c.card} GPUs in the region (Google Cloud: IAM & "
            f"Admin → Quotas, NVIDIA_{c.card.upper()}_GPUS per region"
            f"{'; PREEMPTIBLE_NVIDIA_' + c.card.upper() + '_GPUS for --spot' if spot else ''}; "
            f"{QUOTA_DOCS}), then run the same command again",
        )
    return (  # ZONE_RESOURCE_POOL_EXHAUSTED and the like: no capacity where asked
        f"no machine could be launched, no capacity: {first_line(e)}",
        "name another zone or region with --infra (e.g. gcp/us-east4 or gcp/us-east4/us-east4-a), "
        "add a fallback machine type with --also, or run the same command again later",
    )


Rule = Callable[[BaseException, Context], tuple[str, str]]

# (class name, rule), most specific first; each names SkyPilot's error (sky/exceptions.py)
RULES: tuple[tuple[str, Rule], ...] = (
    ("ResourcesUnavailableError", _unavailable),
    (
        "NoCloudAccessError",
        lambda e, c: (f"no cloud credentials SkyPilot can use: {first_line(e)}", CHECK_FIX),
    ),
    (
        "CloudUserIdentityError",
        lambda e, c: (f"no cloud credentials SkyPilot can use: {first_line(e)}", CHECK_FIX),
    ),
    (
        "ApiServerConnectionError",
        lambda e, c: (
            f"SkyPilot's API server does not answer: {first_line(e)}",
            f"start it with `sky api start`, then {CHECK_FIX}",
        ),
    ),
    (
        "ProvisionPrechecksError",
        lambda e, c: (
            "SkyPilot refused to launch: "
            + "; ".join(first_line(r) for r in getattr(e, "reasons", None) or [e]),
            CHECK_FIX,
        ),
    ),
    (
        "CloudError",
        lambda e, c: (
            f"the cloud refused: {first_line(e)}",
            f"the cloud's words above name what to change (project, permission, API); run "
            f"`sky check {c.cloud}`, then the same command again",
        ),
    ),
    (
        "ClusterDoesNotExist",
        lambda e, c: (
            f"{c.cluster} no longer exists (preempted, or deleted by autodown or by hand): "
            f"{first_line(e)}",
            "what it had not handed back is gone; rent it again (`micakit cloud run`), "
            "without --spot where a preempted machine is what ended it",
        ),
    ),
    (
        "ClusterNotUpError",
        lambda e, c: (
            f"{c.cluster} is not up (preempted or stopped): {first_line(e)}",
            "tear it down with `micakit cloud down SERIES-ID` and rent it again; "
            "`micakit cloud audit` shows what is left",
        ),
    ),
    (
        "CommandError",
        lambda e, c: (
            f"a command on {c.cluster} failed (status {getattr(e, 'returncode', '?')}): "
            f"{getattr(e, 'error_msg', None) or first_line(e)}",
            "the machine may have vanished mid-job (preemption): `micakit cloud audit` shows "
            "whether it is up; rent it again",
        ),
    ),
    (
        "RequestCancelled",
        lambda e, c: (
            f"SkyPilot's request was cancelled: {first_line(e)}",
            "someone ran `sky api cancel` or the API server restarted: run the same command "
            "again (`micakit cloud audit` first shows what is left)",
        ),
    ),
    (
        "NotSupportedError",
        lambda e, c: (
            f"SkyPilot does not support this on {c.cloud}: {first_line(e)}",
            "the kit needs a VM with Docker: name a VM cloud with --infra (gcp, aws, azure)",
        ),
    ),
    (
        "ValueError",  # the API server's validation of the task (card, type, infra)
        lambda e, c: (
            f"SkyPilot refused the machine: {first_line(e)}",
            f"check --card, --instance-type and --infra (cloud/region/zone); {SHOW_GPUS}",
        ),
    ),
    (
        "OSError",  # requests' errors too: the catalog, the cloud's API
        lambda e, c: (
            f"SkyPilot could not reach the network: {first_line(e)[:160]}",
            "SkyPilot fetches its catalog from raw.githubusercontent.com and asks the cloud's "
            "API: connect to the network, then run the same command again",
        ),
    ),
)


def explain(e: BaseException, m: Machine | None) -> UserError | None:
    """`e` as what the user must fix, or None where it is no SkyPilot error the kit knows."""
    names = [k.__name__ for k in type(e).__mro__]
    for name, rule in RULES:
        if name in names:
            message, fix = rule(e, Context(m))
            return UserError(message, fix)
    return None


def first_line(e: object) -> str:
    """The first line of SkyPilot's words, without its own "To fix:" (the kit's fix replaces
    it: one fix line)."""
    text = str(e).strip()
    line = text.splitlines()[0] if text else type(e).__name__
    return line.split(" To fix:")[0].strip()

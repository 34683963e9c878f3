"""SkyPilot's SDK, the one module of the kit that imports `sky` (the extra `micakit[cloud]`).

Every call the kit makes to SkyPilot is here, so that tests replace the SDK with a recording
fake of the same shapes (tests/fakes/sky/) and one test holds each call against the installed
SDK's signatures. SkyPilot 0.14's SDK is asynchronous: `sky.launch`, `sky.down` and
`sky.status` return a request id, and `sky.stream_and_get` / `sky.get` wait for its answer.

Imported only by `micakit cloud ...`; `sky` itself is imported when a function here is called,
so a kit without the extra names the extra to install instead of failing at import. What each
SkyPilot error means to the user is kit/cloud/sky_failures.py's table.

SkyPilot's own output never reaches stdout, which carries the kit's results: a launch's and a
job's log go to a file the caller names (`output_stream`), anything else SkyPilot prints goes
to stderr through `quiet()`, without its encoded `<sky-payload>` status lines.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import IO, Any

from kit.cloud import sky_failures
from kit.cloud.rented import Machine
from kit.errors import UserError

LABEL = "micakit"  # the kit's label on every cluster it rents; its value is the series id
PREFIX = "micakit-"  # every cluster's name: micakit-<series-id>-<i>
VERSIONS = "skypilot>=0.14,<0.15"  # the SDK this module is written against (pyproject's extra)
EXTRA_FIX = "install the extra: pip install 'micakit[cloud]' (SkyPilot's SDK, skypilot[gcp])"
# sky/server/common.py, _start_api_server: the first SDK call starts a local API server
API_SERVER_NOTE = (
    "SkyPilot's first call may start its local API server: about 1.5 minutes on two cores "
    "(SkyPilot's own words follow on stderr)"
)
API_STOP = "stop it with `sky api stop` (SkyPilot starts it again when next needed)"


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


def resources_args(m: Machine, instance_type: str | None = None) -> dict[str, object]:
    """`sky.Resources`' keywords for `m` (or its fallback `instance_type`), the kit's label."""
    return {
        "infra": m.infra,
        "accelerators": f"{m.card}:1",
        "instance_type": instance_type or m.instance_type,
        "use_spot": m.spot,
        "disk_size": m.disk_size_gb,
        "labels": {LABEL: m.series_id},
    }


def resources_choices(m: Machine) -> list[dict[str, object]]:
    """Each machine `m` may be: its instance type, then each --also (SkyPilot's any_of: the
    optimizer takes the cheapest that is free; sky/task.py, Task.set_resources with a set)."""
    return [resources_args(m, t) for t in dict.fromkeys([m.instance_type, *m.also])]


def task_yaml(
    m: Machine, run: str, envs: Mapping[str, str], mounts: Mapping[str, str], idle_minutes: int
) -> dict[str, Any]:
    """The task as SkyPilot's YAML has it (sky/utils/schemas.py, get_task_schema; held against
    it by tests/unit/cloud/test_sdk_signatures.py), with autodown as `sky launch -i N --down`."""
    choices = [{k: v for k, v in r.items() if v is not None} for r in resources_choices(m)]
    autostop = {"idle_minutes": idle_minutes, "down": True}
    resources: dict[str, object] = {**choices[0], "autostop": autostop}
    if len(choices) > 1:
        common = {k: v for k, v in choices[0].items() if k != "instance_type"}
        resources = {**common, "autostop": autostop}
        resources["any_of"] = [{"instance_type": c["instance_type"]} for c in choices]
    return {
        "name": m.cluster,
        "resources": resources,
        "envs": dict(envs),
        "file_mounts": dict(mounts),
        "run": run,
    }


def task_args(
    m: Machine, run: str, envs: Mapping[str, str], mounts: Mapping[str, str]
) -> dict[str, Any]:
    """`sky.Task`'s keywords (its resources apart): the series' script and its settings."""
    return {"name": m.cluster, "run": run, "envs": dict(envs), "file_mounts": dict(mounts)}


def launch_args(m: Machine, idle_minutes: int) -> dict[str, object]:
    """`sky.launch`'s keywords: autodown asked for with the launch (`sky launch -i N --down`),
    deleted (not stopped) when idle; SkyPilot arms it after provisioning and setup."""
    return {
        "cluster_name": m.cluster,
        "idle_minutes_to_autostop": idle_minutes,
        "down": True,
        "retry_until_up": False,
    }


# what sky.launch answers: a request id (SkyPilot 0.14, sky/server/common.py: RequestId, a str)
RequestId = str


def submit(
    m: Machine, run: str, envs: Mapping[str, str], mounts: Mapping[str, str], idle_minutes: int
) -> RequestId:
    """Ask SkyPilot to launch `m` and run `run` on it; the request id (nothing is waited for).

    Autodown goes with the launch (`down=True` with the idle limit); SkyPilot arms it once the
    machine is provisioned and set up (sky/execution.py), after which the machine deletes
    itself `idle_minutes` after its job, also when the kit that launched it is gone. Before
    that, a failed launch is the kit's to tear down (kit/cloud/fleet.py, follow)."""
    sky = sdk()
    # SkyPilot 0.14's Resources checks nothing (sky/resources.py): the API server validates
    # the task when the launch runs, and its errors come from stream_and_get (wait_launched)
    choices = [sky.Resources(**r) for r in resources_choices(m)]
    wanted = choices[0] if len(choices) == 1 else set(choices)
    task = sky.Task(**task_args(m, run, envs, mounts), resources=wanted)
    with mapped(m):
        return sky.launch(task, **launch_args(m, idle_minutes))


def wait_launched(m: Machine, request: RequestId, log: IO[str]) -> Launched:
    """Wait for the launch `request` of `m`: the cluster is up and its job submitted (not
    ended: sky/execution.py, _execute with detach_run). Its provisioning log goes to `log`."""
    sky = sdk()
    with mapped(m):
        job_id, handle = sky.stream_and_get(request, output_stream=log)
    where = getattr(handle, "launched_resources", None)
    return Launched(
        m.cluster,
        None if job_id is None else int(job_id),
        _text(getattr(where, "region", None)),
        _text(getattr(where, "zone", None)),
    )


def follow_job(m: Machine, launched: Launched, log: IO[str]) -> str:
    """Follow the series' output into `log` until its job ends; the job's status (SUCCEEDED,
    FAILED, ...). A machine that vanishes meanwhile raises the mapped UserError."""
    sky = sdk()
    with mapped(m):
        sky.tail_logs(launched.cluster, launched.job_id, follow=True, output_stream=log)
        statuses = sky.get(sky.job_status(launched.cluster, [launched.job_id]))
    status = statuses.get(launched.job_id)
    return str(getattr(status, "name", status))


def cancel(requests: list[RequestId]) -> None:
    """Cancel launch requests not yet answered (a stop while the fleet was launching)."""
    if requests:
        sky = sdk()
        sky.get(sky.api_cancel(requests, silent=True))


def down(cluster: str) -> bool:
    """Tear `cluster` down (deleted, not stopped: nothing is left billing), and its ssh entry;
    False where SkyPilot has no such cluster (never made, preempted, or autodowned)."""
    sky = sdk()
    try:
        sky.get(sky.down(cluster))
    except sky.exceptions.ClusterDoesNotExist:  # sky/core.py, down
        return False
    finally:
        _ssh_config().remove_cluster(cluster)
    return True


def api_server_running() -> bool | None:
    """Whether SkyPilot's local API server runs (None: not known, or not a local one)."""
    try:
        common = importlib.import_module("sky.server.common")
        if not common.is_api_server_local():
            return None
        return str(common.get_api_server_status().status.name) == "HEALTHY"
    except Exception:  # noqa: BLE001 - a question asked at the end: no answer is an answer
        return None


class _Quiet(io.TextIOBase):
    """stdout while SkyPilot speaks: its words to stderr, without its encoded status messages,
    which it prints with no line end between them and its text (sky/utils/rich_utils.py,
    EncodedStatus; sky/utils/message_utils.py, encode_payload)."""

    def __init__(self, to: IO[str]) -> None:
        self.to, self.pending = to, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self._say(line)
        return len(text)

    def _say(self, line: str) -> None:
        line = _PAYLOAD.sub("", line)
        if line.strip():
            self.to.write(line + "\n")

    def flush(self) -> None:
        self.to.flush()

    def end(self) -> None:
        self._say(self.pending)
        self.pending = ""


_PAYLOAD = re.compile(r"<sky-payload[^>]*>.*?</sky-payload>")


@contextmanager
def quiet() -> Iterator[None]:
    """SkyPilot's prints away from stdout (the kit's results) for the time of the block."""
    to = _Quiet(sys.stderr)
    try:
        with contextlib.redirect_stdout(to):
            yield
    finally:
        to.end()


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
    """SkyPilot's errors as what the user must fix (exit 2), never a traceback: the table in
    kit/cloud/sky_failures.py."""
    try:
        yield
    except Exception as e:
        found = sky_failures.explain(e, m)
        if found is None:
            raise
        raise found from None


def _field(record: Any, name: str) -> Any:
    """A field of a status record: SkyPilot 0.14 answers with objects, older ones with dicts."""
    if isinstance(record, Mapping):
        return record.get(name)
    return getattr(record, name, None)


def _text(value: object) -> str | None:
    return None if value is None else str(value)

"""A recording fake of SkyPilot 0.14's SDK (`sky`), with the real SDK's signatures (held against
the installed SDK by tests/unit/cloud/test_sdk_signatures.py) and behaviour: requests that
return at once, machines that live on a clock of their own (sky/_world.py), errors raised by
the API server when a request's answer is asked for.

Put tests/fakes/skypilot_sdk first on sys.path (or PYTHONPATH, for a kit in a child process).
Its state is a JSON file named by FAKE_SKY_STATE, so a kit killed mid-run leaves it behind:

    {"clock_min": 0, "clusters": {NAME: {...}}, "calls": [[FN, {ARGS}], ...], "requests": {...},
     "script": {...}}

`script` says how the clouds behave, for the fleet or, under "machines": {NAME: {...}}, for one
machine: "minute_s" (the clock), "provision_minutes", "job_minutes", "job": "SUCCEEDED" or
"FAILED", "preempt_at" (minutes after it is up; a list: one a launch), "launch_error" (quota, capacity, disabled,
nomachine, badtype, badregion, cloud, notsupported, credentials, api, network, prechecks,
cancelled, filesync), "enabled_clouds", "down_fails" (clusters whose teardown fails),
"api_start_s" (how long the first call takes to start the local API server), "in_stream_and_get":
"interrupt", "in_tail_logs": "interrupt" or "hang", "catalog": "offline", "home" (a folder: each
cluster's home is home/NAME) and "results" (a results directory each machine's series "writes"
under micakit/results/$MICAKIT_NAME), or "ssh": the machine is this machine over ssh on
127.0.0.1, where the launch runs the task for real (sky/_loopback.py).
"""

from __future__ import annotations

import enum
import shutil
import sys
import time
from pathlib import Path
from typing import Any

# sky.catalog and sky.exceptions, as the SDK has them
from sky import _loopback, _records, _refusals, _world, catalog, exceptions  # noqa: F401

__version__ = "0.14.1-fake"


class StatusRefreshMode(enum.Enum):
    NONE = "NONE"
    AUTO = "AUTO"
    FORCE = "FORCE"


class ClusterStatus(enum.Enum):
    INIT = "INIT"
    UP = "UP"
    STOPPED = "STOPPED"
    AUTOSTOPPING = "AUTOSTOPPING"
    PENDING = "PENDING"


class JobStatus(enum.Enum):  # sky/skylet/job_lib.py, JobStatus (those the fake reaches)
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class Resources:
    def __init__(
        self,
        cloud: Any = None,
        instance_type: str | None = None,
        cpus: Any = None,
        memory: Any = None,
        accelerators: Any = None,
        accelerator_args: Any = None,
        infra: str | None = None,
        use_spot: bool | None = None,
        job_recovery: Any = None,
        region: str | None = None,
        zone: str | None = None,
        image_id: Any = None,
        disk_size: Any = None,
        disk_tier: Any = None,
        network_tier: Any = None,
        local_disk: Any = None,
        max_hourly_cost: Any = None,
        ports: Any = None,
        labels: dict[str, str] | None = None,
        autostop: Any = None,
        **rest: Any,
    ) -> None:
        # sky/resources.py, Resources.__init__: 0.14 checks nothing against the catalog here;
        # the API server validates the task when the launch request runs (stream_and_get)
        self.kwargs = {
            "instance_type": instance_type,
            "accelerators": accelerators,
            "infra": infra,
            "use_spot": use_spot,
            "disk_size": disk_size,
            "labels": dict(labels or {}),
            "autostop": autostop,
        }


class Task:
    def __init__(
        self,
        name: str | None = None,
        *,
        setup: Any = None,
        run: Any = None,
        envs: dict[str, str] | None = None,
        secrets: Any = None,
        workdir: Any = None,
        num_nodes: int | None = None,
        file_mounts: dict[str, str] | None = None,
        storage_mounts: Any = None,
        volumes: Any = None,
        resources: Any = None,
        docker_image: Any = None,
        **rest: Any,
    ) -> None:
        self.name, self.run, self.setup = name, run, setup
        self.envs = dict(envs or {})
        self.file_mounts = dict(file_mounts or {})
        # sky/task.py, Task.set_resources: a set is `any_of`, a list `ordered`
        self.resources = resources


# -- the SDK ---------------------------------------------------------------------------------


def _record(fn: str, **args: Any) -> dict[str, Any]:
    with _world.locked() as state:
        state["calls"].append([fn, args])
        return state


def load() -> dict[str, Any]:
    with _world.locked(write=False) as state:
        return state


def advance_clock(minutes: float) -> list[str]:
    """The fake's clock moves on; each cluster preempted or idle past its limit goes."""
    with _world.locked() as state:
        before = set(state["clusters"])
        state["clock_min"] += minutes
        _world.tick(state)
        return _world.deleted_since(state, before)


def _server() -> None:
    """sky/server/common.py, check_server_healthy_or_start: every SDK call first makes sure a
    local API server runs, and starts one where none does (_start_api_server, about 1.5
    minutes on two cores), saying so under a rich status on the console (stdout), which
    reaches a pipe as encoded payloads (sky/utils/message_utils.py, encode_payload)."""
    with _world.locked() as state:
        if state.get("api_server"):
            return
        state["api_server"] = True
        state["calls"].append(["api_start", {}])
        wait_s = float(state["script"].get("api_start_s", 0.0))
    sys.stdout.write(  # sky/utils/rich_utils.py, EncodedStatus: print(..., end="")
        '<sky-payload>{"type": "rich_status", "msg": "Starting SkyPilot API server"}'
        "</sky-payload>"
        "Failed to connect to SkyPilot API server at http://127.0.0.1:46580. Starting a local "
        "server.\n"
    )
    time.sleep(wait_s)


def _request(fn: str, **args: Any) -> str:
    """sky/client/sdk.py: every call is a request queued on the API server; its id at once."""
    _server()
    with _world.locked() as state:
        state["calls"].append([fn, args])
        request = f"req-{len(state['requests'])}"
        state["requests"][request] = [fn, args]
        return request


def _resources(task: Any) -> list[dict[str, Any]]:
    found = task.resources
    if isinstance(found, (set, list, tuple)):
        return sorted((r.kwargs for r in found), key=lambda k: str(k["instance_type"]))
    return [found.kwargs]


def launch(
    task: Any,
    cluster_name: str | None = None,
    retry_until_up: bool = False,
    idle_minutes_to_autostop: int | None = None,
    wait_for: Any = None,
    dryrun: bool = False,
    down: bool = False,
    backend: Any = None,
    optimize_target: Any = None,
    no_setup: bool = False,
    clone_disk_from: str | None = None,
    fast: bool = False,
    **rest: Any,
) -> str:
    """sky/client/sdk.py, launch: the request id, returned when the request is queued; the
    cluster's record exists from then on (INIT), autodown not yet armed."""
    resources = _resources(task)
    args = {
        "cluster_name": cluster_name,
        "idle_minutes_to_autostop": idle_minutes_to_autostop,
        "down": down,
        "retry_until_up": retry_until_up,
        "run": task.run,
        "envs": task.envs,
        "file_mounts": task.file_mounts,
        "resources": resources[0],
        "any_of": resources,
    }
    request = _request("launch", **args)
    with _world.locked() as state:
        t = _world.now(state)
        state["clusters"][cluster_name] = {
            "status": "INIT",
            "labels": resources[0]["labels"],
            "autostop": -1,  # sky/execution.py: armed after provisioning and setup
            "wants_autostop": -1 if idle_minutes_to_autostop is None else idle_minutes_to_autostop,
            "to_down": False,
            "wants_down": bool(down),
            "submitted_min": t,
            "up_min": None,
            "job_minutes": _world.machine(state, cluster_name, "job_minutes", 3),
            "job_result": _world.machine(state, cluster_name, "job", "SUCCEEDED"),
            "preempt_at": _preempt_at(state, cluster_name),
            "region": "us-central1",
            "zone": "us-central1-a",
        }
    return request


def _preempt_at(state: dict[str, Any], name: str) -> float | None:
    """When the cloud takes this launch of `name` back: the script's "preempt_at", or, a list,
    one entry a launch of the name: a spot VM's termination action is DELETE
    (sky/templates/gcp-ray.yml.j2, `instanceTerminationAction: DELETE` with `provisioningModel:
    SPOT`), so the name launched again is a new VM (sky/provision/gcp/instance.py,
    run_instances), preempted or not on its own."""
    at = _world.machine(state, name, "preempt_at", None)
    if not isinstance(at, list):
        return at
    launches = sum(1 for fn, a in state["calls"] if fn == "launch" and a["cluster_name"] == name)
    return at[launches - 1] if launches - 1 < len(at) else None


def _launched(args: dict[str, Any], out: Any) -> tuple[int, Any]:
    """The launch request run on the API server (sky/execution.py, _execute): the task checked,
    the machine provisioned, files synced, autodown armed, the job submitted; the answer
    (job id, handle) as soon as the job is submitted, not when it ends."""
    name = args["cluster_name"]
    with _world.locked() as state:
        script = state["script"]
        error = _world.machine(state, name, "launch_error", None)
        enabled = script.get("enabled_clouds", ["gcp"])
        provision = float(_world.machine(state, name, "provision_minutes", 1))
        ready_at = state["clusters"][name]["submitted_min"] + provision
    cloud = str(args["resources"]["infra"] or "gcp").split("/")[0]
    if error is None and cloud not in enabled:
        error = "disabled"
    error = error or _refusals.validate(args["any_of"])
    if error in _refusals.VALIDATION:  # the optimizer: before anything is provisioned
        with _world.locked() as state:
            state["clusters"].pop(name, None)
        raise _refusals.launch_error(error, args)
    print(f"Launching a new cluster {name!r}.", file=out or sys.stdout)
    _world.wait_until(ready_at)
    if error:  # provisioning or file sync failed: the cluster stays, without autodown
        raise _refusals.launch_error(error, args)
    with _world.locked() as state:
        c = state["clusters"][name]
        c.update(status="UP", up_min=_world.now(state))
        c.update(autostop=c["wants_autostop"], to_down=c["wants_down"])
        script = state["script"]
    _write_results(script, name, args["envs"], _world.machine(state, name, "results", None))
    if script.get("ssh"):  # the job runs for real, over ssh, before the answer
        with _world.locked() as state:
            state["clusters"][name]["job_minutes"] = float("inf")  # it ends when it ends
        ok = _loopback.run_job(script["ssh"], name, args)
        with _world.locked() as state:
            c = state["clusters"][name]
            c.update(
                job="SUCCEEDED" if ok else "FAILED", job_minutes=_world.now(state) - c["up_min"]
            )
    print(f"Job submitted, ID: 1. Cluster {name!r} is up.", file=out or sys.stdout)
    return 1, _records.Handle(
        _records.Where("us-central1", "us-central1-a"), name, script.get("ssh")
    )


def _write_results(
    script: dict[str, Any], name: str, envs: dict[str, str], results: str | None
) -> None:
    if not script.get("home") or not results:
        return
    dest = Path(script["home"]) / name / "micakit" / "results" / envs["MICAKIT_NAME"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(results, dest)


def api_cancel(request_ids: Any = None, all_users: bool = False, silent: bool = False) -> str:
    return _request("api_cancel", request_ids=request_ids)


def stream_and_get(
    request_id: Any = None,
    log_path: str | None = None,
    tail: int | None = None,
    follow: bool = True,
    output_stream: Any = None,
    relay_rich_status: bool = False,
) -> Any:
    """sky/client/sdk.py, stream_and_get: the request's log to `output_stream` (the console
    when None), then its answer, or the exception the server raised."""
    if load()["script"].get("in_stream_and_get") == "interrupt":
        raise KeyboardInterrupt  # Ctrl-C while the first machine launches
    return _answer(request_id, output_stream)


def get(request_id: Any) -> Any:
    """sky/client/sdk.py, get: the answer, without the log."""
    return _answer(request_id, None)


def _answer(request_id: Any, out: Any) -> Any:
    state = load()
    fn, args = state["requests"][request_id]
    if fn == "launch":
        return _launched(args, out)
    if fn == "down":
        return _down(args["cluster_name"])
    if fn == "status":
        return _records.status(load(), args["names"], args["credentials"])
    if fn == "api_cancel":
        return list(args["request_ids"])
    if fn == "job_status":
        return _job_status(args["cluster_name"], args["job_ids"])
    raise AssertionError(fn)


def _cluster_up(name: str) -> dict[str, Any]:
    """sky/backends/backend_utils.py, check_cluster_available: what the job requests raise
    for a cluster that is gone (preempted, autodowned) or not up."""
    c = load()["clusters"].get(name)
    if c is None:
        raise exceptions.ClusterDoesNotExist(f"Cluster {name!r} does not exist.")
    if c["status"] != "UP":
        raise exceptions.ClusterNotUpError(
            f"{name!r} is not up (status {c['status']})", cluster_status=c["status"]
        )
    return c


def _job_status(name: str, job_ids: list[int]) -> dict[int, Any]:
    c = _cluster_up(name)
    return {j: JobStatus[c.get("job") or "RUNNING"] for j in job_ids}


def down(
    cluster_name: str,
    purge: bool = False,
    graceful: bool = False,
    graceful_timeout: int | None = None,
) -> str:
    return _request("down", cluster_name=cluster_name)


def _down(name: str) -> None:
    """sky/core.py, down: ClusterDoesNotExist for a cluster with no record, RuntimeError where
    the cloud refused."""
    with _world.locked() as state:
        if name in state["script"].get("down_fails", []):
            raise RuntimeError(f"Failed to terminate {name}: the cloud's API refused")
        if name not in state["clusters"]:
            raise exceptions.ClusterDoesNotExist(f"Cluster {name!r} does not exist.")
        del state["clusters"][name]
        home = state["script"].get("home")
    if home:
        shutil.rmtree(Path(home) / name, ignore_errors=True)


def status(
    cluster_names: list[str] | None = None,
    refresh: StatusRefreshMode = StatusRefreshMode.NONE,
    all_users: bool = False,
    *,
    _include_credentials: bool = False,
    _summary_response: bool = False,
) -> str:
    return _request(
        "status", refresh=refresh.name, names=cluster_names, credentials=_include_credentials
    )


def tail_logs(
    cluster_name: str,
    job_id: int | None,
    follow: bool,
    tail: int = 0,
    output_stream: Any = None,
    *,
    preload_content: bool = True,
) -> int:
    """sky/client/sdk.py, tail_logs: the job's output until it ends (follow); its exit code
    (0 succeeded, 100 failed; sky/exceptions.py, JobExitCode). A cluster that vanishes
    meanwhile ends the stream with ClusterDoesNotExist (the server's check per request)."""
    _server()
    state = _record("tail_logs", cluster_name=cluster_name, job_id=job_id)
    action = state["script"].get("in_tail_logs")
    if action == "interrupt":
        raise KeyboardInterrupt
    if action == "hang":
        Path(state["script"]["hang_flag"]).write_text("waiting")
        time.sleep(600)
    ssh = state["script"].get("ssh")
    if ssh and output_stream is not None:  # the job's output, as the machine printed it
        output_stream.write(_loopback.log_path(ssh, cluster_name).read_text(errors="replace"))
    while True:
        c = _cluster_up(cluster_name)
        if c.get("job"):
            return 0 if c["job"] == "SUCCEEDED" else 100
        time.sleep(0.05)


def job_status(cluster_name: str, job_ids: list[int] | None = None) -> str:
    return _request("job_status", cluster_name=cluster_name, job_ids=job_ids)

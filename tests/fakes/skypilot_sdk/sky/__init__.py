"""A recording fake of SkyPilot 0.14's SDK (`sky`), with the real SDK's signatures (held against
the installed SDK by tests/unit/cloud/test_sdk_signatures.py) and a clock of its own.

Put tests/fakes/skypilot_sdk first on sys.path (or PYTHONPATH, for a kit in a child process).
Its state is a JSON file named by FAKE_SKY_STATE, so a kit killed mid-run leaves it behind:

    {"clock_min": 0, "clusters": {NAME: {...}}, "calls": [[FN, {ARGS}], ...], "requests": {...},
     "script": {...}}

`script` says how the clouds behave: "launch_error" (quota, capacity, credentials, api, network,
prechecks), "down_fails" (clusters whose teardown fails), "job": "SUCCEEDED" or "FAILED",
"job_minutes", "in_stream_and_get": "interrupt" (a Ctrl-C while the machines launch),
"in_tail_logs": "interrupt" (a Ctrl-C while the series runs) or "hang" (the kit waits until it
is killed), "catalog": "offline", "home" (a folder: each cluster's home is home/NAME) and
"results" (a results directory each launched machine's series "writes" under
micakit/results/$MICAKIT_NAME), or "ssh": the machine is this machine over ssh on 127.0.0.1,
where the launch runs the task for real (sky/_loopback.py).

A cluster launched with `down=True` and an idle limit deletes itself on the fake's clock
(`advance_clock`): idle from the end of its job, as SkyPilot's skylet does on the machine.
"""

from __future__ import annotations

import enum
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import requests

# sky.catalog and sky.exceptions, as the SDK has them
from sky import _loopback, catalog, exceptions  # noqa: F401

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


class JobStatus(enum.Enum):
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
        # the real class reads the catalog here; tests never build resources against it
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
        self.resources = resources


# -- state -----------------------------------------------------------------------------------


def _path() -> Path:
    return Path(os.environ["FAKE_SKY_STATE"])


def load() -> dict[str, Any]:
    path = _path()
    state = json.loads(path.read_text()) if path.is_file() else {}
    for key, empty in (("clock_min", 0), ("clusters", {}), ("calls", []), ("requests", {})):
        state.setdefault(key, empty)
    state.setdefault("script", {})
    return state


def save(state: dict[str, Any]) -> None:
    tmp = _path().with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(_path())


def _record(fn: str, **args: Any) -> dict[str, Any]:
    state = load()
    state["calls"].append([fn, args])
    save(state)
    return state


def advance_clock(minutes: float) -> list[str]:
    """The fake's clock moves on; each autodown cluster idle past its limit deletes itself."""
    state = load()
    state["clock_min"] += minutes
    gone = []
    for name, c in list(state["clusters"].items()):
        idle_from = c["launched_min"] + c["job_minutes"]
        if c["to_down"] and c["autostop"] >= 0 and state["clock_min"] >= idle_from + c["autostop"]:
            del state["clusters"][name]
            state["calls"].append(["autodown", {"cluster_name": name}])
            gone.append(name)
    save(state)
    return gone


# -- the SDK ---------------------------------------------------------------------------------


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
    args = {
        "cluster_name": cluster_name,
        "idle_minutes_to_autostop": idle_minutes_to_autostop,
        "down": down,
        "retry_until_up": retry_until_up,
        "run": task.run,
        "envs": task.envs,
        "file_mounts": task.file_mounts,
        "resources": task.resources.kwargs,
    }
    state = _record("launch", **args)
    request = f"req-{len(state['requests'])}"
    state["requests"][request] = ["launch", args]
    save(state)
    return request


def _launched(args: dict[str, Any]) -> tuple[int, Any]:
    state = load()
    script = state["script"]
    name = args["cluster_name"]
    # the cluster exists from the moment it is asked for: a failed launch may leave one
    state["clusters"][name] = {
        "status": "INIT",
        "labels": args["resources"]["labels"],
        "autostop": -1
        if args["idle_minutes_to_autostop"] is None
        else args["idle_minutes_to_autostop"],
        "to_down": bool(args["down"]),
        "launched_min": state["clock_min"],
        "job_minutes": script.get("job_minutes", 60),
        "region": "us-central1",
        "zone": "us-central1-a",
    }
    save(state)
    error = script.get("launch_error")
    if error:
        raise _launch_error(error)
    state["clusters"][name]["status"] = "UP"
    save(state)
    _write_results(script, name, args["envs"])
    if script.get("ssh"):
        ok = _loopback.run_job(script["ssh"], name, args)
        state = load()
        state["clusters"][name]["job"] = "SUCCEEDED" if ok else "FAILED"
        save(state)
    handle = _Handle(_Where("us-central1", "us-central1-a"), name, script.get("ssh"))
    return 1, handle


def _launch_error(kind: str) -> Exception:
    return {
        "quota": exceptions.ResourcesUnavailableError(
            "Failed to acquire resources in all zones: Quota 'NVIDIA_L4_GPUS' exceeded. Limit: 0.0 in region us-central1."
        ),
        "capacity": exceptions.ResourcesUnavailableError(
            "Failed to acquire resources in us-central1-a: ZONE_RESOURCE_POOL_EXHAUSTED"
        ),
        "credentials": exceptions.NoCloudAccessError("No cloud access available for launching."),
        "api": exceptions.ApiServerConnectionError("http://127.0.0.1:46580"),
        "network": requests.exceptions.ConnectionError(
            "HTTPSConnectionPool(host='raw.githubusercontent.com', port=443): Max retries exceeded"
        ),
        "prechecks": exceptions.ProvisionPrechecksError(
            [exceptions.CloudUserIdentityError("GCP credentials are not set")]
        ),
    }[kind]


def _write_results(script: dict[str, Any], name: str, envs: dict[str, str]) -> None:
    if not script.get("home") or not script.get("results"):
        return
    dest = Path(script["home"]) / name / "micakit" / "results" / envs["MICAKIT_NAME"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(script["results"], dest)


class _Where:
    def __init__(self, region: str, zone: str) -> None:
        self.region, self.zone = region, zone


class _Handle:
    def __init__(self, where: _Where, name: str = "", ssh: dict[str, Any] | None = None) -> None:
        self.launched_resources = where
        self.cluster_name = name
        self.cluster_name_on_cloud = f"{name}-2ea4"
        self.cached_external_ips = ["127.0.0.1"]
        self.cached_external_ssh_ports = [ssh["port"] if ssh else 22]
        self.docker_user = None
        self.ssh_user = "root" if ssh else "gcpuser"


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
    if load()["script"].get("in_stream_and_get") == "interrupt":
        raise KeyboardInterrupt  # Ctrl-C while the first machine launches
    return get(request_id)


def get(request_id: Any) -> Any:
    state = load()
    fn, args = state["requests"][request_id]
    if fn == "launch":
        return _launched(args)
    if fn == "down":
        return _down(args["cluster_name"])
    if fn == "status":
        return _status(args["names"], args["credentials"])
    if fn == "api_cancel":
        return list(args["request_ids"])
    if fn == "job_status":
        cluster = state["clusters"].get(args["cluster_name"], {})
        job = cluster.get("job") or state["script"].get("job", "SUCCEEDED")
        return {j: JobStatus[job] for j in args["job_ids"]}
    raise AssertionError(fn)


def _request(fn: str, **args: Any) -> str:
    state = _record(fn, **args)
    request = f"req-{len(state['requests'])}"
    state["requests"][request] = [fn, args]
    save(state)
    return request


def down(
    cluster_name: str,
    purge: bool = False,
    graceful: bool = False,
    graceful_timeout: int | None = None,
) -> str:
    return _request("down", cluster_name=cluster_name)


def _down(name: str) -> None:
    state = load()
    if name in state["script"].get("down_fails", []):
        raise RuntimeError(f"Failed to terminate {name}: the cloud's API refused")
    if name not in state["clusters"]:
        raise ValueError(f"Cluster {name!r} does not exist.")
    del state["clusters"][name]
    save(state)


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


class StatusResponse:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _status(names: list[str] | None, credentials: bool) -> list[StatusResponse]:
    found = []
    state = load()
    ssh = state["script"].get("ssh")
    key = ssh["key"] if ssh else "~/.sky/key"
    for name, c in state["clusters"].items():
        if names is not None and name not in names:
            continue
        up = c["status"] == "UP"
        found.append(
            StatusResponse(
                name=name,
                status=ClusterStatus[c["status"]],
                labels=c["labels"],
                autostop=c["autostop"],
                to_down=c["to_down"],
                region=c["region"],
                handle=_Handle(_Where(c["region"], c["zone"]), name, ssh) if up else None,
                credentials={"ssh_user": "gcpuser", "ssh_private_key": key}
                if credentials and up
                else None,
            )
        )
    return found


def tail_logs(
    cluster_name: str,
    job_id: int | None,
    follow: bool,
    tail: int = 0,
    output_stream: Any = None,
    *,
    preload_content: bool = True,
) -> int:
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
    if ssh:
        return 0 if state["clusters"][cluster_name].get("job") == "SUCCEEDED" else 100
    return 0 if state["script"].get("job", "SUCCEEDED") == "SUCCEEDED" else 100


def job_status(cluster_name: str, job_ids: list[int] | None = None) -> str:
    return _request("job_status", cluster_name=cluster_name, job_ids=job_ids)

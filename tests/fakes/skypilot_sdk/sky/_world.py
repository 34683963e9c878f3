"""The fake's clouds: its state file (locked: the kit follows its machines from threads) and
its clock, on which each machine provisions, runs its job, is preempted or deletes itself.

The clock is compressed: one minute of the fake is `script["minute_s"]` seconds of real time
(default 0.5: a 3-minute series in 1.5 s, an idle limit of 15 minutes in 7.5 s, long beside the
kit's own steps on a busy machine), plus whatever `advance_clock` adds. A very large `minute_s`
stops it: only `advance_clock` moves it then.

A machine's life, in the fake's minutes (each step copies SkyPilot 0.14):
- submitted: `sky.launch` returns the request id at once (sky/client/sdk.py, launch: the
  request is queued on the API server); the cluster is INIT, autodown NOT armed yet;
- up at submitted + provision_minutes; autodown armed then, after provisioning, file mounts
  and setup (sky/execution.py, _execute: set_autostop in Stage.PRE_EXEC; a failure before
  leaves the cluster up "for debugging" without it);
- its job runs job_minutes, then SUCCEEDED or FAILED (sky/skylet/job_lib.py, JobStatus);
- preempted at up + preempt_at: the cloud deletes the VM with its disk; SkyPilot's record
  goes with it on the next refresh (sky/backends/backend_utils.py, refresh_cluster_record);
- deleted by autodown idle_minutes after its job ended (sky/skylet/autostop_lib.py: idle
  from the last job's end; down=True tears the cluster down, disk and files with it).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MINUTE_S = 0.5


def path() -> Path:
    return Path(os.environ["FAKE_SKY_STATE"])


def _read() -> dict[str, Any]:
    p = path()
    state = json.loads(p.read_text()) if p.is_file() and p.stat().st_size else {}
    for key, empty in (("clock_min", 0), ("clusters", {}), ("calls", []), ("requests", {})):
        state.setdefault(key, empty)
    state.setdefault("script", {})
    state.setdefault("t0", time.time())
    return state


def _write(state: dict[str, Any]) -> None:
    tmp = path().with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(path())


@contextmanager
def locked(write: bool = True) -> Iterator[dict[str, Any]]:
    """The state, read, brought to the clock's now, and written back (a reader's only where
    the clock changed it); one holder at a time (each open is its own lock: threads of one
    process exclude each other too)."""
    with open(path().with_suffix(".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            state = _read()
            changed = tick(state) or not path().is_file()
            yield state
            if write or changed:
                _write(state)
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def now(state: dict[str, Any]) -> float:
    minute_s = float(state["script"].get("minute_s", MINUTE_S))
    return state["clock_min"] + (time.time() - state["t0"]) / minute_s


def machine(state: dict[str, Any], name: str, key: str, default: Any) -> Any:
    """The script's setting for one machine ("machines": {NAME: {...}}), else the fleet's."""
    own = state["script"].get("machines", {}).get(name, {})
    return own.get(key, state["script"].get(key, default))


def tick(state: dict[str, Any]) -> list[str]:
    """Preemptions, jobs' ends and autodowns due by now; the clusters that changed."""
    t = now(state)
    changed = []
    for name, c in list(state["clusters"].items()):
        up_at = c.get("up_min")
        if up_at is None:
            continue
        if c.get("preempt_at") is not None and t >= up_at + c["preempt_at"]:
            _delete(state, name, "preempted")
            changed.append(name)
            continue
        ended = up_at + c["job_minutes"]
        if c["status"] == "UP" and t >= ended and not c.get("job"):
            c["job"] = c["job_result"]
            changed.append(name)
        if c["to_down"] and c["autostop"] >= 0 and t >= ended + c["autostop"]:
            _delete(state, name, "autodown")
            changed.append(name)
    return changed


def deleted_since(state: dict[str, Any], before: set[str]) -> list[str]:
    return sorted(before - set(state["clusters"]))


def _delete(state: dict[str, Any], name: str, why: str) -> None:
    """The VM deleted with its disk: the cluster's record and the machine's files go."""
    del state["clusters"][name]
    state["calls"].append([why, {"cluster_name": name, "at_min": round(now(state), 2)}])
    home = state["script"].get("home")
    if home:
        shutil.rmtree(Path(home) / name, ignore_errors=True)


def wait_until(minute: float, poll_s: float = 0.01) -> None:
    """Sleep in real time until the fake's clock reaches `minute`."""
    while True:
        with locked() as state:
            if now(state) >= minute:
                return
        time.sleep(poll_s)

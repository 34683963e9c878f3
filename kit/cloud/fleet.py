"""`micakit cloud run`: N machines launched, one series on each, the results pulled back and
verified, and every machine torn down in a `finally` (success, failure, Ctrl-C).

Autodown is armed at launch (kit.cloud.skypilot.submit): where this process cannot tear a
machine down (kill -9, a closed laptop), the machine deletes itself after its idle limit.

The fleet's folder holds one results directory per machine (machine-1, ...) and `fleet.json`:
which machine ran which directory, where (region and zone), for how long and at what price.
`micakit merge` reads it to say where each machine was and what it cost.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kit.cloud import skypilot, task
from kit.cloud.plan import Plan
from kit.cloud.skypilot import Launched, Machine
from kit.errors import UserError
from kit.report.machines import FLEET, FLEET_SCHEMA

RSH_ENV = "MICAKIT_CLOUD_SSH"  # the ssh rsync uses (default ssh: the entry SkyPilot writes)


@dataclass
class Held:
    """One machine as the fleet used it (filled in as it goes)."""

    machine: Machine
    directory: str  # the results directory's name in the fleet's folder
    launched: Launched | None = None
    up_s: float | None = None
    down_s: float | None = None
    succeeded: bool = False
    pulled: bool = False
    differences: list[str] = field(default_factory=list)


def directory_name(i: int) -> str:
    return f"machine-{i}"


def run(
    p: Plan,
    out: Path,
    imgs: task.Images,
    contender: Path | None,
    series_args: Sequence[str],
    say: Callable[[str], None],
    verify: Callable[[Path], list[str]],
) -> list[Held]:
    """Launch, wait, pull, verify; tear every machine down whatever happens."""
    if out.exists() and any(out.iterdir()):
        raise UserError(f"{out} already exists and is not empty", "name a new folder with --out")
    skypilot.sdk()  # SkyPilot installed, before anything is asked of it
    if shutil.which("rsync") is None:  # SkyPilot itself needs it too
        raise UserError(
            "rsync is not installed; it brings each machine's results back",
            "install it (Debian and Ubuntu: apt-get install rsync; macOS has it)",
        )
    mounts = task.mounts(contender)
    held = [Held(m, directory_name(i)) for i, m in enumerate(p.machines, 1)]
    out.mkdir(parents=True, exist_ok=True)
    requests: list = []  # launch requests not yet answered
    try:
        for h in held:
            envs = task.environment(imgs, h.directory, contender, series_args)
            say(f"launching {h.machine.cluster} (autodown after {p.idle_minutes} idle minutes)")
            requests.append(
                skypilot.submit(h.machine, task.run_command(), envs, mounts, p.idle_minutes)
            )
        for h, request in zip(held, list(requests)):
            h.launched = skypilot.wait_launched(h.machine, request)
            requests.remove(request)
            h.up_s = time.time()
            where = h.launched.zone or h.launched.region or "zone unknown"
            say(f"{h.machine.cluster} is up ({where})")
        for h in held:
            assert h.launched is not None
            h.succeeded = skypilot.wait_job(h.launched)
            if not skypilot.write_ssh_entry(h.machine.cluster):
                say(f"SkyPilot gave no ssh credentials for {h.machine.cluster}")
            # the results come back also when the series failed: every finished run is in them
            h.pulled = pull(h.machine.cluster, h.directory, out, say)
            if h.pulled:
                h.differences = verify(out / h.directory)
    finally:
        cancel(requests, say)
        teardown(held, say)
        if any(h.launched for h in held):
            write_record(p, held, out)
        elif not any(out.iterdir()):
            out.rmdir()  # nothing was launched: nothing is left behind
    return held


def pull(cluster: str, name: str, out: Path, say: Callable[[str], None]) -> bool:
    """rsync the machine's results directory `name` into `out/name`, over the ssh entry
    SkyPilot writes for the cluster (its name is the host)."""
    rsh = os.environ.get(RSH_ENV, "ssh")
    source = f"{cluster}:{task.REMOTE_RESULTS}/{name}/"
    say(f"pulling {source} into {out / name}")
    done = subprocess.run(
        ["rsync", "-a", "--partial", "-e", rsh, source, f"{out / name}/"],
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0:
        say(f"rsync from {cluster} failed with status {done.returncode}")
    return done.returncode == 0


def cancel(requests: list, say: Callable[[str], None]) -> None:
    """Cancel the launches still under way, so that none comes up after the teardown."""
    try:
        skypilot.cancel(requests)
    except Exception as e:  # noqa: BLE001 - the teardown and the audit come next
        say(f"could not cancel {len(requests)} launch(es) under way: {e}")


def teardown(held: Sequence[Held], say: Callable[[str], None]) -> None:
    """Tear down every machine asked for, launched or not (a launch cut short may have left
    one); a second Ctrl-C does not cut this short."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for h in held:
            try:
                skypilot.down(h.machine.cluster)
                say(f"tore down {h.machine.cluster}")
            except Exception as e:  # noqa: BLE001 - the audit below names what is left
                if "does not exist" in str(e):  # a launch that failed before making it
                    say(f"{h.machine.cluster}: nothing to tear down, SkyPilot never made it")
                else:
                    say(f"could not tear down {h.machine.cluster}: {e}")
            h.down_s = time.time()
    finally:
        signal.signal(signal.SIGINT, previous)


def write_record(p: Plan, held: Sequence[Held], out: Path) -> None:
    """fleet.json: how many machines, which, where and what they cost."""
    machines = []
    for h, price in zip(held, p.prices):
        seconds = None if h.up_s is None or h.down_s is None else h.down_s - h.up_s
        cost = (
            None
            if seconds is None or price.usd_per_hour is None
            else round(price.usd_per_hour * seconds / 3600, 4)
        )
        machines.append(
            {
                "directory": h.directory,
                "cluster": h.machine.cluster,
                "infra": h.machine.infra,
                "card": h.machine.card,
                "instance_type": h.machine.instance_type or price.instance_type,
                "spot": h.machine.spot,
                "region": h.launched.region if h.launched else None,
                "zone": h.launched.zone if h.launched else None,
                "usd_per_hour": price.usd_per_hour,
                "price_source": "SkyPilot's catalog" if price.usd_per_hour else price.why_unknown,
                "held_s": None if seconds is None else round(seconds, 1),
                "usd": cost,
                "series_succeeded": h.succeeded,
                "pulled": h.pulled,
                "differences": len(h.differences),
            }
        )
    record = {"schema_version": FLEET_SCHEMA, "series_id": p.series_id, "machines": machines}
    (out / FLEET).write_text(json.dumps(record, indent=2) + "\n", "utf-8")

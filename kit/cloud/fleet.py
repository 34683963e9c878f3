"""`micakit cloud run`: N machines launched, each followed on its own, its results pulled and
verified the moment its job ends, then torn down; one machine's failure costs that machine only.

SkyPilot's launch returns when the job is submitted, so the machines run side by side and end
in any order: one thread per machine waits for its launch, follows its job, pulls (rsync, then
`verify`) and tears it down. Autodown is armed by SkyPilot after provisioning and setup
(sky/execution.py), so its idle limit only has to cover the pull, which starts at the job's end.
Where the launch fails (no capacity, a file sync cut), SkyPilot leaves the cluster up without
autodown "for debugging": the machine's thread tears it down at once. Ctrl-C, or anything the
threads did not end, tears down every machine that is left, in a `finally`.

The fleet's folder holds one results directory per machine (machine-1, ...), SkyPilot's log of
each machine (logs/machine-1.log: provisioning and the series' output) and `fleet.json`: which
machine ran which directory, where, for how long, at what cost, and for a machine that failed,
what SkyPilot said and the fix. `micakit merge` reads it.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from kit.cloud import sky_failures, skypilot, task
from kit.cloud.plan import Plan
from kit.cloud.rented import Machine
from kit.cloud.skypilot import Launched
from kit.errors import UserError
from kit.report.machines import FLEET, FLEET_SCHEMA

RSH_ENV = "MICAKIT_CLOUD_SSH"  # the ssh rsync uses (default ssh: the entry SkyPilot writes)
LOGS = "logs"  # SkyPilot's log of each machine, in the fleet's folder
Say = Callable[[str], None]
Verify = Callable[[Path], list[str]]


@dataclass
class Held:
    """One machine as the fleet used it (filled in by its thread as it goes)."""

    machine: Machine
    directory: str  # the results directory's name in the fleet's folder
    launched: Launched | None = None
    submitted_s: float | None = None
    down_s: float | None = None
    job: str | None = None  # SkyPilot's job status at its end: SUCCEEDED, FAILED, ...
    pulled: bool = False
    differences: list[str] = field(default_factory=list)
    error: UserError | None = None  # what went wrong, as the user reads it
    skypilot_said: str | None = None  # SkyPilot's own words (the exception, its first line)
    interrupted: bool = False
    # a spot machine preempted mid-series is launched again (`relaunch`) up to `recoveries`
    # times; SkyPilot's words for each preemption, in order
    relaunch: Callable[[], skypilot.RequestId] | None = field(default=None, repr=False)
    recoveries: int = 0
    preemptions: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def succeeded(self) -> bool:
        return self.job == "SUCCEEDED"

    @property
    def delivered(self) -> bool:
        return self.succeeded and self.pulled and not self.differences and self.error is None

    def state(self) -> str:
        if self.delivered:
            return "delivered"
        if self.error is not None:
            return f"failed: {self.error.message}"
        if self.job and not self.succeeded:
            return f"series {self.job.lower()}"
        if self.differences:
            return f"{len(self.differences)} difference(s) in verify"
        return "not pulled" if self.launched else "not launched"


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
    """Launch every machine, follow each on its own; tear down whatever is left at the end."""
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
    (out / LOGS).mkdir()
    say(skypilot.API_SERVER_NOTE)
    say(f"SkyPilot's log of each machine: {out / LOGS}/machine-N.log")
    requests: dict[str, skypilot.RequestId] = {}  # launch requests, by cluster
    try:
        with skypilot.quiet():
            for h in held:
                envs = task.environment(imgs, h.directory, contender, series_args)
                say(f"launching {h.machine.cluster} (autodown after {p.idle_minutes} idle minutes)")
                h.relaunch = functools.partial(
                    skypilot.submit, h.machine, task.run_command(), envs, mounts, p.idle_minutes
                )
                h.recoveries = p.recoveries if h.machine.spot else 0
                requests[h.machine.cluster] = h.relaunch()
                h.submitted_s = time.time()
            follow_all(held, requests, out, say, verify)
    finally:
        with skypilot.quiet():
            waiting = [requests[h.machine.cluster] for h in held if _unanswered(h, requests)]
            cancel(waiting, say)
            teardown(held, say)
        if any(h.submitted_s for h in held):
            write_record(p, held, out)
        else:
            shutil.rmtree(out)  # nothing was launched: nothing is left behind
    return held


def _unanswered(h: Held, requests: dict[str, skypilot.RequestId]) -> bool:
    return h.machine.cluster in requests and h.launched is None and h.error is None


def follow_all(
    held: Sequence[Held],
    requests: dict[str, skypilot.RequestId],
    out: Path,
    say: Callable[[str], None],
    verify: Callable[[Path], list[str]],
) -> None:
    """One thread per machine; Ctrl-C here (the main thread) ends the wait for all."""
    said: queue.Queue[str] = queue.Queue()  # the threads' lines, said from this thread
    threads = [
        threading.Thread(
            target=follow,
            args=(h, requests[h.machine.cluster], out, said.put, verify),
            daemon=True,
        )
        for h in held
        if h.machine.cluster in requests
    ]
    for t in threads:
        t.start()
    try:
        alive = threads
        while alive:
            _relay(said, say)
            alive[0].join(0.1)  # short waits: a Ctrl-C reaches this thread between them
            alive = [t for t in alive if t.is_alive()]
    finally:
        _relay(said, say)
    if any(h.interrupted for h in held):
        raise KeyboardInterrupt


def _relay(said: queue.Queue[str], say: Say) -> None:
    while not said.empty():
        say(said.get_nowait())


def follow(h: Held, request: skypilot.RequestId, out: Path, say: Say, verify: Verify) -> None:
    """One machine from its launch to its teardown; what goes wrong is recorded on `h`."""
    m = h.machine
    with (out / LOGS / f"{h.directory}.log").open("a", encoding="utf-8") as log:
        try:
            try:
                h.launched = skypilot.wait_launched(m, request, log)
            except Exception as e:
                _failed(h, e)
                say(f"{m.cluster}: {h.error.message if h.error else ''}")
                down_one(h, say)  # up "for debugging" without autodown: not on the kit's bill
                return
            while True:
                where = h.launched.zone or h.launched.region or "zone unknown"
                say(f"{m.cluster} is up ({where}); following its series")
                try:
                    h.job = skypilot.follow_job(m, h.launched, log)
                except Exception as e:
                    _failed(h, e)
                    say(f"{m.cluster}: {h.error.message if h.error else ''}")
                if not _preempted(h) or len(h.preemptions) >= h.recoveries:
                    break
                h.launched = _launched_again(h, say, log)
                if h.launched is None:
                    return
            _pull(h, out, say, verify, log)
        except KeyboardInterrupt:
            h.interrupted = True
        except Exception as e:  # noqa: BLE001 - recorded: the other machines go on
            _failed(h, e)
            say(f"{m.cluster}: {h.error.message if h.error else ''}")
        if not h.interrupted:
            down_one(h, say)


# what SkyPilot raises when a machine vanished under its job (kit/cloud/sky_failures.py)
_VANISHED = ("ClusterDoesNotExist", "ClusterNotUpError", "CommandError")


def _preempted(h: Held) -> bool:
    """Whether a spot machine vanished under its series: the cloud took it back."""
    said = (h.skypilot_said or "").split(":")[0]
    return h.machine.spot and h.error is not None and said in _VANISHED


def _launched_again(h: Held, say: Say, log: IO[str]) -> Launched | None:
    """A preempted spot machine launched again under its name, its series started anew: a
    series resumes only on the card it began on (versions.json's card; `series --resume`
    refuses another), and what the preempted machine measured went with its disk (SkyPilot
    makes a GCP spot VM with `instanceTerminationAction: DELETE`, sky/templates/
    gcp-ray.yml.j2). None where the launch failed (recorded on `h`, the machine torn down)."""
    assert h.relaunch is not None and h.skypilot_said is not None
    h.preemptions.append(h.skypilot_said)
    h.error = h.skypilot_said = None
    m = h.machine
    say(
        f"{m.cluster}: preempted; launching it again ({len(h.preemptions)} of {h.recoveries} "
        "relaunches), its series starts anew (a series resumes only on its own card)"
    )
    try:
        skypilot.down(m.cluster)  # SkyPilot's record of the preempted machine, where it stays
    except Exception:  # noqa: BLE001 - the launch below says what is wrong
        pass
    try:
        return skypilot.wait_launched(m, h.relaunch(), log)
    except Exception as e:
        _failed(h, e)
        say(f"{m.cluster}: {h.error.message if h.error else ''}")
        down_one(h, say)
        return None


def _pull(h: Held, out: Path, say: Say, verify: Verify, log: IO[str]) -> None:
    """Its results, at once (autodown's clock runs from the job's end): also when the series
    failed (every finished run is in them), and a machine that vanished is tried too."""
    try:
        if not skypilot.write_ssh_entry(h.machine.cluster):
            say(f"{h.machine.cluster}: SkyPilot gives no ssh entry (gone); nothing to pull")
            return
    except Exception as e:  # noqa: BLE001 - the machine's state says the rest
        say(f"{h.machine.cluster}: no ssh entry ({type(e).__name__}); nothing to pull")
        return
    h.pulled = pull(h.machine.cluster, h.directory, out, say, log)
    down_one(h, say)  # verify reads the copy here: the machine bills no longer meanwhile
    if h.pulled:
        h.differences = verify(out / h.directory)
        state = "verified" if not h.differences else f"{len(h.differences)} difference(s)"
        say(f"{h.machine.cluster}: pulled into {out / h.directory}, {state}")


def _failed(h: Held, e: BaseException) -> None:
    if isinstance(e, KeyboardInterrupt):
        raise e
    said = e.__context__ if isinstance(e, UserError) and e.__context__ is not None else e
    h.skypilot_said = f"{type(said).__name__}: {sky_failures.first_line(said)}"
    if isinstance(e, UserError):
        h.error = e
    else:  # an error no row of kit/cloud/sky_failures.py names: its words, and where to read more
        h.error = UserError(
            f"SkyPilot failed: {h.skypilot_said}",
            f"SkyPilot's log of the machine is in logs/{h.directory}.log; "
            "`micakit cloud audit` shows what is left",
        )


def pull(
    cluster: str, name: str, out: Path, say: Callable[[str], None], log: IO[str] | None = None
) -> bool:
    """rsync the machine's results directory `name` into `out/name`, over the ssh entry
    SkyPilot writes for the cluster (its name is the host)."""
    rsh = os.environ.get(RSH_ENV, "ssh")
    source = f"{cluster}:{task.REMOTE_RESULTS}/{name}/"
    say(f"pulling {source} into {out / name}")
    done = subprocess.run(
        ["rsync", "-a", "--partial", "-e", rsh, source, f"{out / name}/"],
        stdin=subprocess.DEVNULL,
        stdout=log or subprocess.DEVNULL,
        stderr=log or None,
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


def down_one(h: Held, say: Callable[[str], None]) -> None:
    """Tear `h` down once (its thread, or the teardown after a Ctrl-C, whichever comes first)."""
    with h.lock:
        if h.down_s is not None:
            return
        try:
            if skypilot.down(h.machine.cluster):
                say(f"tore down {h.machine.cluster}")
            else:
                say(f"{h.machine.cluster}: already gone (never made, preempted or autodowned)")
        except Exception as e:  # noqa: BLE001 - the audit at the end names what is left
            say(f"could not tear down {h.machine.cluster}: {e}")
        h.down_s = time.time()


def teardown(held: Sequence[Held], say: Callable[[str], None]) -> None:
    """Tear down every machine asked for and not yet down (a launch cut short may have left
    one); a second Ctrl-C does not cut this short."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        for h in held:
            down_one(h, say)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


def cost(h: Held, usd_per_hour: float | None) -> tuple[float | None, float | None]:
    """(seconds billed, dollars): from the launch request to the teardown, an upper bound of
    the time the cloud bills, at the catalog's price."""
    if h.submitted_s is None or h.down_s is None:
        return None, None
    seconds = h.down_s - h.submitted_s
    usd = None if usd_per_hour is None else round(usd_per_hour * seconds / 3600, 4)
    return seconds, usd


def write_record(p: Plan, held: Sequence[Held], out: Path) -> None:
    """fleet.json: how many machines, which, where, what they cost and what went wrong."""
    machines = []
    for h, price in zip(held, p.prices):
        seconds, usd = cost(h, price.usd_per_hour)
        machines.append(
            {
                "directory": h.directory,
                "cluster": h.machine.cluster,
                "infra": h.machine.infra,
                "card": h.machine.card,
                "instance_type": h.machine.instance_type or price.instance_type,
                "also": list(h.machine.also),
                "spot": h.machine.spot,
                "region": h.launched.region if h.launched else None,
                "zone": h.launched.zone if h.launched else None,
                "usd_per_hour": price.usd_per_hour,
                "price_source": "SkyPilot's catalog" if price.usd_per_hour else price.why_unknown,
                "held_s": None if seconds is None else round(seconds, 1),
                "usd": usd,
                "series_succeeded": h.succeeded,
                "job_status": h.job,
                "pulled": h.pulled,
                "differences": len(h.differences),
                "state": h.state(),
                "error": h.error.message if h.error else None,
                "fix": h.error.fix if h.error else None,
                "skypilot_said": h.skypilot_said,
                "preemptions": list(h.preemptions),
                "log": f"{LOGS}/{h.directory}.log",
            }
        )
    record = {"schema_version": FLEET_SCHEMA, "series_id": p.series_id, "machines": machines}
    (out / FLEET).write_text(json.dumps(record, indent=2) + "\n", "utf-8")

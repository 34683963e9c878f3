"""What a local run's supervisor reported (kit.executors.supervisor), read by the kit: the
report itself, whether it is the supervisor's own, and the record's words for its isolation and
for the processes the program left."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from kit.executors import confine, sight, supervisor
from kit.executors.base import RunSpec
from kit.measure import stamped
from kit.results.records import RunRecord

NAMESPACES = "namespaces: a private user, mount and PID namespace"
HIDDEN = "the machine hidden but the system's folders, the folders it reads and its mounts"
NOT_HIDDEN = confine.NOT_HIDDEN


def report(fd: int) -> dict:
    """What the supervisor reported (nothing where it was killed before it could), read
    without waiting: every holder of the pipe's write end has exited."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while chunk := os.read(fd, 65536):
            data += chunk
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    try:
        report = json.loads(data) if data else {}
    except ValueError:
        report = {}
    return report if isinstance(report, dict) else {}


def isolation(spec: RunSpec, report: Mapping[str, object], beside: str | None = None) -> str | None:
    """What kept the run from the rest of the results directory, in the record's words; for a
    contender whose results directory lies directly in a folder it reads, `beside` says so."""
    if not spec.confine:
        return None
    said = report.get("isolation")
    if said == "namespaces":
        return f"{NAMESPACES}; only the run's mounts writable, /tmp and /dev/shm its own"
    if said == "namespaces; hidden":
        words = f"{NAMESPACES}; {HIDDEN}; only the run's mounts writable, /tmp and /dev/shm its own"
        if beside:
            return f"{words}; what lies beside its results directory {NOT_HIDDEN} ({beside})"
        return words
    if isinstance(said, str) and said.startswith("namespaces; "):
        # what the kernel refused (kit.executors.confine), in the supervisor's words
        return f"{NAMESPACES}; {said.removeprefix('namespaces; ')[:300]}"
    if isinstance(report.get("error"), str):
        return f"none: {report['error']}"
    if isinstance(said, str) and said.startswith("none (") and said.endswith(")"):
        return f"none: the machine refused namespaces ({said[6:-1]})"
    return "none"


def hidden(isolation: str | None) -> bool:
    """Whether a contender run's record says it was kept from the other side's files: in a
    container, or in namespaces that hid the machine (a record of an older kit, which said
    only "namespaces", is read as it was judged then)."""
    said = str(isolation)
    hid = said.startswith("namespaces") and NOT_HIDDEN not in said
    return said.startswith("container") or hid


def hidden_hint(record: RunRecord, root: Path) -> str:
    """Where a run that saw the machine hidden (a local contender) could not start a program or
    find a file (its exit code, the tail of its output in `root`), what lets it see more."""
    if HIDDEN not in str(record.isolation):
        return ""
    tail = stamped.tail_block(root / record.log_dir)
    if record.exit_code not in (126, 127) and "No such file" not in tail:
        return ""
    return (
        " (the contender saw the machine hidden but for the system's folders, what it reads "
        f"and its mounts: name what else it reads in {sight.ENV}, separated as PATH is)"
    )


def own_report(report: Mapping[str, object], returncode: int | None) -> bool:
    """Whether the report agrees with how its supervisor ended: the supervisor ends as its
    program did (kit.executors.supervisor.main), so one killed from outside, or a report
    another process wrote, says a different exit."""
    code = report.get("exit_code")
    if not isinstance(code, int) or returncode is None:
        return True  # no report (a run stopped before it could): nothing is claimed
    return returncode == (code if code < 0 else code & 0xFF)


@functools.cache
def namespaces() -> bool:
    """Whether this machine gives a local run a user, mount and PID namespace (asked once, of
    a supervisor that only tries)."""
    probe = supervisor.command("--probe")
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def outlived(report: Mapping[str, object]) -> str | None:
    """The processes the program left behind, stopped, in words; None where none was."""
    count, named = report.get("outlived_count"), report.get("outlived")
    if not isinstance(count, int) or count == 0 or not isinstance(named, list):
        return None
    killed = report.get("killed")
    noun = "process" if count == 1 else "processes"
    verb = "was" if count == 1 else "were"
    more = f", {count - len(named)} more" if count > len(named) else ""
    hard = f"; {killed} needed SIGKILL" if isinstance(killed, int) and killed else ""
    return (
        f"{count} {noun} outlived the program and {verb} stopped ({', '.join(named)}{more}){hard}"
    )

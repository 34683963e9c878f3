"""What a run's record says of the run itself, held to its folder (D6): its start, end, exit
and executor against the folder's run.json and the stamps of its logs, and every file of a
recorded attempt's folder against the files its record lists."""

from __future__ import annotations

import json
from collections.abc import Mapping

from kit.measure import stamped
from kit.results.records import RunRecord
from kit.results.store import RECORDS, RUN_FILE

LOGS = ("stdout.log", "stderr.log")  # a run's stamped logs, among the files verify reads


def strays(
    numbered: list[tuple[int, RunRecord]], listing: Mapping[str, frozenset[str]]
) -> list[str]:
    """Each file in a recorded attempt's folder that its record does not list: the engine
    hashes everything a run's folder holds when the run ends (kit.engine.engine), so a file
    it does not know was put there afterwards."""
    out = []
    for number, record in numbered:
        held = listing.get(record.log_dir, frozenset())
        for rel in sorted(held):
            if not rel.endswith("/") and rel not in record.files:
                out.append(
                    f"{rel}: a file that run {record.run_id}'s record ({RECORDS} line {number}) "
                    "does not list: added to its folder after the run"
                )
    return out


def differences(root: str, record: RunRecord, number: int, data: dict[str, bytes]) -> list[str]:
    """Each field of a record that the run itself gave (its start, end, exit, executor) that
    differs from its folder's run.json (a record from before run.json: none), and a start or
    end that does not hold the stamps of its logs between them (the same outside clock, §5).
    `data`: the raw files' bytes verify read for their hashes, by path."""
    where = f"{RECORDS} line {number}: run {record.run_id}'s"
    out = []
    rel = f"{record.log_dir}/{RUN_FILE}"
    if rel in record.files:
        try:
            held = data.get(f"{root}/{rel}")  # read for its hash already (verify)
            ran = json.loads(stamped.read_bytes(f"{root}/{rel}") if held is None else held)
        except OSError:
            return []  # gone, with its folder or alone: the audit and the hashes name it
        except ValueError:
            return [f"{rel}: not JSON (run {record.run_id})"]
        if not isinstance(ran, dict):
            return [f"{rel}: not a JSON object (run {record.run_id})"]
        mine = record.ran()
        out += [
            f"{where} {name} is {json.dumps(mine[name])} in its record, "
            f"{json.dumps(ran.get(name))} in {rel}"
            for name in RunRecord.RAN
            if mine[name] != ran.get(name)
        ]
    stamps = [
        s
        for name in LOGS
        if (log := data.get(f"{root}/{record.log_dir}/{name}")) is not None
        for s in _first_and_last_stamp(log)
    ]
    if record.start_ns is not None and stamps and min(stamps) < record.start_ns:
        out.append(
            f"{where} start_ns {record.start_ns} comes after its logs' first stamp {min(stamps)}"
        )
    if record.end_ns is not None and stamps and max(stamps) > record.end_ns:
        out.append(
            f"{where} end_ns {record.end_ns} comes before its logs' last stamp {max(stamps)}"
        )
    return out


def _first_and_last_stamp(log: bytes) -> list[int]:
    """The stamps of a stamped log's first and last lines (kit.measure.clock); none if empty
    (or not stamped: judging the log says so)."""
    text = log.strip()
    if not text:
        return []
    # the first and the last line alone: a log of a long run holds hundreds of thousands
    end, start = text.find(b"\n"), text.rfind(b"\n") + 1
    first, last = text[: end if end >= 0 else len(text)], text[start:]
    try:
        return [int(first.split(b" ", 1)[0]), int(last.split(b" ", 1)[0])]
    except ValueError:
        return []  # a log that is not stamped: judging it says so

"""Whether a results directory is as its series wrote it (D6): each record belongs to a
planned run, in a folder of its own, with its raw files; no folder without a record that is
not an interrupted attempt. `verify` names every difference; `report` refuses to compute from
a directory that has any."""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kit.engine import fanout, judging
from kit.engine.records import RunRecord
from kit.engine.scheduler import PlannedRun
from kit.engine.store import (
    ADJUSTMENTS,
    FINAL,
    PLAN,
    RECORDS,
    ResultsDir,
    load_protocol,
    sha256_file,
)
from kit.errors import DirectoryDiffers
from kit.measure import stamped, timing


def audit(rd: ResultsDir, listing: Mapping[str, frozenset[str]] | None = None) -> list[str]:
    """What makes the records and run folders other than a series writes them (D6).

    Each record belongs to a planned run (same run, configuration and kind), in a folder of its
    own under that run's `runs/<id>-<config>/`, which exists; no two records share a folder,
    and no planned run has two final records at the batch in force (amendment 5.1). A run
    folder without a record is an attempt the series was stopped in: either its run was tried
    again later, or the series has not yet recorded any run planned after it. Anything else
    (a record dropped, duplicated, re-pointed or added, a folder deleted) is named here.
    """
    listing = rd.listing() if listing is None else listing
    plan = rd.plan()
    planned = {r.run_id: (position, r) for position, r in enumerate(plan.order)}
    models = {c.id: c.model for c in plan.configurations}
    adjustments = rd.read_json(ADJUSTMENTS) if (rd.root / ADJUSTMENTS).exists() else {}
    batches = {model: a["batch_size"] for model, a in adjustments.items()}
    problems: list[str] = []
    folders: dict[str, int] = {}
    finals: dict[int, str] = {}
    for number, record in enumerate(rd.records(), 1):
        where = f"{RECORDS} line {number}"
        run_id, log_dir = record.get("run_id"), str(record.get("log_dir", ""))
        position_run = planned.get(run_id) if isinstance(run_id, int) else None
        if position_run is None:
            problems.append(f"{where}: run {run_id!r} is not in {PLAN}")
            continue
        run = position_run[1]
        if (record.get("config"), record.get("kind", "timed")) != (run.config, run.kind):
            problems.append(
                f"{where}: run {run_id} is planned as {run.kind} {run.config}, the record says "
                f"{record.get('kind')} {record.get('config')}"
            )
            continue
        own = f"runs/{run_id:04d}-{run.config.replace('/', '.')}/"
        if not (log_dir.startswith(own) and log_dir.count("/") == 2):
            problems.append(f"{where}: run {run_id}'s record points at {log_dir}, not under {own}")
        elif log_dir not in listing:
            problems.append(f"{where}: run {run_id}'s folder {log_dir} is missing")
        if log_dir in folders:
            problems.append(
                f"{where}: run {run_id}'s record duplicates line {folders[log_dir]}'s "
                f"(both name {log_dir})"
            )
            continue
        folders[log_dir] = number
        current = record.get("batch_size") == batches.get(models.get(run.config, ""))
        if _final(record) and current and isinstance(run_id, int):
            if run_id in finals:
                problems.append(
                    f"{where}: run {run_id} has a second final record ({finals[run_id]} "
                    f"and {log_dir})"
                )
            finals[run_id] = log_dir
    problems += _unrecorded_attempts(listing, planned, folders, finals)
    return problems


def _final(record: Mapping[str, Any]) -> bool:
    """A record whose run the series never runs again; a run void for buffered output ran
    again at the resume (kit.engine.series), so a later record of it is no second final."""
    status = record.get("status")
    if status == timing.VOID and timing.is_buffered(str(record.get("reason", ""))):
        return False
    return status in FINAL


@dataclass(frozen=True)
class Examined:
    """What an `Examination` found."""

    listing: dict[str, frozenset[str]]  # the run folders (`ResultsDir.listing`)
    problems: list[str]  # the audit's, then each raw file gone or changed since its run
    # by the record's line (0-based, in `rd.records()`): each run's latest record, judged again
    # from the very bytes just hashed; a message where its raw log no longer parses
    judged: dict[int, timing.Outcome | str]


class Examination:
    """`verify`'s first part, started at once, in forked processes where the directory is
    large (kit.engine.fanout): the run folders listed and audited; and, a slice of the records
    each, every raw file hashed against its record and each run judged again from the bytes
    read for the hash, so no log is read twice. `result()` waits and gives the `Examined`."""

    def __init__(self, rd: ResultsDir):
        size = len(rd.records())
        step = -(-size // min(fanout.cores(), 8)) or 1
        jobs: list[Callable[[], Any]] = [functools.partial(_listed_and_audited, rd)]
        jobs += [
            functools.partial(_hashed_and_judged, rd, lo, lo + step) for lo in range(0, size, step)
        ]
        self._children = fanout.Children(jobs, size=size)

    def result(self) -> Examined:
        (listing, problems), *parts = self._children.result()
        judged: dict[int, timing.Outcome | str] = {}
        for changed, mine in parts:
            problems += changed
            judged.update(mine)
        return Examined(listing, problems, judged)


def _listed_and_audited(rd: ResultsDir) -> tuple[dict[str, frozenset[str]], list[str]]:
    listing = rd.listing()
    return listing, audit(rd, listing)


def _hashed_and_judged(
    rd: ResultsDir, lo: int, hi: int
) -> tuple[list[str], dict[int, timing.Outcome | str]]:
    """Records lo to hi: every raw file that is gone or no longer hashes as recorded, and each
    run's latest record judged from the bytes hashed. A record whose folder is gone is left to
    the audit, which names the folder once. A run that cannot be judged here (the protocol or
    plan unreadable, a record malformed) is left out: `report` judges it, and says why not."""
    root, records = str(rd.root), rd.records()
    latest = {r.get("run_id"): i for i, r in enumerate(records)}
    judge = _judge(rd)
    changed: list[str] = []
    judged: dict[int, timing.Outcome | str] = {}
    for i in range(lo, min(hi, len(records))):
        problems, data = _read_and_hashed(root, records[i])
        changed += problems
        if judge is None or latest.get(records[i].get("run_id")) != i:
            continue
        try:
            judged[i] = judge(records[i], data)
        except ValueError as e:  # a raw log that no longer parses: `report` would say this
            judged[i] = str(e)
        except Exception:  # noqa: BLE001 - left to `report`, which raises it where it says why
            continue
    return changed, judged


def _judge(
    rd: ResultsDir,
) -> Callable[[Mapping[str, Any], dict[str, bytes]], timing.Outcome] | None:
    """How a raw record is judged from bytes already read; None where the protocol or the
    plan cannot be read (`report` says why)."""
    try:
        protocol, plan = load_protocol(rd), rd.plan()
    except Exception:  # noqa: BLE001 - `report` reads them again, and says what is wrong
        return None
    grammars = {c.id: judging.grammar(protocol, c.side) for c in plan.configurations}

    def judge(raw: Mapping[str, Any], data: dict[str, bytes]) -> timing.Outcome:
        record = RunRecord.from_json(raw)

        def read(path: Path | str) -> bytes:
            held = data.get(str(path))
            return stamped.read_bytes(path) if held is None else held

        grammar = grammars[record.config]
        return judging.rejudge(rd.root, record, grammar, protocol.timing, read=read)

    return judge


def _read_and_hashed(root: str, record: Mapping[str, Any]) -> tuple[list[str], dict[str, bytes]]:
    """A record's raw files that are gone or no longer hash as it recorded, and the bytes of
    its stdout and stderr (by path), read once for the hash and the judgement. Any other file
    (a profile of hundreds of megabytes) is hashed a block at a time."""
    out: list[str] = []
    data: dict[str, bytes] = {}
    run_id, log_dir = record.get("run_id"), str(record.get("log_dir", ""))
    # paths joined as text: os.path.join costs more, tens of thousands of times
    logs = (f"{root}/{log_dir}/stdout.log", f"{root}/{log_dir}/stderr.log")
    for rel, digest in record.get("files", {}).items():
        path = f"{root}/{rel}"
        try:
            if path in logs:
                data[path] = stamped.read_bytes(path)
                actual = hashlib.sha256(data[path]).hexdigest()
            else:
                actual = sha256_file(path)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            if not os.path.isdir(os.path.join(root, log_dir)):
                return [], {}  # the folder is gone: the audit names it, once
            out.append(f"{rel}: raw file missing (run {run_id})")
            continue
        if actual != digest:
            out.append(f"{rel}: raw file changed since run {run_id} wrote it")
    return out, data


def refuse_if_altered(rd: ResultsDir, listing: Mapping[str, frozenset[str]] | None = None) -> None:
    """No table is computed from a directory whose records or run folders were altered."""
    listing = rd.listing() if listing is None else listing
    problems = audit(rd, listing)
    problems += [
        p
        for r in rd.records()
        if str(r.get("log_dir", "")) in listing
        for p in missing_files(r, listing[str(r.get("log_dir", ""))])
    ]
    if problems:
        shown = "\n  ".join(problems[:20]) + ("\n  …" if len(problems) > 20 else "")
        raise DirectoryDiffers(
            f"{rd.root} is not as its series wrote it:\n  {shown}",
            f"`micakit verify {rd.root}` names every difference; restore the directory from "
            "its copy, or measure the series again",
        )


def missing_files(record: Mapping[str, Any], held: frozenset[str]) -> list[str]:
    """The raw files a record lists that are gone from its folder (`held`: what it holds)."""
    return [
        f"{rel}: raw file missing (run {record.get('run_id')})"
        for rel in record.get("files", {})
        if rel not in held
    ]


def _unrecorded_attempts(
    listing: Mapping[str, frozenset[str]],
    planned: dict[int, tuple[int, PlannedRun]],
    folders: dict[str, int],
    finals: dict[int, str],
) -> list[str]:
    latest = max((planned[r][0] for r in finals if r in planned), default=-1)
    recorded_attempt: dict[int, int] = {}
    for log_dir in folders:
        run_id, attempt = _attempt_of(log_dir)
        if run_id is not None:
            recorded_attempt[run_id] = max(recorded_attempt.get(run_id, 0), attempt)
    out = []
    for rel in sorted(listing):
        if rel in folders:
            continue
        run_id, attempt = _attempt_of(rel)
        if run_id is None or run_id not in planned:
            out.append(f"{rel}: a run folder that no planned run owns")
            continue
        retried = recorded_attempt.get(run_id, 0) > attempt
        stopped_in = planned[run_id][0] > latest  # no final record of a later run yet
        if not (retried or stopped_in) and listing[rel]:
            out.append(f"{rel}: run {run_id}'s logs, with no record in {RECORDS}")
    return out


def _attempt_of(log_dir: str) -> tuple[int | None, int]:
    try:
        _, folder, attempt = log_dir.split("/")
        return int(folder.split("-", 1)[0]), int(attempt.removeprefix("attempt-"))
    except ValueError:
        return None, 0

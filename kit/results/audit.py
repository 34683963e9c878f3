"""Whether a results directory is as its series wrote it (D6): each record belongs to a
planned run, in a folder of its own, with its raw files; no folder without a record that is
not an interrupted attempt. `verify` names every difference; `report` refuses to compute from
a directory that has any."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kit.errors import DirectoryDiffers, UserError
from kit.measure import stamped, timing
from kit.results import fanout, fields, judging, links, ran, run_conditions
from kit.results.planned import PlannedRun
from kit.results.records import RunRecord
from kit.results.run_conditions import Conditions
from kit.results.store import (
    NOT_RUN,
    PLAN,
    RECORDS,
    RUN_FILE,
    ResultsDir,
    count_lines,
    load_protocol,
    sha256_file,
)
from kit.status import FINAL


def audit(rd: ResultsDir, listing: Mapping[str, frozenset[str]] | None = None) -> list[str]:
    """What makes the records and run folders other than a series writes them (D6).

    Each record belongs to a planned run (same run, configuration and kind), in a folder of its
    own under that run's `runs/<id>-<config>/`, which exists; no two records share a folder,
    and no planned run has two final records at the batch in force (amendment 5.1). A run
    folder without a record is an attempt the series was stopped in: either its run was tried
    again later, or the series has not yet recorded any run planned after it, and its logs do
    not show a run that finished (one that did lost its record, unless runs.jsonl ends in that
    record, torn). Anything else (a record dropped, duplicated, re-pointed or added, a folder
    deleted) is named here.
    """
    listing = rd.listing() if listing is None else listing
    plan = rd.plan()
    planned = {r.run_id: (position, r) for position, r in enumerate(plan.order)}
    models = {c.id: c.model for c in plan.configurations}
    batches = rd.batches()
    problems: list[str] = []
    folders: dict[str, int] = {}
    finals: dict[int, str] = {}
    for number, record in _typed(rd, problems):
        where = f"{RECORDS} line {number}"
        run_id, log_dir = record.run_id, record.log_dir
        position_run = planned.get(run_id)
        if position_run is None:
            problems.append(f"{where}: run {run_id!r} is not in {PLAN}")
            continue
        run = position_run[1]
        if (record.config, record.kind) != (run.config, run.kind):
            problems.append(
                f"{where}: run {run_id} is planned as {run.kind} {run.config}, the record says "
                f"{record.kind} {record.config}"
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
        current = record.batch_size == batches.get(models.get(run.config, ""))
        if _final(record) and current:
            if run_id in finals:
                problems.append(
                    f"{where}: run {run_id} has a second final record ({finals[run_id]} "
                    f"and {log_dir})"
                )
            finals[run_id] = log_dir
    unrecorded, stopped_in = _unrecorded_attempts(listing, planned, folders, finals)
    problems += unrecorded
    problems += _finished_without_record(rd, stopped_in, planned, listing)
    problems += ran.strays(_typed(rd, []), listing)
    return problems


def _final(record: RunRecord) -> bool:
    """A record whose run the series never runs again; a run void for buffered output ran
    again at the resume (kit.engine.series), so a later record of it is no second final."""
    if record.status == timing.VOID and timing.is_buffered(record.reason):
        return False
    return record.status in FINAL


def _typed(rd: ResultsDir, problems: list[str]) -> list[tuple[int, RunRecord]]:
    """Each line of runs.jsonl typed, by its number; a line that is no record is named."""
    try:
        return list(enumerate(rd.runs(), 1))
    except UserError:
        pass  # one line or more is no record: each is named, and the rest audited
    out = []
    for number, raw in enumerate(rd.records(), 1):
        try:
            out.append((number, RunRecord.from_json(raw, f"{RECORDS} line {number}")))
        except UserError as e:
            problems.append(e.message)
    return out


TORN = (
    f"{RECORDS} ends in a torn record: the series stopped while writing it; "
    "`micakit series --resume {root}` repairs it"
)


def torn(rd: ResultsDir) -> list[str]:
    """A torn last line of runs.jsonl, named: read as absent, it is no directory's clean state
    (verify); `report` reads the runs before it."""
    return [TORN.format(root=rd.root)] if rd.torn() else []


def _torn_run(rd: ResultsDir) -> int | None:
    """The run whose record the torn last line began (its "run_id" comes second); None where
    the line is torn before it."""
    found = re.search(rb'"run_id": *(\d+)', rd.torn())
    return int(found[1]) if found else None


def _finished_without_record(
    rd: ResultsDir,
    stopped_in: list[tuple[str, int]],
    planned: dict[int, tuple[int, PlannedRun]],
    listing: Mapping[str, frozenset[str]],
) -> list[str]:
    """The attempts a stopped series leaves without a record (`stopped_in`) whose folders show
    a run that finished: its stdout reaches the end of §5's window, or it holds the note of a
    run the kit did not start. A series records a run as soon as it ends, so such a run's
    record was dropped; only the run of a torn last record (the series stopped while writing
    it) is left to `series --resume`. Few folders are read: only those of the runs after the
    last recorded one."""
    if not stopped_in:
        return []
    torn_run = _torn_run(rd) if rd.torn() else None
    judge = None
    out: list[str] = []
    for rel, run_id in stopped_in:
        if rd.torn() and torn_run in (None, run_id):
            continue  # the run whose record the series stopped while writing
        if f"{rel}/{NOT_RUN}" in listing[rel]:
            how = f"its {NOT_RUN} says why it was not started"
        elif f"{rel}/stdout.log" in listing[rel]:
            judge = judge or _judge(rd)
            if judge is None:
                return out  # the protocol or plan cannot be read: `report` says why
            run = planned[run_id][1]
            head = {"config": run.config, "kind": run.kind}
            unrecorded = RunRecord(run_id, rel, "", "", "", "", exit_code=0, head=head)
            try:
                again = judge(unrecorded, {})
            except Exception:  # noqa: BLE001 - logs that cannot be judged show no finished run
                continue
            if again.window_end_ns is None:
                continue  # stopped before the end of its window: a stop explains it
            how = f"its stdout reaches step {again.last_step}"
        else:
            continue
        out.append(
            f"{rel}: run {run_id} finished ({how}), but {RECORDS} holds no record of it: "
            "the record was dropped (were the series stopped in the instant between, "
            f"`micakit series --resume {rd.root}` would run it again)"
        )
    return out


@dataclass(frozen=True)
class Examined:
    """What an `Examination` found."""

    listing: dict[str, frozenset[str]]  # the run folders (`ResultsDir.listing`)
    problems: list[str]  # the audit's, then each raw file gone or changed since its run
    # by the record's line (0-based, in `rd.records()`): each run's latest record, judged again
    # from the very bytes just hashed; a message where its raw log no longer parses
    judged: dict[int, timing.Outcome | str]
    # by the same line: what each run's conditions came to, worked out again from those bytes
    conditions: dict[int, Conditions] = dataclasses.field(default_factory=dict)
    # by the same line: each run's fields (kit.results.fields), read from the same bytes
    read: dict[int, dict[str, fields.Value]] = dataclasses.field(default_factory=dict)


class Examination:
    """`verify`'s first part, started at once, in forked processes where the directory is
    large (kit.results.fanout): the run folders listed (audited by `result()` once listed);
    and, a slice of the records each, every raw file hashed against its record and each run
    judged again from the bytes read for the hash, so no log is read twice, and its judgement
    compared with its record's. `result()` waits and gives the `Examined`."""

    def __init__(self, rd: ResultsDir):
        self._rd = rd
        self._walker, self._children = _started(rd, _hashed_and_judged)
        self._torn = torn(rd)  # after the walk has started: it reads the records

    def result(self) -> Examined:
        listing, found = _walked(self._walker, self._children, lambda ls: audit(self._rd, ls))
        problems = [*self._torn, *found]
        parts = self._children.result()
        judged: dict[int, timing.Outcome | str] = {}
        conditions: dict[int, Conditions] = {}
        read: dict[int, dict[str, fields.Value]] = {}
        for changed, mine, theirs, values in parts:
            problems += changed
            judged.update(mine)
            conditions.update(theirs)
            read.update(values)
        return Examined(listing, problems, judged, conditions, read)


def _started(
    rd: ResultsDir, per_slice: Callable[[ResultsDir, int, int], object]
) -> tuple[fanout.Children, fanout.Children]:
    """The run folders walked (`links.found_and_listed`), and `per_slice(rd, lo, hi)` over a
    slice of the records per core, each in forked processes where the directory is large
    (`Examination`, `Survey`). The walk needs no record: it starts first, on a core of its
    own while this process types the records and the plan, once, for the slices' processes
    to inherit; the audit of the listing is the caller's, once the walk is done."""
    size = _lines(rd)
    walker = fanout.Children([functools.partial(links.found_and_listed, rd.root)], size=size)
    try:
        rd.runs()  # typed once, here: every forked process reads them
    except UserError:
        pass  # the audit names each line that is no record
    try:
        rd.plan()  # and the plan, as large (a planned run a record)
    except Exception:  # noqa: BLE001 - the audit and the report read it again, and say why
        pass
    size = len(rd.records())
    step = -(-size // min(fanout.cores(), 8)) or 1
    jobs = [functools.partial(per_slice, rd, lo, lo + step) for lo in range(0, size, step)]
    return walker, fanout.Children(jobs, size=size)


def _walked(
    walker: fanout.Children,
    children: fanout.Children,
    audited: Callable[[dict[str, frozenset[str]]], list[str]],
) -> tuple[dict[str, frozenset[str]], list[str]]:
    """The walk's listing, with the links it found and `audited(listing)`'s findings, worked
    out here while `children` go on; where either raises, the children are reaped first and
    their answers dropped (as `fanout.map_in_order` does), so no worker outlives the error."""
    try:
        named, listing = walker.result()[0]
        return listing, [*named, *audited(listing)]
    except BaseException:
        with contextlib.suppress(Exception):
            children.result()
        raise


def _lines(rd: ResultsDir) -> int:
    """How many records runs.jsonl holds, counted before any is parsed (its lines)."""
    try:
        return count_lines(rd.root / RECORDS)
    except OSError:
        return 0


def _hashed_and_judged(
    rd: ResultsDir, lo: int, hi: int
) -> tuple[
    list[str],
    dict[int, timing.Outcome | str],
    dict[int, Conditions],
    dict[int, dict[str, fields.Value]],
]:
    """Records lo to hi: every raw file that is gone or no longer hashes as recorded; each
    record judged again from the bytes hashed, and every field of its judgement that differs
    from what it records named, and so its conditions (kit.results.run_conditions); each run's
    latest outcome, conditions and fields kept for the report. A record whose
    folder is gone is left to the audit, which names the folder once. A run that cannot be
    judged here (the protocol or plan unreadable, a record malformed) is left out: `report`
    judges it, and says why not."""
    root, size = str(rd.root), len(rd.records())
    # by the line's number, from 1; a line that is no record is named by the audit
    typed = dict(_typed(rd, []))
    latest = {r.run_id: number - 1 for number, r in sorted(typed.items())}
    # a run is judged again only where every line is a record (else `report` says what is not)
    judge = _judge(rd) if len(typed) == size else None
    changed: list[str] = []
    judged: dict[int, timing.Outcome | str] = {}
    conditions: dict[int, Conditions] = {}
    read: dict[int, dict[str, fields.Value]] = {}
    for i in range(lo, min(hi, size)):
        record = typed.get(i + 1)
        if record is None:
            continue
        problems, data = _read_and_hashed(root, record)
        changed += problems
        if not problems:
            changed += ran.differences(root, record, i + 1, data)
        if judge is None:
            continue
        try:
            again: timing.Outcome | str = judge(record, data)
        except ValueError as e:  # a raw log that no longer parses: `report` would say this
            again = str(e)
        except Exception:  # noqa: BLE001 - left to `report`, which raises it where it says why
            continue
        logs = fields.Logs(f"{root}/{record.log_dir}", data)
        if isinstance(again, timing.Outcome) and not problems:
            changed += [
                f"{RECORDS} line {i + 1}: run {record.run_id}'s {name} is {json.dumps(mine)} "
                f"in its record, {json.dumps(fresh)} judged again from its raw logs"
                for name, mine, fresh in judging.differences(record, again, logs)
            ]
        found = (
            run_conditions.again(data, f"{root}/{record.log_dir}", again)
            if isinstance(again, timing.Outcome)
            else None
        )
        if found is not None and record.conditions is not None and not problems:
            changed += [
                f"{RECORDS} line {i + 1}: run {record.run_id}'s conditions' {name} is "
                f"{json.dumps(mine)} in its record, {json.dumps(fresh)} worked out again from "
                "its raw files"
                for name, mine, fresh in run_conditions.differences(record.conditions, found)
            ]
        if latest.get(record.run_id) == i:
            judged[i] = again
            if found is not None:
                conditions[i] = found
            if isinstance(again, timing.Outcome):
                read[i] = fields.read_all(again, logs)
    return changed, judged, conditions, read


class Survey:
    """`report`'s first part, as `Examination` is verify's, hashing nothing: started at once,
    in forked processes where the directory is large, while the report's modules load. One
    lists the run folders, which `refused()` audits as `refuse_if_altered` does; the others
    judge each run's latest record again from its logs (D6), a slice of the records each, as
    `tables()` would judge them itself, and read each run's fields (kit.results.fields) from
    its folder.
    `refused()` waits: it raises as `refuse_if_altered` does, else gives the audited listing,
    the judgements and the fields read, for `tables()`."""

    def __init__(self, rd: ResultsDir):
        self._rd = rd
        self._walker, self._children = _started(rd, _judged_only)

    def refused(
        self,
    ) -> tuple[
        dict[str, frozenset[str]],
        dict[int, timing.Outcome | str],
        dict[int, dict[str, fields.Value]],
    ]:
        listing, problems = _walked(self._walker, self._children, lambda ls: _altered(self._rd, ls))
        parts = self._children.result()
        _refuse(self._rd, problems)
        judged: dict[int, timing.Outcome | str] = {}
        read: dict[int, dict[str, fields.Value]] = {}
        for mine, values in parts:
            judged.update(mine)
            read.update(values)
        return listing, judged, read


def _judged_only(
    rd: ResultsDir, lo: int, hi: int
) -> tuple[dict[int, timing.Outcome | str], dict[int, dict[str, fields.Value]]]:
    """Records lo to hi: each run's latest record judged again from its raw logs, by the
    record's line (0-based); a message where a log no longer parses; and the fields of each
    run judged (kit.results.fields), read from its folder. Left out, for `tables()` to judge
    and say why: every run where a line is no record or the protocol or plan cannot be read,
    and a run whose judging fails otherwise."""
    size = len(rd.records())
    typed = dict(_typed(rd, []))
    judge = _judge(rd) if len(typed) == size else None
    if judge is None:
        return {}, {}
    root = str(rd.root)
    latest = {r.run_id: number - 1 for number, r in sorted(typed.items())}
    judged: dict[int, timing.Outcome | str] = {}
    read: dict[int, dict[str, fields.Value]] = {}
    for i in range(lo, min(hi, size)):
        record = typed[i + 1]
        if latest[record.run_id] != i:
            continue
        try:
            again = judged[i] = judge(record, {})
        except ValueError as e:  # a raw log that no longer parses: `tables()` says so
            judged[i] = str(e)
            continue
        except Exception:  # noqa: BLE001 - left to `tables()`, which raises it where it says why
            continue
        read[i] = fields.read_all(again, fields.Logs(f"{root}/{record.log_dir}"))
    return judged, read


def _judge(rd: ResultsDir) -> Callable[[RunRecord, dict[str, bytes]], timing.Outcome] | None:
    """How a record is judged from bytes already read; None where the protocol or the plan
    cannot be read (`report` says why)."""
    try:
        protocol, plan = load_protocol(rd), rd.plan()
    except Exception:  # noqa: BLE001 - `report` reads them again, and says what is wrong
        return None
    grammars = {c.id: judging.grammar(protocol, c.side) for c in plan.configurations}

    def judge(record: RunRecord, data: dict[str, bytes]) -> timing.Outcome:
        def read(path: Path | str) -> bytes:
            held = data.get(str(path))
            return stamped.read_bytes(path) if held is None else held

        grammar = grammars[record.config]
        return judging.rejudge(rd.root, record, grammar, protocol.timing, read=read)

    return judge


def _read_and_hashed(root: str, record: RunRecord) -> tuple[list[str], dict[str, bytes]]:
    """A record's raw files that are gone or no longer hash as it recorded, and the bytes of
    its stdout and stderr, its run.json and its conditions' files (by path), read once for the
    hash, the judgement, the record's own fields and the conditions. Any other file (a profile
    of hundreds of megabytes) is hashed a block at a time."""
    out: list[str] = []
    data: dict[str, bytes] = {}
    run_id, log_dir = record.run_id, record.log_dir
    # paths joined as text: os.path.join costs more, tens of thousands of times
    kept = ("stdout.log", "stderr.log", RUN_FILE, *run_conditions.FILES)
    logs = tuple(f"{root}/{log_dir}/{name}" for name in kept)
    for rel, digest in record.files.items():
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


def refuse_if_altered(
    rd: ResultsDir, listing: Mapping[str, frozenset[str]] | None = None
) -> Mapping[str, frozenset[str]]:
    """No table is computed from a directory whose records or run folders were altered: the
    run folders' listing (`ResultsDir.listing`) that was audited, for `tables()`."""
    if listing is None:
        named, listing = links.found_and_listed(rd.root)
    else:
        named = links.found(rd.root)
    _refuse(rd, [*named, *_altered(rd, listing)])
    return listing


def _altered(rd: ResultsDir, listing: Mapping[str, frozenset[str]]) -> list[str]:
    """What `refuse_if_altered` refuses, the links aside: the audit's findings, and each raw
    file a record lists that its folder no longer holds."""
    problems = audit(rd, listing)
    problems += [
        p
        for _, r in _typed(rd, [])  # a line that is no record: the audit above named it
        if r.log_dir in listing
        for p in missing_files(r, listing[r.log_dir])
    ]
    return problems


def _refuse(rd: ResultsDir, problems: list[str]) -> None:
    if problems:
        shown = "\n  ".join(problems[:20]) + ("\n  …" if len(problems) > 20 else "")
        raise DirectoryDiffers(
            f"{rd.root} is not as its series wrote it:\n  {shown}",
            f"`micakit verify {rd.root}` names every difference; restore the directory from "
            "its copy, or measure the series again",
        )


def missing_files(record: RunRecord, held: frozenset[str]) -> list[str]:
    """The raw files a record lists that are gone from its folder (`held`: what it holds)."""
    return [
        f"{rel}: raw file missing (run {record.run_id})" for rel in record.files if rel not in held
    ]


def _unrecorded_attempts(
    listing: Mapping[str, frozenset[str]],
    planned: dict[int, tuple[int, PlannedRun]],
    folders: dict[str, int],
    finals: dict[int, str],
) -> tuple[list[str], list[tuple[str, int]]]:
    """The run folders without a record that no stop explains, named; and those a stop may
    explain (after the last run with a final record), with their runs, for a closer look."""
    latest = max((planned[r][0] for r in finals if r in planned), default=-1)
    recorded_attempt: dict[int, int] = {}
    for log_dir in folders:
        run_id, attempt = _attempt_of(log_dir)
        if run_id is not None:
            recorded_attempt[run_id] = max(recorded_attempt.get(run_id, 0), attempt)
    out, stopped = [], []
    for rel in sorted(listing):
        if rel in folders:
            continue
        run_id, attempt = _attempt_of(rel)
        if run_id is None or run_id not in planned:
            out.append(f"{rel}: a run folder that no planned run owns")
            continue
        retried = recorded_attempt.get(run_id, 0) > attempt
        stopped_in = planned[run_id][0] > latest  # no final record of a later run yet
        if retried or not listing[rel]:
            continue
        if stopped_in:
            stopped.append((rel, run_id))
        else:
            out.append(f"{rel}: run {run_id}'s logs, with no record in {RECORDS}")
    return out, stopped


def _attempt_of(log_dir: str) -> tuple[int | None, int]:
    try:
        _, folder, attempt = log_dir.split("/")
        return int(folder.split("-", 1)[0]), int(attempt.removeprefix("attempt-"))
    except ValueError:
        return None, 0

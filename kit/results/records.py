"""A finished run's record, typed: what `runs.jsonl` keeps, one line a run, fsynced (D6).

The engine writes the envelope every run has (its id, folder, clock, exit, status, files); a
series or a check adds what it knows of the planned run (`run`: its configuration, round,
kind, ...) and of its judgement (`judged`: the step time, the final loss, a separate record's
fields), each under its own name, so a line is read by its keys' names and never by their
order (`jq -S` sorts them). `from_json` upgrades an older schema and refuses a newer one.

Schema 4 (this kit):
    {"schema_version": 4, "run_id": 3, "run": {"config": ..., "round": 1, "kind": "timed", ...},
     "log_dir": ..., "started_utc": ..., "start_ns": ..., "end_ns": ..., "exit_code": 0,
     "stopped": null, "status": "ok", "reason": "", "judged": {"step_s": ..., ...},
     "executor": "local", "files": {...}, "conditions": {"machine": {...}}}
with what the run's conditions came to over its timed window (`kit.results.run_conditions`),
worked out once when it ended; schema 3 is the same without them (None: the report reads the
raw files), and schema 2 as 3 with its version under "schema". Schema 1 held the run's and the
judgement's fields flat beside the envelope's; schema 0, as schema 1 without "schema", "kind"
(a timed run) and "stopped" (the kit did not stop it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kit.errors import UserError
from kit.status import RunStatus

RECORD_SCHEMA = 4  # 4: as 3, with the run's conditions; 3: as 2, its version's key renamed
RUN, JUDGED = "run", "judged"  # schema 2: the planned run's fields, the judgement's fields
# the envelope: what the engine writes of every run, whatever its kind
_ENVELOPE = frozenset(
    ("schema_version", "schema", "run_id", "log_dir", "started_utc", "start_ns", "end_ns",
     "exit_code", "stopped", "status", "reason", "executor", "files", "outputs", "isolation",
     "outlived", "non_finite", "stderr_cut", "conditions")
)  # fmt: skip
_KNOWN = _ENVELOPE | {RUN, JUDGED}  # every field of a record of schema 2 and later
# "non_finite": each value JSON cannot hold (NaN, an infinity) by its dotted path, with what it
# was; the value itself is stored as null (kit.results.store.finite)
# Schema 1's judgement, by name: every field a schema-1 kit wrote after the reason (a timed
# run's judgement; a profiled run's kernel table; a graph-break run's counts). Schema 1 is
# history, so this list is closed; its every other field was the planned run's.
_JUDGED_V1 = frozenset(
    ("step_s", "own_step_s", "final_loss", "graph_breaks", "kernels", "kernel_table_error",
     "nsys_stats_exit_code", "nsys", "nsys_from")
)  # fmt: skip


@dataclass(frozen=True)
class RunRecord:
    run_id: int
    log_dir: str  # runs/<id>-<config>/attempt-<k>, relative to the results directory
    started_utc: str
    status: RunStatus | str
    reason: str  # why it is not ok; empty when ok
    executor: str  # "local" or "docker"
    start_ns: int | None = None  # the program's start and end on the outside clock (§5)
    end_ns: int | None = None
    exit_code: int | None = None  # negative: killed by that signal
    stopped: str | None = None  # why the kit stopped it (a stall, the whole-run limit)
    files: Mapping[str, str] = field(default_factory=dict)  # raw file -> SHA-256
    head: Mapping[str, Any] = field(default_factory=dict)  # the kind's: config, round, kind, ...
    judged: Mapping[str, Any] = field(default_factory=dict)  # the kind's: step_s, final_loss, ...
    outputs: Mapping[str, Any] | None = None  # what a run made for later runs (a shared start)
    # what kept the run from the other side's files: "container", "namespaces: ...", "none..."
    # (kit.executors.base.RunOutcome); None: not recorded (an older kit, a run not run)
    isolation: str | None = None
    outlived: str | None = None  # the processes that outlived the program, stopped, in words
    # where its stderr was cut at timing.stderr_cap_bytes: {"kept_bytes", "seen_bytes"}
    stderr_cut: Mapping[str, int] | None = None
    # what its conditions came to (kit.results.run_conditions); None: a kit that kept none
    conditions: Mapping[str, Any] | None = None

    # -- the fields every kind gives -----------------------------------------------------------

    @property
    def config(self) -> str:
        return str(self.head.get("config", ""))

    @property
    def kind(self) -> str:
        """The planned run's kind; a record from before kinds were kept was a timed run."""
        return str(self.head.get("kind", "timed"))

    @property
    def discarded(self) -> bool:
        return bool(self.head.get("discarded", False))

    @property
    def step_s(self) -> float | None:
        """§5's step time, for a timed run judged ok; None otherwise."""
        return self.judged.get("step_s")

    @property
    def batch_size(self) -> int | None:
        """The batch it ran at (amendment 5.1); None: the model's own."""
        return self.head.get("batch_size")

    # what the engine knows of the run itself, beside the record in its folder (run.json):
    # `verify` compares each with the raw file
    RAN = (
        "started_utc", "start_ns", "end_ns", "exit_code", "stopped", "executor", "stderr_cut",
        "isolation", "outlived",
    )  # fmt: skip

    def ran(self) -> dict[str, Any]:
        """run.json's content: the run's start, end, exit and executor, as recorded."""
        ran = {name: getattr(self, name) for name in self.RAN}
        ran["stderr_cut"] = None if self.stderr_cut is None else dict(self.stderr_cut)
        return {"schema_version": 1, **ran}

    # -- the file -------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema_version": RECORD_SCHEMA,
            "run_id": self.run_id,
            RUN: dict(self.head),
            "log_dir": self.log_dir,
            "started_utc": self.started_utc,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "exit_code": self.exit_code,
            "stopped": self.stopped,
            "status": self.status,
            "reason": self.reason,
            JUDGED: dict(self.judged),
            "executor": self.executor,
            "files": dict(self.files),
        }
        if self.outputs is not None:
            out["outputs"] = dict(self.outputs)
        if self.isolation is not None:
            out["isolation"] = self.isolation
        if self.outlived is not None:
            out["outlived"] = self.outlived
        if self.stderr_cut is not None:
            out["stderr_cut"] = dict(self.stderr_cut)
        if self.conditions is not None:
            out["conditions"] = dict(self.conditions)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "runs.jsonl") -> RunRecord:
        """A line of runs.jsonl, read by its keys' names. Schema 1 (the run's and the
        judgement's fields flat beside the envelope's) is upgraded, and schema 0 (no "schema"
        yet) too: its lines lacked the run's kind (a timed run) and why the kit stopped it (it
        did not)."""
        schema = d.get("schema_version", d.get("schema", 0))
        if not isinstance(schema, int) or schema > RECORD_SCHEMA:
            raise UserError(
                f"{where} is a run record of schema {schema!r}; this kit reads schema "
                f"{RECORD_SCHEMA} and older",
                "read it with the kit version named in the directory's manifest.json",
            )
        try:
            if schema >= 2:
                unknown = d.keys() - _KNOWN
                if unknown:
                    raise ValueError(f"unknown field {sorted(unknown)[0]!r}")
                head, judged = d[RUN], d.get(JUDGED, {})
                if not isinstance(head, Mapping) or not isinstance(judged, Mapping):
                    raise TypeError(f'"{RUN}" and "{JUDGED}" are objects')
                head, judged = dict(head), dict(judged)
            else:
                fields = {k: v for k, v in d.items() if k not in _ENVELOPE}
                head = {k: v for k, v in fields.items() if k not in _JUDGED_V1}
                judged = {k: v for k, v in fields.items() if k in _JUDGED_V1}
            if schema == 0:
                head.setdefault("kind", "timed")
            return cls(
                run_id=int(d["run_id"]),
                log_dir=str(d["log_dir"]),
                started_utc=str(d.get("started_utc", "")),
                status=str(d["status"]),
                reason=str(d.get("reason") or ""),
                executor=str(d.get("executor", "")),
                start_ns=d.get("start_ns"),
                end_ns=d.get("end_ns"),
                exit_code=d.get("exit_code"),
                stopped=d.get("stopped"),
                files=dict(d.get("files") or {}),
                head=head,
                judged=judged,
                outputs=d.get("outputs"),
                isolation=d.get("isolation"),
                outlived=d.get("outlived"),
                stderr_cut=d.get("stderr_cut"),
                conditions=_conditions(d.get("conditions")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise UserError(
                f"{where} is not a run record as the kit writes one ({type(e).__name__}: {e})",
                "`micakit verify` names what changed; restore runs.jsonl from a copy",
            ) from None


def _conditions(value: object) -> dict[str, Any] | None:
    """A record's conditions: an object, or absent (a kit before schema 4)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError('"conditions" is an object')
    return dict(value)

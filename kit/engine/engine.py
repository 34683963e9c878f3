"""The one engine under a series (§5) and a correctness check (§7): a plan of runs, resumable.

A results directory is started by writing the protocol file, the plan and, last, the manifest
(§3 rule 1); a directory without a manifest never started. Running it means: become its one
writer, record the versions (rule 4), then run every planned run without a finished record, in
order. Each run is a fresh process started through the executor and read by the outside clock;
its record is appended (fsynced) only once it ended and was judged from its stamped logs, so a
plan stopped at any point resumes with every finished run kept and only the unfinished one run
again. What differs between a series and a check (what a run is, how it is judged, when the
plan goes on) is the `Kind`'s.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import datetime
import platform
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from kit import __version__, kit_commit
from kit.errors import (
    DirectoryDiffers,
    Interrupted,
    SeriesFailed,
    UserError,
    raise_if_stopped,
    sigterm_as_interrupt,
    writing,
)
from kit.executors import supervised
from kit.executors.base import Executor, RunOutcome, RunSpec
from kit.measure import clock, stamped
from kit.protocol.load import Protocol as ProtocolFile
from kit.results import store, trees
from kit.results.documents import Manifest, Plan, Versions, check_unchanged
from kit.results.records import RunRecord
from kit.results.store import ResultsDir
from kit.sides.side import RunContext, Side


class Planned(Protocol):
    """A planned run: its fixed place in the plan, and how plan.json writes it."""

    @property
    def run_id(self) -> int: ...

    def to_json(self) -> dict: ...


R = TypeVar("R", bound=Planned)


@dataclass(frozen=True)
class Judged:
    """A run judged from its raw logs: what its record says of it beside the engine's fields."""

    status: str
    reason: str
    fields: dict[str, Any] = field(default_factory=dict)  # recorded after the reason
    outputs: dict[str, str] | None = None  # files it made outside its folder, with SHA-256
    # what its conditions came to (kit.results.run_conditions); None: the kind keeps none
    conditions: dict[str, Any] | None = None


class Kind(abc.ABC, Generic[R]):
    """What one kind of plan (a series, a check) decides about its runs; the engine does the rest.

    The defaults suit a plan that stops at its first unfinished run and says nothing as it goes.
    """

    noun: ClassVar[str]  # "series", "check": in what the engine says
    command: ClassVar[str]  # the `micakit` command that resumes it
    manifest_kind: ClassVar[str | None] = None  # the manifest's kind, where it has one
    stop_rule: ClassVar[str] = ""  # the rule that stops the plan at a failed run

    @abc.abstractmethod
    def slug(self, run: R) -> str:
        """The run's folder name under runs/."""

    @abc.abstractmethod
    def title(self, run: R) -> str:
        """The run as its failure names it: "run 3 of …"."""

    @abc.abstractmethod
    def head(self, run: R) -> dict[str, Any]:
        """The record's fields about the planned run, written after its run_id."""

    @abc.abstractmethod
    def run_spec(self, run: R, log_dir: Path) -> RunSpec | Judged:
        """The run's command; or, for a run that is not run, its record's judgement."""

    @abc.abstractmethod
    def judge(self, run: R, spec: RunSpec, outcome: RunOutcome, log_dir: Path) -> Judged:
        """The run from its exit code and stamped logs."""

    @abc.abstractmethod
    def done(self, record: RunRecord) -> bool:
        """A record that needs no other run; a run that ends otherwise stops the plan."""

    def around(self, run: R, log_dir: Path) -> contextlib.AbstractContextManager[None]:
        """What holds while the executor runs it (the card's conditions, a scratch folder)."""
        return contextlib.nullcontext()

    def passed_over(self, run: R, latest: Mapping[int, RunRecord]) -> bool:
        """A run left out of this pass though it has no finished record."""
        return False

    def after(self, run: R, record: RunRecord) -> bool:
        """Once its record is appended; True when the plan must be run again from the start."""
        return False

    def planned(self, done: set[int]) -> None:
        """Before the first run of this start: the runs already done."""

    def started(self, run: R, position: int) -> None:
        """A run begins (progress)."""

    def prepare(self) -> None:
        """After the versions, before the first run."""


class Engine(Generic[R]):
    """A plan of runs bound to its results directory, protocol file, executor and kind."""

    def __init__(
        self,
        rd: ResultsDir,
        protocol: ProtocolFile,
        executor: Executor,
        plan: Sequence[R],
        kind: Kind[R],
    ) -> None:
        self.rd, self.protocol, self.executor = rd, protocol, executor
        self.plan, self.kind = plan, kind

    # -- starting and resuming ----------------------------------------------------------------

    def write_start(
        self,
        argv: list[str],
        plan: Mapping[str, Any],
        manifest: Mapping[str, Any],
        beside: Mapping[str, str] | None = None,
    ) -> None:
        """The protocol file, the files read beside it, the plan, then the manifest, all before
        the first run (§3 rule 1). The manifest comes last: a directory without one never
        started, and the same command starts it again. `plan` and `manifest` are the kind's own
        fields of each (a series' configurations; its spec and options)."""
        with writing(self.rd.root, elsewhere="--out"):
            self.rd.write_text(store.PROTOCOL, self.protocol.path.read_text("utf-8"))
            for name, text in (beside or {}).items():
                self.rd.write_text(name, text)
            self.rd.write_json(store.PLAN, Plan.of(self.order(), **plan).to_json())
            self.rd.write_json(store.MANIFEST, self._manifest(argv, manifest).to_json())

    def _manifest(self, argv: list[str], fields: Mapping[str, Any]) -> Manifest:
        p = self.protocol
        return Manifest(
            kind=self.kind.manifest_kind,
            kit_version=__version__,
            kit_commit=kit_commit(),
            protocol_name=p.name,
            protocol_sha256=p.sha256,
            amendments_in_force=tuple(a.number for a in p.amendments),
            command=tuple(argv),
            date_utc=now(),
            host=self.executor.host(),
            platform=platform.platform(),
            python=sys.version.split()[0],
            executor=self.executor.name,
            executor_versions=self.executor.versions(),
            **fields,
        )

    def order(self) -> list[dict]:
        return [r.to_json() for r in self.plan]

    def check_resume(self) -> None:
        """Resume only what this directory was: the same protocol file, the same plan."""
        recorded, p, noun = self.rd.manifest().protocol_sha256, self.protocol, self.kind.noun
        if recorded != p.sha256:
            raise UserError(
                f"{self.rd.root} started under a protocol file with SHA-256 {recorded[:12]}…, "
                f"and {p.path} has {p.sha256[:12]}…: a {noun} never changes protocol midway",
                f"resume with the protocol it started under: --protocol "
                f"{self.rd.root / store.PROTOCOL}",
            )
        if self.rd.plan().order_json() != self.order():
            raise UserError(
                f"the planned runs of {self.rd.root} differ from what this kit plans now",
                "resume with the kit version named in its manifest.json",
            )
        self.rd.check_raw_files()

    def record_versions(
        self, card_info: dict, sides: Mapping[str, Side], ctx: RunContext, images: bool = False
    ) -> None:
        """Rule 4: the versions, recorded before the first run and unchanged at every resume;
        with `images`, the measured images' ids and digests too, and the runner image the kit
        runs in, if any (rerun.sh)."""
        scratch = self.rd.root / "work" / "versions"
        started = (self.rd.root / store.VERSIONS).exists()
        if not started and self.rd.records():
            # runs were recorded under versions now gone: none are written beside them (D6)
            raise UserError(
                f"{self.rd.root} holds {len(self.rd.records())} run records but its "
                f"{store.VERSIONS} is missing: the versions its runs were measured with are "
                "gone, and no resume records others beside them",
                f"restore {store.VERSIONS} from the directory's copy, or start anew in a new "
                "directory (--out)",
            )
        before = self.rd.versions()
        found = collect(
            kit_commit(),
            card_info,
            self.executor,
            {
                name: side.versions(ctx, scratch / name, before.sides.get(name))
                for name, side in sides.items()
            },
        )
        on = self.executor.images
        if images and on is not None:
            measured = {n: on.info(s.image) for n, s in sides.items() if s.image}
            runner = on.runner()
            if runner:
                measured["runner"] = runner  # the kit's own image, where it runs in one
            if measured:
                # the images' ids and registry digests (rerun.sh)
                found = dataclasses.replace(found, images=measured)
        shutil.rmtree(scratch, ignore_errors=True)
        if started:
            check_unchanged(before.to_json(), found.to_json(), on.id_of if on else None)
        else:
            self.rd.write_json(store.VERSIONS, found.to_json())

    # -- running ------------------------------------------------------------------------------

    def latest(self) -> dict[int, RunRecord]:
        """Each run's last record (an attempt run again replaces the earlier one)."""
        return {r.run_id: r for r in self.rd.runs()}

    def done(self) -> set[int]:
        return {i for i, r in self.latest().items() if self.kind.done(r)}

    def run(self) -> None:
        """Every planned run without a finished record, in the planned order."""
        self.rd.lock(f"a {self.kind.noun}")  # one writer (kit.results.lock); the CLI may hold it
        # a full disk names itself; the run it stopped has no record and runs again on resume
        with sigterm_as_interrupt(), writing(self.rd.root, elsewhere="--out"):
            self.rd.cut_torn()  # the record it stopped while writing: its run is run again
            self.kind.planned(self.done())
            self.executor.sweep()
            self.kind.prepare()
            while self._pass():
                pass
            self._inputs_unchanged()  # the last run's, too

    def _pass(self) -> bool:
        """One pass over the plan; True when the kind asks for another."""
        latest = self.latest()
        done = {i for i, r in latest.items() if self.kind.done(r)}
        for position, run in enumerate(self.plan):
            if run.run_id in done or self.kind.passed_over(run, latest):
                continue
            raise_if_stopped()  # a stop whose exception was lost on its way: this run waits
            self._inputs_unchanged()
            record = latest[run.run_id] = self._run_one(run, position)
            if self.kind.after(run, record):
                return True  # the plan runs again (a halved batch): this record is not current
            if not self.kind.done(record):
                raise SeriesFailed(
                    self._failure(run, record),
                    f"fix the cause shown above{supervised.hidden_hint(record, self.rd.root)}, "
                    f"then `micakit {self.kind.command} --resume {self.rd.root}`",
                )
        return False

    def _inputs_unchanged(self) -> None:
        """nanoGPT's trees and the files the manifest names, hashed again before every run: a
        run that edited the code the other side runs stops the plan at the next one."""
        changed = trees.changed(self.rd.root, self.rd.manifest().inputs_sha256)
        if changed:
            raise DirectoryDiffers(
                f"what this {self.kind.noun} measures changed since it started, so it stops "
                f"here: {'; '.join(changed[:5])}",
                "the run before this point changed it (its record and logs are kept); restore "
                f"the files from a copy and `micakit {self.kind.command} --resume "
                f"{self.rd.root}`, or start anew elsewhere (--out)",
            )

    def _run_one(self, run: R, position: int) -> RunRecord:
        log_dir = self.rd.new_attempt_dir(run.run_id, self.kind.slug(run))
        self.kind.started(run, position)
        started = now()
        made = self.kind.run_spec(run, log_dir)
        outcome: RunOutcome | None = None
        if isinstance(made, Judged):
            judged = made
            # a raw file, so the record's judgement is checked against the folder (verify) and a
            # folder that lost its record still shows the run was done with
            note = {"schema_version": 1, "status": judged.status, "reason": judged.reason}
            store.write_json(log_dir / store.NOT_RUN, note)
        else:
            # a hang is stopped at the protocol's stall limit and fails like any other failure;
            # the run sees nothing of the results directory but its own mounts
            t = self.protocol.timing
            spec = dataclasses.replace(
                made,
                stall_s=t.stall_s,
                stderr_cap_bytes=t.stderr_cap_bytes,
                confine=(self.rd.root.resolve(),),
            )
            command = {"schema_version": 1, "argv": list(spec.argv), "env": spec.env}
            store.write_json(log_dir / "command.json", command)
            try:
                with self.kind.around(run, log_dir):
                    outcome = self.executor.run(spec, log_dir)
                judged = self.kind.judge(run, spec, outcome, log_dir)
            except KeyboardInterrupt:
                raise Interrupted(spec.label) from None
        return self._record(run, log_dir, started, outcome, judged)

    def _record(
        self, run: R, log_dir: Path, started: str, outcome: RunOutcome | None, judged: Judged
    ) -> RunRecord:
        """The run's record, appended: the only write of a run. What the record says of the
        run's start and end is written into its folder first (RUN_FILE), hashed with its logs,
        so `verify` compares each such field of the record with the raw file (D6)."""
        record = RunRecord(
            run_id=run.run_id,
            head=self.kind.head(run),
            log_dir=self.rd.rel(log_dir),
            started_utc=started,
            start_ns=outcome.start_ns if outcome else None,
            end_ns=outcome.end_ns if outcome else None,
            exit_code=outcome.exit_code if outcome else None,
            stopped=outcome.stopped if outcome else None,
            status=judged.status,
            reason=judged.reason,
            judged=judged.fields,
            executor=self.executor.name,
            outputs=judged.outputs,
            isolation=outcome.isolation if outcome else None,
            outlived=outcome.outlived if outcome else None,
            stderr_cut=clock.stderr_cut(log_dir / "stderr.log") if outcome else None,
            conditions=judged.conditions,
        )
        store.write_json(log_dir / store.RUN_FILE, record.ran())
        record = dataclasses.replace(record, files=self.hashes(log_dir))
        with writing(self.rd.root / store.RECORDS, elsewhere="--out"):  # names runs.jsonl
            self.rd.append_record(record)
        return record

    def hashes(self, folder: Path, leave_out: str | None = None) -> dict[str, str]:
        """Every file under `folder` (but those under a folder named `leave_out`), by its path in
        the results directory, with its SHA-256."""
        return {
            self.rd.rel(p): store.sha256_file(p)
            for p in sorted(folder.rglob("*"))
            if p.is_file() and leave_out not in p.relative_to(folder).parts
        }

    def _failure(self, run: R, record: RunRecord) -> str:
        shown = stamped.tail_block(self.rd.root / record.log_dir)
        rule = f" ({self.kind.stop_rule})" if self.kind.stop_rule else ""
        # the exit code once: a reason that already is it ("exit code 1") is not said twice
        code = f"exit code {record.exit_code}"
        said = record.reason if code in record.reason else f"{record.reason} ({code})"
        return (
            f"{self.kind.title(run)} failed: {said}; the {self.kind.noun} stops here{rule}.\n"
            f"  the tail of its output ({record.log_dir}):\n{shown}\n"
            f"  every finished run is kept; once the cause is fixed, "
            f"`micakit {self.kind.command} --resume {self.rd.root}` runs this one again"
        )


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def collect(
    commit: str, card: Mapping[str, Any], executor: Executor, sides: Mapping[str, Any]
) -> Versions:
    return Versions(
        kit={"version": __version__, "commit": commit},
        card=card,
        executor={"name": executor.name, **executor.versions()},
        sides=sides,
    )

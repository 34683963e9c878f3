"""A series (§5): every configuration's discarded run, then the timed rounds, resumable.

The engine is the same for every executor and side: it asks a side for a run's command, an
executor to run it under the outside clock, judges the run from its stamped logs alone, and
appends one record. A run's record is written only once the run has ended, so a series stopped
at any point resumes with every finished run kept and only the unfinished one run again.
"""

from __future__ import annotations

import dataclasses
import datetime
import platform
import shutil
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit import __version__
from kit.engine import separate as extras
from kit.engine import store, versions
from kit.engine.conditions import CardConditions
from kit.engine.scheduler import GRAPH_BREAKS, PROFILE, PYTORCH, Config, PlannedRun, plan
from kit.engine.store import ResultsDir
from kit.errors import Interrupted, SeriesFailed, UserError
from kit.executors.base import Executor
from kit.executors.docker import footprint
from kit.measure import timing
from kit.protocol.load import Protocol
from kit.report import separate as sidetables
from kit.sides.side import RunContext, Side

RECORD_SCHEMA = 1
# a run with one of these is never run again
DONE = (timing.OK, timing.OOM, timing.VOID, extras.NOT_PROFILED)
SEPARATE = (PROFILE, GRAPH_BREAKS)
ADJUSTMENTS = store.ADJUSTMENTS  # amendment 5.1: a model whose batch this series halved


@dataclass(frozen=True)
class SeriesSpec:
    """What a series measures; saved in the manifest and taken from it on resume."""

    models: tuple[str, ...]
    precisions: tuple[str, ...]
    device: str  # cuda or cpu
    card: str  # the card's name as NVML gives it, or "cpu"
    compute_capability: float | None = None
    smoke: bool = False
    sides: tuple[str, ...] = ("pytorch", "contender")
    separate_records: bool = True  # §6: profiled runs and graph-break runs after the rounds
    extra: dict[str, Any] = field(default_factory=dict)  # side inputs: paths, hashes, images


class Hooks:
    """What a series reports as it goes. The default says nothing; the CLI shows progress."""

    def planned(self, configs: list[Config], order: list[PlannedRun], done: set[int]) -> None:
        pass

    def run_started(self, run: PlannedRun, config: Config, position: int, total: int) -> None:
        pass

    def run_finished(self, run: PlannedRun, record: dict) -> None:
        pass

    def message(self, text: str) -> None:
        pass


def configurations(
    protocol: Protocol, spec: SeriesSpec, sides: list[Side]
) -> tuple[list[Config], list[dict]]:
    """The series' configurations in their fixed order, and what is recorded as not measured."""
    configs: list[Config] = []
    not_measured: list[dict] = []
    for model in spec.models:
        protocol.model(model)
        for precision in spec.precisions:
            protocol.check_precision(precision)
            need = protocol.precisions.min_compute_capability.get(precision)
            cc = spec.compute_capability
            if need is not None and cc is not None and cc < need:
                # D3: bfloat16 below compute capability 8.0 is emulated, so not measured
                not_measured.append(
                    {
                        "model": model,
                        "precision": precision,
                        "why": f"emulated, not measured (compute capability {cc} < {need})",
                    }
                )
                continue
            for side in sides:
                for variant, _primary in side.variants(protocol, precision, spec.smoke):
                    configs.append(Config(spec.card, model, precision, side.name, variant))
    if not configs:
        raise UserError(
            "this series has no configuration to run",
            "name at least one model and precision that the card can measure",
        )
    return configs, not_measured


class Series:
    """A series bound to its results directory, protocol, sides and executor."""

    def __init__(
        self,
        rd: ResultsDir,
        protocol: Protocol,
        spec: SeriesSpec,
        sides: list[Side],
        executor: Executor,
        ctx: RunContext,
        hooks: Hooks | None = None,
        conditions: CardConditions | None = None,
        card_info: dict | None = None,
    ) -> None:
        self.rd = rd
        self.protocol = protocol
        self.spec = spec
        self.sides = {s.name: s for s in sides}
        self.executor = executor
        self.ctx = ctx
        self.hooks = hooks or Hooks()
        self.conditions = conditions
        self.card_info = card_info or {"name": spec.card}
        self.configs, self.not_measured = configurations(protocol, spec, sides)
        self.by_id = {c.id: c for c in self.configs}
        runs = protocol.smoke.runs if spec.smoke else protocol.timing.runs
        discarded = protocol.smoke.discarded_runs if spec.smoke else protocol.timing.discarded_runs
        separate = []
        if spec.separate_records:
            ids = [c.id for c in self.configs]
            compiled = [c.id for c in self.configs if c.side == PYTORCH and c.variant != "eager"]
            separate = [(PROFILE, ids), (GRAPH_BREAKS, compiled)]
        self.order = plan(self.configs, runs, discarded, separate)

    # -- starting and resuming --------------------------------------------------------------

    def write_start(self, argv: list[str], options: dict[str, Any] | None = None) -> None:
        """The protocol file, the plan, then the manifest, all before the first run (§3 rule 1).

        The manifest comes last: a directory without one never started, and is started again.
        """
        manifest = {
            "schema": store.SCHEMA,
            "kit_version": __version__,
            "kit_commit": versions.kit_commit(),
            "protocol_name": self.protocol.name,
            "protocol_sha256": self.protocol.sha256,
            "amendments_in_force": [a.number for a in self.protocol.amendments],
            "command": argv,
            "date_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "host": self.executor.host(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "executor": self.executor.name,
            "executor_versions": self.executor.versions(),
            "series": dataclasses.asdict(self.spec),
            "options": options or {},
            "inputs_sha256": self.inputs_sha256(),
        }
        self.rd.write_text(store.PROTOCOL, self.protocol.path.read_text("utf-8"))
        families = self.protocol.beside(sidetables.FAMILIES)
        if families.exists():
            # §6: the rules file fixed before the first series travels with the results
            self.rd.write_text(sidetables.FAMILIES, families.read_text("utf-8"))
        self.rd.write_json(store.PLAN, self.plan_json())
        self.rd.write_json(store.MANIFEST, manifest)

    def inputs_sha256(self) -> dict[str, str]:
        """Every file beside the protocol that the series reads, by name, with its SHA-256.

        D6 and §3 rule 1: the protocol file's hash alone does not fix the families' rules
        (§6), nanoGPT's patch (§4) or the models' configuration file (amendment 4.4).
        """
        p = self.protocol
        names = [sidetables.FAMILIES, p.nanogpt.patch]
        names += [m.config for m in p.models.values()]
        out = {}
        for name in dict.fromkeys(names):
            path = p.beside(name)
            if path.is_file():
                out[name] = store.sha256_file(path)
        return out

    def plan_json(self) -> dict:
        return {
            "schema": store.SCHEMA,
            "configurations": [c.to_json() for c in self.configs],
            "primary": {c.id: self._primary(c) for c in self.configs},
            "not_measured": self.not_measured,
            "order": [r.to_json() for r in self.order],
        }

    def _primary(self, config: Config) -> bool:
        side = self.sides[config.side]
        variants = dict(side.variants(self.protocol, config.precision, self.spec.smoke))
        return variants.get(config.variant, True)

    def check_resume(self) -> None:
        """Resume only what this series was: same protocol file, same plan."""
        manifest = self.rd.manifest()
        if manifest["protocol_sha256"] != self.protocol.sha256:
            raise UserError(
                f"{self.rd.root} was measured under a protocol file with SHA-256 "
                f"{manifest['protocol_sha256'][:12]}…, and {self.protocol.path} has "
                f"{self.protocol.sha256[:12]}…: a series never changes protocol midway",
                f"resume with the protocol it started under: --protocol "
                f"{self.rd.root / store.PROTOCOL}",
            )
        saved = self.rd.read_json(store.PLAN)
        if saved["order"] != [r.to_json() for r in self.order]:
            raise UserError(
                f"the planned runs of {self.rd.root} differ from what this kit plans now",
                "resume with the kit version named in its manifest.json",
            )
        self.rd.check_raw_files()

    # -- running ------------------------------------------------------------------------

    def latest_records(self) -> dict[int, dict]:
        latest: dict[int, dict] = {}
        for r in self.rd.records():
            latest[r["run_id"]] = r
        return latest

    def run(self) -> None:
        """Run every planned run that has no finished record yet, in the planned order."""
        self.rd.lock()  # one writer (kit.engine.lock); taken already where the CLI made it
        self.hooks.planned(self.configs, self.order, self._done())
        self.executor.sweep()
        self._versions()
        self._footprint()
        with sigterm_as_interrupt():
            while self._pass():
                pass

    def _current(self, record: dict) -> bool:
        """A record counts only if it ran at its model's batch now in force (amendment 5.1)."""
        model = self.by_id[record["config"]].model
        return record.get("batch_size") == self.batches().get(model)

    def _done(self) -> set[int]:
        latest = self.latest_records()
        return {i for i, r in latest.items() if r["status"] in DONE and self._current(r)}

    def _pass(self) -> bool:
        """One pass over the plan; True when a batch was halved and the plan must run again."""
        latest = self.latest_records()
        done = self._done()
        stopped = {
            r["config"]: r["run_id"]
            for r in latest.values()
            if r["status"] == timing.OOM and r.get("kind") not in SEPARATE and self._current(r)
        }
        for position, planned in enumerate(self.order):
            if planned.run_id in done:
                continue
            if planned.config in stopped:
                continue  # amendment 8.1: out of memory runs no further
            record = self._run_one(planned, position)
            if record["status"] == timing.OOM and planned.kind not in SEPARATE:
                stopped[planned.config] = planned.run_id
                self.hooks.message(
                    f"{planned.config}: out of memory in run {planned.run_id}; "
                    "recorded, and the series goes on (amendment 8)"
                )
                if planned.discarded and self._halve_if_no_mode_fits(planned):
                    return True
            elif record["status"] == timing.FAILED:
                raise SeriesFailed(
                    self._failure_message(planned, record),
                    f"fix the cause shown above, then `micakit series --resume {self.rd.root}`",
                )
        return False

    # -- amendment 5.1: a batch that no mode of a side can hold -------------------------------

    def batches(self) -> dict[str, int]:
        """The models whose batch this series halved, and the batch they train now."""
        path = self.rd.root / ADJUSTMENTS
        if not path.exists():
            return {}
        return {m: a["batch_size"] for m, a in self.rd.read_json(ADJUSTMENTS).items()}

    def _halve_if_no_mode_fits(self, planned: PlannedRun) -> bool:
        """Amendment 5.1: a side holds the batch when any of its modes trains it; when a side's
        every mode ran out of memory in float32, the batch halves for both sides."""
        config = self.by_id[planned.config]
        model = self.protocol.model(config.model)
        if not model.halve_batch_when_no_mode_fits or config.precision != "float32":
            return False
        latest = self.latest_records()
        for side in self.sides:
            ids = [
                c.id
                for c in self.configs
                if c.model == config.model and c.precision == "float32" and c.side == side
            ]
            first = {r.config: r.run_id for r in self.order if r.discarded and r.config in ids}
            outcomes = [latest.get(first[c]) for c in ids]
            if ids and all(o and o["status"] == timing.OOM and self._current(o) for o in outcomes):
                batch = self.batches().get(config.model, model.batch_size)
                adjustments = (
                    self.rd.read_json(ADJUSTMENTS) if (self.rd.root / ADJUSTMENTS).exists() else {}
                )
                adjustments[config.model] = {
                    "batch_size": batch // 2,
                    "because": f"no mode of the {side} side held a batch of {batch} in float32 "
                    f"(its discarded runs {sorted(first.values())} ran out of memory); the "
                    "batch halves for both sides (amendment 5.1)",
                }
                self.rd.write_json(ADJUSTMENTS, adjustments)
                self.hooks.message(f"{config.model}: {adjustments[config.model]['because']}")
                return True
        return False

    def _footprint(self) -> None:
        """§8: each measured image's size and file list, and the ratio of the two sizes."""
        images = {n: s.image for n, s in self.sides.items() if s.image}
        found = {}
        for name, ref in images.items():
            folder = self.rd.root / "footprint" / name
            if not (folder / "footprint.json").exists():
                self.hooks.message(f"footprint of {ref} (§8)")
                self.executor.footprint(ref, folder)
            found[name] = self.rd.read_json(f"footprint/{name}/footprint.json")
            base = found[name].get("labels", {}).get(footprint.BASE_LABEL)
            if base and not (folder / footprint.BASE / footprint.JSON_NAME).exists():
                # §8 told whole: the base's file list shows what the image adds beyond it
                self.hooks.message(f"footprint of {base}, the base of {ref} (§8)")
                try:
                    self.executor.footprint(base, folder / footprint.BASE)
                except UserError as e:  # a base no longer on the engine: the report says so
                    self.hooks.message(f"{base}: {e.message}; what {ref} adds is not told")
        if "pytorch" in found and "contender" in found:
            ratio = self.executor.footprint_ratio(found["contender"], found["pytorch"])
            self.rd.write_json("footprint/ratio.json", ratio)

    def _versions(self) -> None:
        """Rule 4: the versions, recorded before the first run and unchanged at every resume."""
        scratch = self.rd.root / "work" / "versions"
        path = self.rd.root / versions.VERSIONS
        before = self.rd.read_json(versions.VERSIONS) if path.exists() else {}
        found = versions.collect(
            versions.kit_commit(),
            self.card_info,
            self.executor,
            {
                name: side.versions(self.ctx, scratch / name, before.get(name))
                for name, side in self.sides.items()
            },
        )
        images = {
            name: self.executor.image_info(side.image)
            for name, side in self.sides.items()
            if side.image
        }
        runner = self.executor.runner_image()
        if runner:
            images["runner"] = runner  # the kit's own image, where it runs in one
        if images:
            found["images"] = images  # the images' ids and registry digests (rerun.sh)
        shutil.rmtree(scratch, ignore_errors=True)
        path = self.rd.root / versions.VERSIONS
        if path.exists():
            versions.check_unchanged(self.rd.read_json(versions.VERSIONS), found)
        else:
            self.rd.write_json(versions.VERSIONS, found)

    def _run_one(self, planned: PlannedRun, position: int) -> dict:
        config = self.by_id[planned.config]
        side = self.sides[config.side]
        label = f"run {planned.run_id} {config.id}"
        batch = self.batches().get(config.model)
        spec = side.spec(config, label, self.ctx, batch_size=batch)
        # amendment 2: which libraries the loader opened, during the discarded run; a hang is
        # stopped at the protocol's limits and fails like any other failure
        spec = dataclasses.replace(
            spec,
            trace_libraries=planned.discarded,
            stall_s=self.protocol.timing.stall_s,
            limit_s=self._limit_s(planned),
        )
        log_dir = self.rd.new_attempt_dir(planned.run_id, config.slug)
        self.hooks.run_started(planned, config, position, len(self.order))
        started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        separate = extras.prepare(planned.kind, spec, self.executor, log_dir)
        if separate.skip_reason:
            return self._record(planned, log_dir, started, None, separate.skip_reason)
        spec = separate.spec
        store.write_json(log_dir / "command.json", {"argv": list(spec.argv), "env": spec.env})
        try:
            with self.conditions.around(log_dir) if self.conditions else _nothing():
                outcome = self.executor.run(spec, log_dir)
            extra = extras.finish(planned.kind, spec, self.executor, log_dir, outcome)
        except KeyboardInterrupt:
            raise Interrupted(label) from None
        return self._record(planned, log_dir, started, outcome, None, extra)

    def _limit_s(self, planned: PlannedRun) -> float | None:
        """A timed run's whole-run limit: the protocol's factor times its configuration's
        discarded run (which compiled, loaded and warmed everything a timed run reuses), and
        never less than the stall limit."""
        if planned.kind != "timed":
            return None
        for r in reversed(self.rd.records()):
            usable = r.get("start_ns") is not None and r.get("end_ns") is not None
            if r["config"] == planned.config and r["discarded"] and usable:
                if r["status"] in (timing.OK, timing.VOID):
                    seconds = (r["end_ns"] - r["start_ns"]) / 1e9
                    t = self.protocol.timing
                    # never below the stall limit: a short run's few seconds of jitter are no hang
                    return max(t.run_limit_factor * seconds, t.stall_s)
        return None

    def _record(
        self,
        planned: PlannedRun,
        log_dir: Path,
        started: str,
        outcome,
        skip_reason: str | None,
        extra: dict | None = None,
    ) -> dict:
        """Judge a run from its raw logs and append its record (the only write of a run)."""
        config = self.by_id[planned.config]
        side = self.sides[config.side]
        if outcome is None:
            judged = timing.Outcome(extras.NOT_PROFILED, None, None, skip_reason or "")
        else:
            judged = extras.judge(
                planned.kind,
                outcome,
                side.grammar(self.protocol),
                self.protocol.timing,
            )
        record = {
            "schema": RECORD_SCHEMA,
            "run_id": planned.run_id,
            "config": planned.config,
            "round": planned.round,
            "kind": planned.kind,
            "discarded": planned.discarded,
            "batch_size": self.batches().get(config.model),
            "log_dir": self.rd.rel(log_dir),
            "started_utc": started,
            "start_ns": outcome.start_ns if outcome else None,
            "end_ns": outcome.end_ns if outcome else None,
            "exit_code": outcome.exit_code if outcome else None,
            "stopped": outcome.stopped if outcome else None,
            "status": judged.status,
            "reason": judged.reason,
            "step_s": judged.step_s,
            "own_step_s": judged.own_step_s,
            "final_loss": judged.final_loss,
            **(extra or {}),
            "executor": self.executor.name,
            "files": {
                self.rd.rel(p): store.sha256_file(p)
                for p in sorted(log_dir.rglob("*"))
                if p.is_file()
            },
        }
        self.rd.append_record(record)
        self.hooks.run_finished(planned, record)
        return record

    def _failure_message(self, planned: PlannedRun, record: dict) -> str:
        shown = timing.tail_block(self.rd.root / record["log_dir"])
        return (
            f"run {planned.run_id} of {planned.config} failed: {record['reason']} "
            f"(exit code {record['exit_code']}); the series stops here (amendment 8.4).\n"
            f"  the tail of its output ({record['log_dir']}):\n{shown}\n"
            f"  every finished run is kept; once the cause is fixed, "
            f"`micakit series --resume {self.rd.root}` runs this one again"
        )

    def complete(self) -> bool:
        latest = self.latest_records()
        done = self._done()
        stopped = {
            r["config"]
            for r in latest.values()
            if r["status"] == timing.OOM and r.get("kind") not in SEPARATE and self._current(r)
        }
        return all(r.run_id in done or r.config in stopped for r in self.order)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops a series the way Ctrl-C does: the unfinished run is rerun on resume."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (tests driving a series from a thread)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

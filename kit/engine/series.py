"""A series (§5): every configuration's discarded run, then the timed rounds, resumable.

The series is a plan of runs for the engine (`kit.engine.engine`), which starts, resumes, runs
and records it as it does a correctness check. What is the series' own: its configurations and
their rounds, a run's command from its side, its judgement by §5's window (and §6's separate
records), out of memory that stops a configuration (amendment 8) and the batch that halves when
no mode of a side holds it (amendment 5.1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit.engine import conditions, extras
from kit.engine.conditions import CardConditions, MachineConditions
from kit.engine.engine import Engine, Judged, Kind
from kit.engine.scheduler import aa_chosen, plan
from kit.errors import SeriesFailed, UserError
from kit.executors.base import Executor, RunOutcome, RunSpec
from kit.measure import timing
from kit.protocol.load import FAMILIES, Protocol
from kit.results import fields, store, trees
from kit.results.planned import (
    AA_KINDS,
    AA_TWIN,
    GRAPH_BREAKS,
    PROFILE,
    PYTORCH,
    SIDES,
    TIMED,
    Config,
    PlannedRun,
    twin_name,
)
from kit.results.records import RunRecord
from kit.results.store import ResultsDir
from kit.sides.side import RunContext, Side
from kit.status import FINAL

SEPARATE = (PROFILE, GRAPH_BREAKS)
NOT_TIMED = (*SEPARATE, *AA_KINDS)  # runs after the rounds: out of memory stops no configuration


def _buffered(record: RunRecord) -> bool:
    """A run void because its output left in bursts (§5's clock; kit.measure.timing)."""
    return record.status == timing.VOID and timing.is_buffered(record.reason)


@dataclass(frozen=True)
class SeriesSpec:
    """What a series measures; saved in the manifest and taken from it on resume."""

    models: tuple[str, ...]
    precisions: tuple[str, ...]
    device: str  # cuda or cpu
    card: str  # the card's name as NVML gives it, or "cpu"
    compute_capability: float | None = None
    smoke: bool = False
    sides: tuple[str, ...] = SIDES
    separate_records: bool = True  # §6: profiled runs and graph-break runs after the rounds
    aa: tuple[str, ...] = ()  # `--aa`: the configurations of the A/A rounds (primary, all, ids)
    extra: dict[str, Any] = field(default_factory=dict)  # side inputs: paths, hashes, images


class Hooks:
    """What a series reports as it goes. The default says nothing; the CLI shows progress."""

    def planned(self, configs: list[Config], order: list[PlannedRun], done: set[int]) -> None:
        pass

    def run_started(self, run: PlannedRun, config: Config, position: int, total: int) -> None:
        pass

    def run_finished(self, run: PlannedRun, record: RunRecord) -> None:
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


def files_beside(p: Protocol) -> list[str]:
    """The files beside the protocol file that a series reads, by the names the protocol gives
    them, each once and only where it is there: the families' rules (§6), nanoGPT's patch (§4)
    and the models' configuration files (amendment 4.4)."""
    names = [FAMILIES, p.nanogpt.patch, *(m.config for m in p.models.values())]
    return [name for name in dict.fromkeys(names) if p.beside(name).is_file()]


class Series(Kind[PlannedRun]):
    """A series bound to its results directory, protocol, sides and executor."""

    noun, command, stop_rule = "series", "series", "amendment 8.4"

    def __init__(
        self,
        rd: ResultsDir,
        protocol: Protocol,
        spec: SeriesSpec,
        sides: list[Side],
        executor: Executor,
        ctx: RunContext,
        hooks: Hooks | None = None,
        conditions: CardConditions | MachineConditions | None = None,
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
        primary = {c.id: self._primary(c) for c in self.configs}
        # the A/A rounds leave the protocol's plan as it was: they follow its timed rounds
        self.aa = aa_chosen(spec.aa, self.configs, primary)
        self.order = plan(self.configs, runs, discarded, separate, self.aa)
        self.engine = Engine(rd, protocol, executor, self.order, self)

    # -- starting and resuming --------------------------------------------------------------

    def write_start(self, argv: list[str], options: dict[str, Any] | None = None) -> None:
        """The protocol file, the families' rules, the plan, then the manifest (§3 rule 1)."""
        beside = {}
        families = self.protocol.beside(FAMILIES)
        if families.exists():
            # §6: the rules file fixed before the first series travels with the results
            beside[FAMILIES] = families.read_text("utf-8")
        plan_fields = {
            "configurations": [c.to_json() for c in self.configs],
            "primary": {c.id: self._primary(c) for c in self.configs},
            "not_measured": self.not_measured,
            **({"aa": self.aa} if self.aa else {}),
        }
        manifest = {
            "series": dataclasses.asdict(self.spec),
            "options": options or {},
            "inputs_sha256": self.inputs_sha256(),
        }
        self.engine.write_start(argv, plan_fields, manifest, beside)

    def inputs_sha256(self) -> dict[str, str]:
        """Every file beside the protocol that the series reads, by name, with its SHA-256.

        D6 and §3 rule 1: the protocol file's hash alone does not fix the families' rules
        (§6), nanoGPT's patch (§4) or the models' configuration file (amendment 4.4).
        """
        p = self.protocol
        named = {name: store.sha256_file(p.beside(name)) for name in files_beside(p)}
        listing = self.rd.root / trees.LISTING
        if listing.is_file():  # nanoGPT's trees, hashed again before every run and by `verify`
            named[trees.LISTING] = store.sha256_file(listing)
        return named

    def _primary(self, config: Config) -> bool:
        side = self.sides[config.side]
        variants = dict(side.variants(self.protocol, config.precision, self.spec.smoke))
        return variants.get(config.variant, True)

    def check_resume(self) -> None:
        """Resume only what this series was: same protocol file, same plan."""
        self.engine.check_resume()

    # -- running: what the engine asks of a series ------------------------------------------

    def run(self) -> None:
        """Run every planned run that has no finished record yet, in the planned order."""
        self.engine.run()

    def planned(self, done: set[int]) -> None:
        self.hooks.planned(self.configs, self.order, done)

    def prepare(self) -> None:
        self.engine.record_versions(self.card_info, self.sides, self.ctx, images=True)
        self._footprint()

    def _current(self, record: RunRecord) -> bool:
        """A record counts only if it ran at its model's batch now in force (amendment 5.1)."""
        model = self.by_id[record.config].model
        return record.batch_size == self.batches().get(model)

    def done(self, record: RunRecord) -> bool:
        # a run void for buffered output is run again: its program buffers every run alike
        return record.status in FINAL and self._current(record) and not _buffered(record)

    def _stopped(self, latest: Mapping[int, RunRecord]) -> set[str]:
        """Amendment 8.1: the configurations that ran out of memory, which run no further."""
        return {
            r.config
            for r in latest.values()
            if r.status == timing.OOM and r.kind not in NOT_TIMED and self._current(r)
        }

    def passed_over(self, run: PlannedRun, latest: Mapping[int, RunRecord]) -> bool:
        return run.config in self._stopped(latest)

    def after(self, run: PlannedRun, record: RunRecord) -> bool:
        """Amendment 8: out of memory is recorded and the series goes on; True when the batch
        was halved and the plan must run again (amendment 5.1)."""
        self.hooks.run_finished(run, record)
        if _buffered(record):
            raise self._buffered_stop(run, record)
        if record.status == timing.OOM and run.kind not in NOT_TIMED:
            self.hooks.message(
                f"{run.config}: out of memory in run {run.run_id}; "
                "recorded, and the series goes on (amendment 8)"
            )
            return run.discarded and self._halve_if_no_mode_fits(run)
        return False

    def _buffered_stop(self, run: PlannedRun, record: RunRecord) -> SeriesFailed:
        """§5's clock fails for every run of a program whose output is buffered, so the series
        stops at the first such run (its configuration's discarded run, as a rule) rather
        than void all its rounds. Exit 3, like any run that ends a series: the run is
        recorded, and `--resume` runs it again once the output leaves line by line."""
        return SeriesFailed(
            f"{self.title(run)} is void: {record.reason.partition('; fix:')[0]}; every run of "
            f"this program would be void alike, so the series stops here.\n"
            f"  its stamped output: {self.rd.root / record.log_dir / 'stdout.log'}",
            f"{timing.BUFFERED_FIX}; every finished run is kept, and "
            f"`micakit series --resume {self.rd.root}` runs this one again (a changed "
            "program is a new contender: start a new series with it)",
        )

    def slug(self, run: PlannedRun) -> str:
        return self.by_id[run.config].slug

    def title(self, run: PlannedRun) -> str:
        return f"run {run.run_id} of {twin_name(run.config) if run.kind == AA_TWIN else run.config}"

    def head(self, run: PlannedRun) -> dict[str, Any]:
        return {
            "config": run.config,
            "round": run.round,
            "kind": run.kind,
            "discarded": run.discarded,
            "batch_size": self.batches().get(self.by_id[run.config].model),
        }

    # -- amendment 5.1: a batch that no mode of a side can hold -------------------------------

    def batches(self) -> dict[str, int]:
        """The models whose batch this series halved, and the batch they train now."""
        return self.rd.batches()

    def _halve_if_no_mode_fits(self, planned: PlannedRun) -> bool:
        """Amendment 5.1: a side holds the batch when any of its modes trains it; when a side's
        every mode ran out of memory in float32, the batch halves for both sides."""
        config = self.by_id[planned.config]
        model = self.protocol.model(config.model)
        if not model.halve_batch_when_no_mode_fits or config.precision != "float32":
            return False
        latest = self.engine.latest()
        for side in self.sides:
            ids = [
                c.id
                for c in self.configs
                if c.model == config.model and c.precision == "float32" and c.side == side
            ]
            first = {r.config: r.run_id for r in self.order if r.discarded and r.config in ids}
            outcomes = [latest.get(first[c]) for c in ids]
            if ids and all(o and o.status == timing.OOM and self._current(o) for o in outcomes):
                batch = self.batches().get(config.model, model.batch_size)
                adjustments = (
                    self.rd.read_json(store.ADJUSTMENTS)
                    if (self.rd.root / store.ADJUSTMENTS).exists()
                    else {}
                )
                adjustments[config.model] = {
                    "batch_size": batch // 2,
                    "because": f"no mode of the {side} side held a batch of {batch} in float32 "
                    f"(its discarded runs {sorted(first.values())} ran out of memory); the "
                    "batch halves for both sides (amendment 5.1)",
                }
                self.rd.write_json(store.ADJUSTMENTS, adjustments)
                self.hooks.message(f"{config.model}: {adjustments[config.model]['because']}")
                return True
        return False

    def _footprint(self) -> None:
        """§8: each measured image's size and file list, and the ratio of the two sizes."""
        images = self.executor.images
        if images is None:
            return  # local runs run from no image
        found = {}
        for name, side in self.sides.items():
            if side.image:
                images.footprint(side.image, self.rd.root / "footprint" / name, self.hooks.message)
                found[name] = self.rd.read_json(f"footprint/{name}/footprint.json")
        if "pytorch" in found and "contender" in found:
            ratio = images.footprint_ratio(found["contender"], found["pytorch"])
            self.rd.write_json("footprint/ratio.json", ratio)

    def started(self, run: PlannedRun, position: int) -> None:
        self.hooks.run_started(run, self.by_id[run.config], position, len(self.order))

    def run_spec(self, run: PlannedRun, log_dir: Path) -> RunSpec | Judged:
        config = self.by_id[run.config]
        label = f"run {run.run_id} {config.id}"
        batch = self.batches().get(config.model)
        spec = self.sides[config.side].spec(config, label, self.ctx, batch_size=batch)
        # amendment 2: the loader's libraries, in the discarded run; a timed run past the
        # whole-run limit fails like any other, and only reads the products record (4.3)
        spec = dataclasses.replace(spec, trace_libraries=run.discarded, limit_s=self._limit_s(run))
        spec = spec if run.discarded else spec.reading("products")
        if run.kind not in SEPARATE:
            # §5's clock: a run whose first lines arrive in bursts is stopped there
            grammar = self.sides[config.side].grammar(self.protocol)
            spec = dataclasses.replace(spec, watch=timing.watch_first_lines(grammar))
        separate = extras.prepare(run.kind, spec, self.executor, log_dir)
        if separate.skip_reason:
            return self._judged(
                timing.Outcome(extras.NOT_PROFILED, None, None, separate.skip_reason), None
            )
        return separate.spec

    def around(self, run: PlannedRun, log_dir: Path) -> AbstractContextManager[None]:
        return self.conditions.around(log_dir) if self.conditions else nullcontext()

    def judge(self, run: PlannedRun, spec: RunSpec, outcome: RunOutcome, log_dir: Path) -> Judged:
        extra = extras.finish(run.kind, spec, self.executor, log_dir, outcome)
        grammar = self.sides[self.by_id[run.config].side].grammar(self.protocol)
        judged = extras.judge(run.kind, outcome, grammar, self.protocol.timing)
        return self._judged(judged, log_dir, extra)

    @staticmethod
    def _judged(judged: timing.Outcome, log_dir: Path | None, extra: dict | None = None) -> Judged:
        """The record's judgement: each per-run field as declared once (kit.results.fields),
        then the kind's own; and what the run's conditions came to over its timed window (§5
        "Conditions"), worked out once, here, so a report reads no samples again; {} for a run
        that never ran (`log_dir` None)."""
        measured = fields.read_all(judged, fields.Logs(str(log_dir) if log_dir else ""))
        window = (judged.window_start_ns, judged.window_end_ns)
        kept = conditions.recorded(log_dir, window) if log_dir is not None else {}
        return Judged(judged.status, judged.reason, {**measured, **(extra or {})}, conditions=kept)

    def _limit_s(self, planned: PlannedRun) -> float | None:
        """A timed run's whole-run limit: the protocol's factor times its configuration's
        discarded run (which compiled, loaded and warmed everything a timed run reuses), and
        never less than the stall limit."""
        if planned.kind != TIMED and planned.kind not in AA_KINDS:
            return None
        for r in reversed(self.rd.runs()):
            if r.start_ns is None or r.end_ns is None:
                continue
            if r.config == planned.config and r.discarded:
                if r.status in (timing.OK, timing.VOID):
                    seconds = (r.end_ns - r.start_ns) / 1e9
                    t = self.protocol.timing
                    # never below the stall limit: a short run's few seconds of jitter are no hang
                    return max(t.run_limit_factor * seconds, t.stall_s)
        return None

    def complete(self) -> bool:
        latest = self.engine.latest()
        done = {i for i, r in latest.items() if self.done(r)}
        stopped = self._stopped(latest)
        return all(r.run_id in done or r.config in stopped for r in self.order)

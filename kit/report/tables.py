"""Every table of a results directory, recomputed from its raw stamped logs alone (D6).

`tables()` reads the plan, the records' exit codes and the stamped logs, and judges every run
again; nothing a series computed while it ran is trusted. `verify()` (kit.report.publish)
compares what a directory publishes with that recomputation and names every number and raw
file that differs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kit.measure import timing
from kit.protocol.load import Protocol
from kit.report import aa, clocks, compile_cost, flags, sidetables, states, verdict
from kit.results import fanout, fields, judging, store
from kit.results.documents import Plan
from kit.results.planned import AA_KINDS, CONTENDER, PYTORCH, Config, PlannedRun
from kit.results.rawfiles import SAMPLES
from kit.results.records import RunRecord
from kit.results.run_conditions import Conditions
from kit.results.store import ResultsDir

TABLES = (
    "runs", "configurations", "comparison", "libraries", "kernels", "kernel_families",
    "graph_breaks", "compile_costs",
)  # fmt: skip
NOT_CHECKED = states.NOT_CHECKED


@dataclass(frozen=True)
class Tables:
    runs: pd.DataFrame
    configurations: pd.DataFrame
    comparison: pd.DataFrame
    libraries: pd.DataFrame
    kernels: pd.DataFrame
    kernel_families: pd.DataFrame
    graph_breaks: pd.DataFrame
    compile_costs: pd.DataFrame  # what compiling costs: warm-up and break-even, from stamps
    sampled: frozenset[str]  # the run folders that hold card samples (samples.jsonl)
    # amendment 8.3: configurations lacking a separate record, recorded or not
    missing: tuple[str, ...] = ()
    preview: bool = False  # every time shown, labelled "preparation: not a protocol result"
    card_named: bool = True  # D3: the protocol names this series' card
    # the A/A runs' table (kit.report.aa); None for a series without them: no tables/aa.csv
    aa: pd.DataFrame | None = None
    # each configuration's notes as the reports give them (`noted`), by its id; the table's own
    # notes where a configuration is not here (a directory published before summary.json's
    # schema 5 is verified so: kit.report.publish)
    notes: Mapping[str, str] = field(default_factory=dict)

    def items(self) -> list[tuple[str, pd.DataFrame]]:
        named = [(name, getattr(self, name)) for name in TABLES]
        return named if self.aa is None else [*named, (aa.NAME, self.aa)]

    def noted(self, row: Mapping) -> str:
        """A row of the configurations table's notes as report.md, report.html, the step-time
        plot and the terminal give them."""
        return self.notes.get(str(row["config"]), str(row["notes"]))


def runs_table(
    rd: ResultsDir,
    protocol: Protocol,
    listing: Mapping[str, frozenset[str]] | None = None,
    judged: Mapping[int, timing.Outcome | str] | None = None,
    conditions: Mapping[int, Conditions] | None = None,
    read: Mapping[int, Mapping[str, fields.Value]] | None = None,
) -> pd.DataFrame:
    """One row per planned run that has a record: judged again from its logs. `judged`: runs
    a caller (verify) has already judged again, by the record's line (`audit.Examined`);
    `conditions`: what their conditions came to, worked out again by that caller, by the same
    line; any other run's are its record's, or, for a record from an older kit, its raw files'.
    `read`: the fields (kit.results.fields) that caller read for the runs it judged, by the
    same line; any other run's are read here."""
    listing = rd.listing() if listing is None else listing
    judged = {} if judged is None else judged
    again = {} if conditions is None else conditions
    read = {} if read is None else read
    plan = rd.plan()
    configs = plan.by_id
    latest = {r.run_id: (i, r) for i, r in enumerate(rd.runs())}
    jobs = [(p, *latest[p.run_id], configs[p.config]) for p in plan.order if p.run_id in latest]

    outcomes = _judged_again(rd, protocol, listing, judged, jobs)
    kept = {}  # by run id: the conditions verify worked out again, else the record's
    for planned, i, record, _ in jobs:
        found = again.get(i, record.conditions)
        if found is not None:
            kept[planned.run_id] = found
    rows = _rows(rd, plan, jobs, outcomes, read)
    columns = [
        "run_id", "config", "card", "model", "precision", "side", "variant", "round", "kind",
        "discarded", "batch_size", "status", *fields.NAMES, "reason",
        "log_dir", "window_start_ns", "window_end_ns",
    ]  # fmt: skip
    runs = pd.DataFrame(rows, columns=columns).astype(
        {"window_start_ns": "Int64", "window_end_ns": "Int64", "batch_size": "Int64"}
        | {f.name: f.dtype for f in fields.FIELDS}
    )
    found = sidetables.conditions_columns(rd, runs, listing, kept)
    runs = runs.merge(found, on="run_id", how="left")
    runs = runs.merge(sidetables.flags(runs), on="run_id", how="left")
    runs["flagged"] = runs["flagged"].fillna(False).astype(bool)
    runs["flag_reasons"] = runs["flag_reasons"].fillna("")
    return clocks.per_run(runs)


def _rows(
    rd: ResultsDir,
    plan: Plan,
    jobs: list[tuple[PlannedRun, int, RunRecord, Config]],
    outcomes: list[timing.Outcome],
    read: Mapping[int, Mapping[str, fields.Value]],
) -> list[dict[str, object]]:
    """runs_table's rows, one a job, in order: its fields (kit.results.fields) as `read` holds
    them by the record's line where the caller read them, else read here."""
    rows: list[dict[str, object]] = []
    identity = {c.id: _identity(c) for c in plan.configurations}
    for (planned, i, record, c), outcome in zip(jobs, outcomes, strict=True):
        values = read.get(i)
        if values is None:
            values = fields.read_all(outcome, fields.Logs(f"{rd.root}/{record.log_dir}"))
        rows.append(
            {
                "run_id": planned.run_id,
                **identity[c.id],
                "round": planned.round,
                "kind": planned.kind,
                "discarded": planned.discarded,
                "batch_size": record.batch_size,
                "status": outcome.status,
                # each per-run field as declared once (kit.results.fields)
                **values,
                "reason": outcome.reason,
                "log_dir": record.log_dir,
                "window_start_ns": outcome.window_start_ns,
                "window_end_ns": outcome.window_end_ns,
            }
        )
    return rows


def _judged_again(
    rd: ResultsDir,
    protocol: Protocol,
    listing: Mapping[str, frozenset[str]],
    judged: Mapping[int, timing.Outcome | str],
    jobs: list[tuple[PlannedRun, int, RunRecord, Config]],
) -> list[timing.Outcome]:
    """Each recorded run's outcome, judged again from its logs (D6), in the plan's order;
    those the caller judged already are taken as they are."""

    def again(job: tuple[PlannedRun, int, RunRecord, Config]) -> timing.Outcome:
        _, _, record, c = job
        held = listing.get(record.log_dir, frozenset())
        grammar = judging.grammar(protocol, c.side)
        return judging.rejudge(rd.root, record, grammar, protocol.timing, held)

    todo = [j for j in jobs if j[1] not in judged]
    # thousands of runs: judged on every core (kit.results.fanout), in the plan's order
    fresh = dict(zip((j[1] for j in todo), fanout.map_in_order(again, todo)))
    outcomes: list[timing.Outcome] = []
    for _, i, _, _ in jobs:
        outcome = fresh[i] if i in fresh else judged[i]
        if isinstance(outcome, str):  # a raw log the caller found no longer parses
            raise ValueError(outcome)
        outcomes.append(outcome)
    return outcomes


def _identity(c: Config) -> dict[str, str]:
    """A configuration's columns, the same in every table: id, card, model, precision, side."""
    return {"config": c.id, **dataclasses.asdict(c)}


def config_publications(
    plan: Plan, protocol: Protocol, checks: dict[str, str], preview: bool
) -> dict[str, tuple[str, str]]:
    """Per configuration: its correctness status and whether its speed is published (rule 6).

    A contender build's check is its own (model, precision, build: amendment 4.2). A PyTorch
    mode's time is the other half of a comparison: it is published where a contender build of
    its card, model and precision passed its check, and withheld where none did.
    """
    contender = {
        c.id: checks.get(states.check_key(c.model, c.precision, c.variant), NOT_CHECKED)
        for c in plan.configurations
        if c.side == CONTENDER
    }
    out = {}
    for c in plan.configurations:
        if c.side == CONTENDER:
            check = contender[c.id]
        else:
            beside = [
                contender[o.id]
                for o in plan.configurations
                if o.side == CONTENDER
                and (o.card, o.model, o.precision) == (c.card, c.model, c.precision)
            ]
            outcomes = [states.CheckOutcome.of(x) for x in beside]
            if states.CheckOutcome.PASSED in outcomes:
                check = states.PASSED
            else:
                failed = states.CheckOutcome.FAILED
                check = next((x for x, o in zip(beside, outcomes) if o is failed), NOT_CHECKED)
        out[c.id] = (check, states.publication(check, preview))
    return out


def _shown(publication: str) -> bool:
    return states.Publication.of(publication) is not states.Publication.WITHHELD


def configurations_table(
    runs: pd.DataFrame,
    plan: Plan,
    found: dict[str, states.ConfigState],
    published: dict[str, tuple[str, str]],
    card_named: bool = True,
) -> pd.DataFrame:
    """Per configuration: its state, and for a complete one whose speed is published (rule 6)
    or previewed, the median and range of its timed runs (§5 "What is reported")."""
    rows = []
    for c in plan.configurations:
        mine = runs[runs["config"] == c.id]
        timed = mine[mine["kind"] == "timed"]
        st = found[c.id]
        _, publication = published[c.id]
        ok = np.asarray(st.step_s, dtype=float) if _shown(publication) else np.array([])
        # an A/A run out of memory leaves the configuration's own state alone (kit.report.aa)
        oom = mine[(mine["status"] == timing.OOM) & ~mine["kind"].isin(AA_KINDS)]
        notes = _state_note(st)
        flagged = timed[timed["flagged"]]
        notes += [
            f"run {i} flagged: {r}" for i, r in zip(flagged["run_id"], flagged["flag_reasons"])
        ]
        peak = pd.to_numeric(timed["peak_memory_bytes"], errors="coerce")
        rows.append(
            {
                **_identity(c),
                "primary": (plan.primary or {}).get(c.id, True),
                "state": st.state.value,
                "state_reason": st.reason,
                "planned_runs": st.planned,
                "runs": st.ok,
                "publication": publication,
                "median_step_s": _median(ok),
                "min_step_s": float(ok.min()) if len(ok) else math.nan,
                "max_step_s": float(ok.max()) if len(ok) else math.nan,
                "peak_memory_bytes": float(peak.max()) if peak.notna().any() else math.nan,
                "flagged_runs": len(flagged),
                "out_of_memory": bool(len(oom)),
                "card_named": card_named,
                "notes": "; ".join(notes),
            }
        )
    return pd.DataFrame(rows, columns=CONFIGURATION_COLUMNS)


def _state_note(st: states.ConfigState) -> list[str]:
    """A configuration's notes begin with its state where it has no time (the table's notes and
    the reports' alike)."""
    return [] if st.has_time else [st.shown]


def said_notes(
    runs: pd.DataFrame, plan: Plan, found: dict[str, states.ConfigState]
) -> dict[str, str]:
    """Each configuration's notes for the reports (summary.json's schema 5): its state where it
    has no time, and its flagged timed runs counted with their kinds (kit.report.flags.words).
    The configurations table's notes name every flagged run with its reason, for tools: a
    series on a busy machine flags every timed run, and a cell naming hundreds of runs is read
    by no one (each run's reason is in tables/runs.csv and summary.json too)."""
    said = flags.by_config(runs)
    out = {}
    for c in plan.configurations:
        notes = _state_note(found[c.id])
        if c.id in said:
            notes += [said[c.id], "each run and its reason in tables/runs.csv"]
        out[c.id] = "; ".join(notes)
    return out


CONFIGURATION_COLUMNS = [
    "config", "card", "model", "precision", "side", "variant", "primary", "state",
    "state_reason", "planned_runs", "runs", "publication", "median_step_s", "min_step_s",
    "max_step_s", "peak_memory_bytes", "flagged_runs", "out_of_memory", "card_named", "notes",
]  # fmt: skip


def comparison_table(
    configs: pd.DataFrame,
    found: dict[str, states.ConfigState],
    protocol: Protocol,
    published: dict[str, tuple[str, str]],
    attention: dict[str, str] | None = None,
    runs: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per card, model and precision: each contender build against PyTorch's fastest mode.

    Only complete configurations have times (amendments 5.2 and 8.2), so PyTorch's fastest mode
    is the fastest complete one and D1's verdict stands only between complete configurations;
    every other state is named in its row (rule 5). Without a passed check for that model,
    precision and build there is no verdict (§7, rule 6) and, unless previewed, no time either.
    """
    attention = attention or {}
    rows = []
    for (card, model, precision), group in configs.groupby(
        ["card", "model", "precision"], sort=False
    ):
        torch_rows = group[group["side"] == PYTORCH]
        modes = dict(zip(torch_rows["variant"], (found[c] for c in torch_rows["config"])))
        times = {mode: np.asarray(s.step_s, dtype=float) for mode, s in modes.items()}
        fastest = verdict.fastest_complete(modes)
        oom_modes = list(torch_rows[torch_rows["out_of_memory"]]["variant"])
        without = [
            f"{mode}: {found[cid].shown}"
            for mode, cid in zip(torch_rows["variant"], torch_rows["config"])
            if not found[cid].has_time
        ]
        for _, c in group[group["side"] == CONTENDER].iterrows():
            st = found[c["config"]]
            check, publication = published[c["config"]]
            shown = _shown(publication)
            m = np.asarray(st.step_s, dtype=float) if st.has_time else np.array([])
            p = times.get(fastest, np.array([])) if fastest else np.array([])
            margin = protocol.timing.verdict_margin
            times_say, by_cycles, clocks_say = "", "", ""
            if len(m) and len(p) and shown:
                times_say = verdict.between(st, modes[fastest], margin)
                if runs is not None:  # the kit's diagnostic beside the verdict, outside §10
                    by_cycles, clocks_say = clocks.between(
                        _timed_ok(runs, c["config"]),
                        _timed_ok(runs, modes[fastest].config),
                        margin,
                        protocol.diagnostics.throttle_share,
                    )
            if not st.has_time:
                said = f"{verdict.NO_VERDICT}: {st.state.value}"
            elif not len(p):
                said = f"{verdict.NO_VERDICT}: no PyTorch mode is complete"
            elif check != states.PASSED:
                said = f"{verdict.NO_VERDICT}: {check}"
            else:
                said = verdict.between(st, modes[fastest], margin)
            if not shown:
                m, p = np.array([]), np.array([])
            rows.append(
                {
                    "card": card,
                    "model": model,
                    "precision": precision,
                    "contender_build": c["variant"],
                    "build_role": "primary" if c["primary"] else "secondary",
                    "contender_state": st.shown,
                    "contender_runs": st.ok,
                    "contender_median_step_s": _median(m),
                    "contender_min_step_s": float(m.min()) if len(m) else math.nan,
                    "contender_max_step_s": float(m.max()) if len(m) else math.nan,
                    "pytorch_fastest_mode": fastest or "",
                    "pytorch_attention": attention.get(
                        f"{model}/{precision}/pytorch/{fastest}", "not profiled"
                    ),
                    "pytorch_runs": len(times.get(fastest, [])) if fastest else 0,
                    "pytorch_median_step_s": _median(p),
                    "pytorch_min_step_s": float(p.min()) if len(p) else math.nan,
                    "pytorch_max_step_s": float(p.max()) if len(p) else math.nan,
                    "pytorch_modes_out_of_memory": ", ".join(oom_modes),
                    "pytorch_modes_without_time": "; ".join(without),
                    # D1: median(P) / median(M), above 1 when the contender is faster
                    "ratio": _median(p) / _median(m) if len(m) and len(p) else math.nan,
                    "correctness": check,
                    "publication": publication,
                    "card_named": bool(c["card_named"]),
                    "times_alone_say": times_say,
                    "verdict": said,
                    "verdict_by_cycles": by_cycles,
                    "clocks_say": clocks_say,
                }
            )
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


COMPARISON_COLUMNS = [
    "card", "model", "precision", "contender_build", "build_role", "contender_state",
    "contender_runs", "contender_median_step_s", "contender_min_step_s", "contender_max_step_s",
    "pytorch_fastest_mode", "pytorch_attention", "pytorch_runs", "pytorch_median_step_s",
    "pytorch_min_step_s", "pytorch_max_step_s", "pytorch_modes_out_of_memory",
    "pytorch_modes_without_time", "ratio", "correctness", "publication", "card_named",
    "times_alone_say", "verdict", "verdict_by_cycles", "clocks_say",
]  # fmt: skip


def _timed_ok(runs: pd.DataFrame, config: str) -> pd.DataFrame:
    """A configuration's timed runs with a time: the runs D1 compares."""
    mine = runs[(runs["config"] == config) & (runs["kind"] == "timed")]
    return mine[mine["status"] == timing.OK]


def _median(a: np.ndarray) -> float:
    return float(np.median(a)) if len(a) else math.nan


GATING = "gating.json"  # the correctness checks that gate this series' verdicts (§3 rule 6)
PUBLICATION = "publication.json"  # whether `micakit publish --preview` asked for every time


def is_preview(rd: ResultsDir) -> bool:
    """A smoke series is always a preview; any other is one when `report --preview` said so."""
    if rd.manifest().smoke:
        return True
    if (rd.root / PUBLICATION).exists():
        return bool(rd.read_json(PUBLICATION).get("preview"))
    return False


def tables(
    rd: ResultsDir,
    checks: dict[str, str] | None = None,
    preview: bool | None = None,
    listing: Mapping[str, frozenset[str]] | None = None,
    judged: Mapping[int, timing.Outcome | str] | None = None,
    conditions: Mapping[int, Conditions] | None = None,
    read: Mapping[int, Mapping[str, fields.Value]] | None = None,
) -> Tables:
    """Every table, judged again from the raw logs (a corrupt log raises ValueError).

    The verdicts are gated by `checks` ("model/precision/build" -> status), else by the
    statuses `micakit publish --checks` saved in gating.json, else every configuration reads
    "correctness not checked" and its speed is withheld (rule 6) unless previewed.
    The directory is audited by the caller first (D6: numbers only from what a series wrote):
    `listing` is the run folders (`ResultsDir.listing`) it audited, from
    `audit.refuse_if_altered` or `audit.Examination`. `judged`: the runs that caller has
    judged again already, `conditions` what their conditions came to and `read` their fields
    (`audit.Examined`, `audit.Survey`).
    """
    if checks is None and (rd.root / GATING).exists():
        checks = rd.read_json(GATING)["statuses"]
    if preview is None:
        preview = is_preview(rd)
    protocol = store.load_protocol(rd)
    plan = rd.plan()
    if listing is None:
        listing = rd.listing()
    runs = runs_table(rd, protocol, listing, judged, conditions, read)
    found = states.config_states(runs, plan)
    published = config_publications(plan, protocol, checks or {}, preview)
    card_named = protocol.names_card(rd.manifest().card)
    configs = configurations_table(runs, plan, found, published, card_named)
    kernel, families, attention, unreadable = sidetables.kernel_tables(rd, runs, protocol)
    return Tables(
        runs=runs,
        configurations=configs,
        comparison=comparison_table(configs, found, protocol, published, attention, runs),
        libraries=sidetables.libraries_table(rd, runs),
        kernels=kernel,
        kernel_families=families,
        graph_breaks=sidetables.graph_breaks_table(rd, runs),
        compile_costs=compile_cost.compile_costs(rd, runs, judging.grammar(protocol, PYTORCH)),
        sampled=frozenset(d for d, held in listing.items() if f"{d}/{SAMPLES}" in held),
        missing=(
            *sidetables.missing_records(runs),
            *sidetables.unrecorded(plan, runs),
            *unreadable,
        ),
        preview=preview,
        card_named=card_named,
        aa=aa.table(runs, plan, protocol.diagnostics.threshold),
        notes=said_notes(runs, plan, found),
    )

"""report.html's plot sections: what each plot shows, drawn from the raw files it names.

Each section gathers its data from the tables and raw files, names them in every caption
(§3 rules 4 and 7), and hands plain data to kit.report.figures. A plot's title is short (what,
card, model, precision); the long words (the model's size sentence, a preview's or a
preparation's label) stand once in its caption and in the page's title.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from kit.measure import timing
from kit.protocol.load import Protocol
from kit.report import figures, flags, resolution, words
from kit.report.states import Publication
from kit.report.tables import Tables
from kit.results import judging, store
from kit.results.documents import Versions
from kit.results.store import ResultsDir
from kit.status import RunStatus
from kit.telemetry.kernels import KERNEL_TIME_LABEL
from kit.telemetry.samples import read_samples

Piece = str | tuple[str, str]  # caption text, or (text, relative link)
CPU_NOTE = (
    "This is a CPU series: no card was sampled, so there are no clocks, temperature or power "
    "to show. The machine's load, the other processes' share of its CPUs and its clock, run "
    "by run, stand in the section “The machine through each run” and in tables/runs.csv."
)


@dataclass(frozen=True)
class Plot:
    name: str  # file name under plots/
    # draws it: only where its bytes are wanted (`micakit report` lists the plots' names alone)
    draw: Callable[[], bytes]
    alt: str
    caption: tuple[Piece, ...]

    @functools.cached_property
    def png(self) -> bytes:
        return self.draw()


@dataclass(frozen=True)
class Section:
    title: str
    plots: tuple[Plot, ...]
    note: str = ""  # said instead of (or before) the plots, e.g. why there are none


@dataclass(frozen=True)
class Context:
    rd: ResultsDir
    t: Tables
    protocol: Protocol
    found: Versions
    attention: dict[str, str]  # PyTorch config -> attention kernels of its profiled run
    preparation: str  # rule 9's label, or ""
    # the plots' own titles' marks: "preparation" (rule 9, or a preview), "card not named" (D3)
    marks: tuple[str, ...] = ()
    earlier: bool = False  # drawn as a kit before summary.json's schema 3 drew them


def context(rd: ResultsDir, t: Tables, earlier: bool = False) -> Context:
    """`earlier`: the plots as a kit before summary.json's schema 3 drew them (a directory it
    published verifies as it was made)."""
    found = rd.versions()
    prep = f" — {words.preparation_label(found)}" if words.is_preparation(found) else ""
    # rule 6 and D3: a preview, or a card the protocol does not name, says so in every caption
    prep += "".join(f" — {x}" for x in words.labels(t))
    attention = words.attention_by_config(t)
    # a plot pasted elsewhere keeps its labels: each in its own title, in a word
    marks: tuple[str, ...] = ("preparation",) if words.is_preparation(found) or t.preview else ()
    marks += () if t.card_named else ("card not named",)
    protocol = store.load_protocol(rd)
    return Context(rd, t, protocol, found, attention, prep, () if earlier else marks, earlier)


def _label(ctx: Context, c: pd.Series) -> str:
    """A configuration's name in a plot; §9: PyTorch with version, mode, precision, attention."""
    return words.config_named(ctx.found, ctx.attention, c)


@dataclass(frozen=True)
class Group:
    """A card, model and precision (§10: a verdict belongs to one) and its configurations."""

    title: str  # for captions: the model's size sentence and the series' labels
    short: str  # for a plot's title: card · M1, 10.7 million parameters · float32
    configs: pd.DataFrame
    titled: str = ""  # a plot's title: `short` and its marks (preparation, withheld, ...)


def _groups(ctx: Context) -> list[Group]:
    configs, out = ctx.t.configurations, []
    smoke = words.smoke_args(ctx.rd, ctx.protocol)
    for (card, model, precision), g in configs.groupby(["card", "model", "precision"], sort=False):
        # §9: M1 with its size; a smoke series' model is never given the real one's
        said = words.model_words(ctx.protocol.models, model, smoke)
        short = words.model_short(ctx.protocol.models, model, smoke is not None)
        title = f"{card} · {said} · {precision}{ctx.preparation}"
        withheld = any(Publication.of(x) is Publication.WITHHELD for x in g["publication"])
        marks = [*ctx.marks, *(["withheld"] if withheld and not ctx.earlier else [])]
        plain = f"{card} · {short} · {precision}"
        out.append(Group(title, plain, g, " · ".join([plain, *marks])))
    return out


def file_link(rel: str) -> Piece:
    return (rel, rel)  # a link that names its file (the 003 style: a number names its file)


def _slug(*parts: str) -> str:
    joined = ".".join(p.replace("/", ".") for p in parts)
    return re.sub(r"[^A-Za-z0-9._-]+", "-", joined).strip("-.")


def runs_of(ctx: Context, config: str, kinds: Sequence[str], ok_only: bool) -> pd.DataFrame:
    r = ctx.t.runs
    mine = r[(r["config"] == config) & (r["kind"].isin(list(kinds)))]
    return mine[mine["status"] == RunStatus.OK] if ok_only else mine


LINKED_RUNS = 50  # a cell links this many runs; beyond, the rest by tables/runs.csv


def links(runs: pd.DataFrame, file: str) -> list[Piece]:
    """'run 5, run 8' linking each run's raw file, or its folder where `file` is "".

    Relative links: the results directory is published and moved whole (§9, rule 7). A cell of
    more than LINKED_RUNS runs (a series of thousands) links the first ones, then says how many
    more there are and links tables/runs.csv, which names every run's folder: a page of a
    thousand links per cell would neither read at a glance nor open quickly.
    """
    out: list[Piece] = []
    rows = zip(runs["run_id"], runs["kind"], runs["log_dir"])  # thousands of runs: no iterrows
    for i, (run_id, kind, log_dir) in enumerate(rows):
        if i == LINKED_RUNS:
            more = len(runs) - LINKED_RUNS
            out += [", ", (f"{more:,} more, each in tables/runs.csv", "tables/runs.csv")]
            break
        out += [", "] if i else []
        name = f"run {int(run_id)}" + (" (discarded)" if kind == "discarded" else "")
        out.append((name, f"{log_dir}/{file}" if file else f"{log_dir}/"))
    return out


def _conditions_words(ctx: Context) -> list[Piece]:
    """Rule 4's conditions that a caption names once: card, versions, date, contender."""
    manifest = ctx.rd.manifest()
    says = ctx.found.side("contender").get("says")
    said: list[Piece] = [
        f" Card {ctx.found.card.get('name', manifest.card)}; every software version in ",
        file_link("versions.json"),
        f"; series of {manifest.date_utc}, kit {manifest.kit_version}",
    ]
    if says:
        said.append(f"; the contender says of itself: {says!r}")
    return [*said, "."]


def step_time_section(ctx: Context) -> Section:
    out, said = [], []
    for group in _groups(ctx):
        title, g = group.title, group.configs
        rows: list[figures.StepTimeRow] = []
        sources: list[Piece] = []
        for _, c in g.iterrows():
            timed = runs_of(ctx, c["config"], ["timed"], ok_only=True)
            note = "out of memory: no time (amendment 8)" if c["out_of_memory"] else ctx.t.noted(c)
            if c["state"] != "complete":
                timed = timed.iloc[0:0]  # only a complete configuration has a time
            elif Publication.of(c["publication"]) is Publication.WITHHELD:
                timed, note = timed.iloc[0:0], c["publication"]  # rule 6
            label = _label(ctx, c)
            steps = tuple(timed["step_s"])
            rows.append(figures.StepTimeRow(label, c["side"], steps, note, c["variant"]))
            if len(timed):
                sources += ["; " if sources else "", f"{label}: ", *links(timed, "stdout.log")]
        if not any(r.step_s for r in rows):  # nothing to draw: each reason said once
            said.append(f"{group.short}: no step time to draw; {_reasons(rows)}.")
            continue
        caption: list[Piece] = [
            f"{title}. Every timed run that counted is a dot, its step time by the outside "
            "clock (§5); the median is the black mark and the range the bar. A deficit is "
            "drawn as a lead is (§3 rule 5).",
            *_conditions_words(ctx),
            " From each timed run's stamped stdout.log: ",
            *sources,
            ". Every value is in ",
            file_link("tables/runs.csv"),
            ".",
        ]
        name = f"step-times.{_slug(*g.iloc[0][['card', 'model', 'precision']])}.png"
        plotted = f"Step times · {group.titled}"
        # §5's flags in the plot's own title, where the times they may move are drawn (a
        # directory an earlier kit published keeps its plot as made)
        if not ctx.earlier and resolution.in_pm(ctx.rd):
            flagged = flags.words(ctx.t.runs[ctx.t.runs["config"].isin(g["config"])])
            plotted += f" · {flagged}" if flagged else ""
        png = functools.partial(figures.step_times_png, rows, plotted, ctx.earlier)
        out.append(Plot(name, png, f"Step times, {title}", tuple(caption)))
    note = " ".join(said) or ("" if out else "No configuration of this series has a timed run yet.")
    return Section("Step times", tuple(out), note)


def _reasons(rows: list[figures.StepTimeRow]) -> str:
    """Each reason once, with the modes and builds it holds for: "why (eager, default)"."""
    by_note: dict[str, list[str]] = {}
    for r in rows:
        by_note.setdefault(r.note or "no timed run counted", []).append(r.variant)
    return "; ".join(f"{note} ({', '.join(who)})" for note, who in by_note.items())


def conditions_section(ctx: Context) -> Section:

    out = []
    for group in _groups(ctx):
        title, g = group.title, group.configs
        for _, c in g.iterrows():
            traces, used = [], []
            timed = runs_of(ctx, c["config"], ["timed"], ok_only=False)
            # only the runs with samples are read (a CPU series has none)
            for _, r in timed[timed["log_dir"].isin(ctx.t.sampled)].iterrows():
                path = ctx.rd.root / r["log_dir"] / "samples.jsonl"
                trace = _trace(read_samples(path)[1], r)
                if trace is not None:
                    traces.append(trace)
                    used.append(r)
            if not traces:
                continue
            label = _label(ctx, c)
            caption: list[Piece] = [
                f"{title}: {label}. The card's SM clock, temperature and power through each "
                "timed run, sampled every second (§5 Conditions); the timed window is drawn "
                "bold. From each run's samples.jsonl: ",
                *links(pd.DataFrame(used), "samples.jsonl"),
                ". Their summaries and §5's flags are in ",
                file_link("tables/runs.csv"),
                ".",
                *_conditions_words(ctx),
            ]
            short = f"The card through each timed run · {group.titled} · {c['variant']}"
            png = functools.partial(figures.conditions_png, traces, short)
            name = f"conditions.{_slug(c['card'], c['config'])}.png"
            out.append(Plot(name, png, f"Card conditions, {label}", tuple(caption)))
    cpu = ctx.rd.manifest().device == "cpu"
    why = CPU_NOTE if cpu else "No timed run of this series left card samples (samples.jsonl)."
    return Section("The card through each run", tuple(out), "" if out else why)


def _trace(records: list[dict], r: pd.Series) -> figures.ConditionTrace | None:
    samples = [x for x in records if x.get("kind") == "sample" and x.get("t_ns") is not None]
    if not samples:
        return None
    t0 = samples[0]["t_ns"]

    def col(key: str) -> tuple[float, ...]:
        return tuple(float("nan") if x.get(key) is None else float(x[key]) for x in samples)

    window = None
    if not pd.isna(r.get("window_start_ns")) and not pd.isna(r.get("window_end_ns")):
        window = ((int(r["window_start_ns"]) - t0) / 1e9, (int(r["window_end_ns"]) - t0) / 1e9)
    return figures.ConditionTrace(
        f"run {int(r['run_id'])}",
        tuple((x["t_ns"] - t0) / 1e9 for x in samples),
        col("sm_clock_mhz"),
        col("temperature_c"),
        col("power_w"),
        window,
    )


def kernel_section(ctx: Context) -> Section:

    fams = ctx.t.kernel_families
    out = []
    for group in _groups(ctx) if not fams.empty else []:
        title, g = group.title, group.configs
        mine = fams[fams["config"].isin(g["config"])]
        if mine.empty:
            continue
        labels = {c["config"]: _label(ctx, c) for _, c in g.iterrows()}
        side = dict(zip(g["config"], g["side"]))
        variant = dict(zip(g["config"], g["variant"]))
        frame = mine.assign(
            label=mine["config"].map(labels),
            side=mine["config"].map(side),
            variant=mine["config"].map(variant),
        )
        profiled = pd.concat([runs_of(ctx, cid, ["profile"], ok_only=True) for cid in g["config"]])
        caption: list[Piece] = [
            f"{title}. Kernel time by family, labelled as the {KERNEL_TIME_LABEL}: Nsight "
            "Systems slows launches, so it explains a step time and never stands in for one "
            "(§5, §6). From each profiled run's kernel table as nsys stats printed it "
            "(nsys-stats/stdout.log): ",
            *links(profiled, "nsys-stats/stdout.log"),
            ". Every value is in ",
            file_link("tables/kernel_families.csv"),
            ", each kernel in ",
            file_link("tables/kernels.csv"),
            ".",
            *_conditions_words(ctx),
        ]
        png = functools.partial(
            figures.kernel_families_png, frame, f"Kernel families · {group.titled}"
        )
        name = f"kernel-families.{_slug(*g.iloc[0][['card', 'model', 'precision']])}.png"
        out.append(Plot(name, png, f"Kernel families, {title}", tuple(caption)))
    note = (
        "" if out else "No profiled run of this series has a kernel table; the §6 section says why."
    )
    return Section(f"Kernel families ({KERNEL_TIME_LABEL})", tuple(out), note)


def loss_section(ctx: Context) -> Section:

    out = []
    for group in _groups(ctx):
        title, g = group.title, group.configs
        curves: list[figures.LossCurve] = []
        sources: list[Piece] = []
        for _, c in g.iterrows():
            timed = runs_of(ctx, c["config"], ["timed"], ok_only=True).sort_values("run_id")
            if timed.empty:
                continue
            run = timed.iloc[0]
            grammar = judging.grammar(ctx.protocol, c["side"])
            lines = timing.losses(ctx.rd.root / run["log_dir"] / "stdout.log", grammar)
            label = f"{_label(ctx, c)}, run {int(run['run_id'])}"
            curves.append(
                figures.LossCurve(
                    label,
                    c["side"],
                    tuple(x.step for x in lines),
                    tuple(x.loss for x in lines),
                    c["variant"],
                )
            )
            sources += ["; " if sources else "", *links(timed.iloc[:1], "stdout.log")]
        if not curves:
            continue
        caption: list[Piece] = [
            f"{title}. Per configuration, the training loss of its first timed run that "
            "counted, as the program printed it, parsed with its side's grammar from the "
            "protocol file. These curves are not §7's correctness check. From each run's "
            "stamped stdout.log: ",
            *sources,
            ".",
            *_conditions_words(ctx),
        ]
        plotted = f"Training loss · {group.titled}"
        if not ctx.earlier and resolution.in_pm(ctx.rd):  # which run, in the plot's own title
            plotted += " · each configuration's first timed run that counted (run named)"
        png = functools.partial(figures.loss_curves_png, curves, plotted)
        name = f"loss.{_slug(*g.iloc[0][['card', 'model', 'precision']])}.png"
        out.append(Plot(name, png, f"Loss curves, {title}", tuple(caption)))
    note = "" if out else "No configuration of this series has a timed run that counted yet."
    return Section("Loss curves", tuple(out), note)


def compile_cost_section(ctx: Context) -> Section:
    """What compiling costs: each complete mode's warm-up and its break-even against eager."""
    costs = ctx.t.compile_costs
    publication = dict(zip(ctx.t.configurations["config"], ctx.t.configurations["publication"]))
    # rule 6: a withheld mode's warm-up is not drawn either (the report says why, once)
    withheld = costs["config"].map(
        lambda c: Publication.of(publication.get(c)) is Publication.WITHHELD
    )
    costs = costs[~withheld.astype(bool)]
    out = []
    for group in _groups(ctx):
        order = {c: i for i, c in enumerate(group.configs["config"])}  # eager first, as planned
        mine = costs[costs["config"].isin(order)].sort_values("config", key=lambda x: x.map(order))
        if mine.empty:
            continue
        by_id = {c["config"]: c for _, c in group.configs.iterrows()}
        rows = [
            figures.CompileCost(
                _label(ctx, by_id[r["config"]]),
                r["variant"],
                float(r["median_warmup_s"]),
                float(r["min_warmup_s"]),
                float(r["max_warmup_s"]),
                _steps(r["break_even_steps_vs_eager"]),
                str(r.get("break_even_why") or ""),
            )
            for _, r in mine.iterrows()
        ]
        timed = pd.concat([runs_of(ctx, cid, ["timed"], ok_only=True) for cid in mine["config"]])
        caption: list[Piece] = [
            f"{group.title}. Left: each complete PyTorch mode's warm-up, the stamp of its "
            "first step line − the program's start; the median is the mark and the range the "
            "bar. Right: the break-even run length against eager, the steps after which the "
            "mode has saved its extra warm-up, given only where the ranges of the two modes' "
            "warm-ups and step times do not overlap (else which overlap is written); “never” "
            "where eager's steps are quicker. From the stamps of each "
            "timed run's stdout.log and its start in runs.jsonl: ",
            *links(timed.sort_values("run_id"), "stdout.log"),
            ". Every value is in ",
            file_link("tables/compile_costs.csv"),
            ".",
            *_conditions_words(ctx),
        ]
        # eager alone: no break-even to draw, so no empty panel for it (a directory an earlier
        # kit published keeps its plot as made)
        alone = resolution.in_pm(ctx.rd) and all(r.variant == "eager" for r in rows)
        png = functools.partial(
            figures.compile_costs_png,
            rows,
            f"What compiling costs · {group.titled}",
            ctx.earlier,
            alone and not ctx.earlier,
        )
        name = f"compile-costs.{_slug(*group.configs.iloc[0][['card', 'model', 'precision']])}.png"
        out.append(Plot(name, png, f"What compiling costs, {group.title}", tuple(caption)))
    note = "" if out else "No PyTorch mode of this series is complete with its times shown."
    return Section("What compiling costs", tuple(out), note)


def _steps(v: float) -> float | None:
    """A break-even in steps: None where there is none (eager, or no complete eager)."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def sections(ctx: Context) -> list[Section]:
    return [
        step_time_section(ctx),
        compile_cost_section(ctx),
        conditions_section(ctx),
        kernel_section(ctx),
        loss_section(ctx),
    ]

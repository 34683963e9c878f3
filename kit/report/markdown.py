"""report.md: the Markdown report of a results directory, the words around its numbers (§9).

Formatting functions return text and print nothing. The wording rules live in kit.report.words,
so no module can publish a number without them: PyTorch is named with its version, mode,
precision and attention kernels; every M1 number travels with its model's size; "faster",
"level" and "slower" appear only as D1's verdicts; what is not a protocol result is labelled
a hypothesis. The summary, the folded metadata and what compiling costs are in
kit.report.overview.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pandas as pd

from kit.protocol.load import Model, Protocol
from kit.protocol.shipped import Shipped
from kit.report import aa, next_steps, overview, resolution, sidetables, states
from kit.report.footprint_report import footprint_lines
from kit.report.states import Publication
from kit.report.tables import GATING, Tables
from kit.report.words import (
    attention_by_config,
    caption,
    config_named,
    is_preparation,
    labels,
    mib,
    model_short,
    model_words,
    models_of,
    names,
    preparation_label,
    pytorch_name,
    shipped_lines,
    shipped_of,
    smoke_args,
    step_cells,
    versions_line,
)
from kit.results import store
from kit.results.documents import Versions
from kit.results.store import ResultsDir
from kit.status import RunStatus
from kit.telemetry import kernels

if TYPE_CHECKING:  # the checks' module loads the engine: only its type is needed here
    from kit.correctness.gate import GatingJson

__all__ = ["markdown_report", "versions_line"]  # versions_line: rule 4's line, for callers


def comparison_lines(
    rd: ResultsDir,
    t: Tables,
    models: Mapping[str, Model],
    smoke: list[str] | None = None,
    resolved: bool = True,
) -> list[str]:
    comparison = t.comparison
    found = rd.versions()
    lines = []
    if comparison.empty:
        return ["No contender configuration ran in this series, so there is no comparison.", ""]
    configs = t.configurations.set_index("config")
    for (card, model, precision), g in comparison.groupby(
        ["card", "model", "precision"], sort=False
    ):
        words = model_words(models, model, smoke)
        lines += [f"### {card} · {words} · {precision}", ""]
        lines += [caption(t, f"Comparison (D1), {card}, {words}, {precision}"), ""]
        rows = [_comparison_row(r, found, configs, model, precision) for _, r in g.iterrows()]
        lines.append(pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True))
        lines.append("")
        lines += _comparison_notes(g)
        if resolved:  # beside each verdict, how far its runs can tell the sides apart
            pm = resolution.in_pm(rd)
            found_rows = ((r, resolution.of_row(t.runs, r, t.aa, pm)) for _, r in g.iterrows())
            lines += [resolution.line(r, x) for r, x in found_rows if x is not None]
        lines.append("")
    return lines


def _comparison_row(
    r: pd.Series, found: Versions, configs: pd.DataFrame, model: str, precision: str
) -> dict[str, object]:
    """One contender build against PyTorch's fastest complete mode (D1), as the table shows it."""
    attention = r.get("pytorch_attention", "") or "not profiled"
    torch = (
        pytorch_name(found, r["pytorch_fastest_mode"], precision, attention)
        if r["pytorch_fastest_mode"]
        else "no PyTorch mode is complete"
    )
    ratio = "—" if math.isnan(r["ratio"]) else f"{r['ratio']:.3f}"
    state = r["contender_state"]
    median, spread = step_cells(
        r["contender_median_step_s"],
        r["contender_min_step_s"],
        r["contender_max_step_s"],
        state.split(":")[0],
        r["publication"],
    )
    torch_id = f"{model}/{precision}/pytorch/{r['pytorch_fastest_mode']}"
    torch_pub = configs.loc[torch_id, "publication"] if torch_id in configs.index else ""
    p_median, p_spread = step_cells(
        r["pytorch_median_step_s"],
        r["pytorch_min_step_s"],
        r["pytorch_max_step_s"],
        "complete" if r["pytorch_fastest_mode"] else "no PyTorch mode is complete",
        torch_pub,
    )
    return {
        "contender build": f"{r['contender_build']} ({r['build_role']})",
        "state": state,
        "runs": r["contender_runs"],
        "median (ms)": median,
        "range (ms)": spread,
        "against": torch,
        "PyTorch runs": r["pytorch_runs"],
        "PyTorch median (ms)": p_median,
        "PyTorch range (ms)": p_spread,
        "ratio P/M": ratio,
        "verdict": r["verdict"],
    }


def _comparison_notes(g: pd.DataFrame) -> list[str]:
    """What the times alone would say where no verdict is given, and the modes left out."""
    lines = []
    for _, r in g.iterrows():
        if r["times_alone_say"] and r["verdict"] != r["times_alone_say"]:
            lines.append(
                f"- Hypothesis, not a protocol result: by step times alone, "
                f"{r['contender_build']} would read *{r['times_alone_say']}*; it has no "
                f"verdict until its correctness check passes (§3 rule 6)."
            )
        if r.get("clocks_say"):
            lines.append(
                f"- Clocks, {r['contender_build']} (the kit's diagnostic, outside §10): "
                f"{r['clocks_say']}."
            )
        if r["pytorch_modes_without_time"]:
            lines.append(
                f"- PyTorch modes without a time (amendments 5 and 8): "
                f"{r['pytorch_modes_without_time']}; the fastest of the complete modes "
                f"is compared."
            )
    return lines


def configurations_lines(
    rd: ResultsDir, t: Tables, models: Mapping[str, Model], smoke: list[str] | None = None
) -> list[str]:
    """Per model, every configuration in one table: deficits and states beside the leads."""
    configs = t.configurations
    found = rd.versions()
    attention = attention_by_config(t)
    lines: list[str] = []
    for model, g in configs.groupby("model", sort=False):
        words = model_words(models, model, smoke)
        lines += [caption(t, f"Configurations of {words}"), ""]
        rows = []
        for _, c in g.iterrows():
            median, spread = step_cells(
                c["median_step_s"],
                c["min_step_s"],
                c["max_step_s"],
                c["state"],
                c["publication"],
            )
            rows.append(
                {
                    "model": c["model"],
                    "precision": c["precision"],
                    "side": c["side"],
                    "mode or build": c["variant"],
                    "named (§9)": config_named(found, attention, c),
                    "state": c["state"],
                    "runs": f"{c['runs']} of {c['planned_runs']}",
                    "median (ms)": median,
                    "range (ms)": spread,
                    "peak memory (MiB)": mib(c.get("peak_memory_bytes")),
                    "notes": t.noted(c),
                }
            )
        lines += [pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True), ""]
    return lines


MACHINE = "The machine through each run"
# past this many timed runs the section gives a row per configuration, not per run: a table of
# 15,000 rows is read by no one, and writing it (twice, in report.html) took most of `report`'s
# time at that scale (benchmarks/kit/scale.py); every run's row stays in tables/runs.csv
MACHINE_ROWS = 500


def _share(x: float) -> str:
    return "—" if pd.isna(x) else f"{float(x):.0%}"


def _step_ms(step_s: float, publication: object) -> str:
    # rule 6: a withheld configuration's time stays withheld here too
    if pd.isna(step_s) or Publication.of(publication) is Publication.WITHHELD:
        return "—"
    return f"{float(step_s) * 1e3:.3f}"


def _machine_run_rows(timed: pd.DataFrame, named: list[str], shown: Mapping) -> list[dict]:
    return [
        {
            "configuration": r["config"],
            "named (§9)": name,
            "run": int(r["run_id"]),
            "step (ms)": _step_ms(r["step_s"], shown.get(r["config"])),
            "load (1 min) before": "—" if pd.isna(r["load_1m_before"]) else r["load_1m_before"],
            "others' CPU share before": _share(r["others_cpu_share_before"]),
            "others' CPU share, timed steps": _share(r["others_cpu_share"]),
            "CPU clock (MHz)": "not readable"
            if pd.isna(r["cpu_mhz_median"])
            else f"{float(r['cpu_mhz_median']):.0f}",
            "mark": sidetables.BUSY if r["flag_reasons"].startswith(sidetables.BUSY) else "",
        }
        for name, (_, r) in zip(named, timed.iterrows())
    ]


def _machine_config_rows(timed: pd.DataFrame, named: dict[str, str], shown: Mapping) -> list[dict]:
    rows = []
    for config, g in timed.groupby("config", sort=False):
        clock = g["cpu_mhz_median"].median()
        rows.append(
            {
                "configuration": config,
                "named (§9)": named[str(config)],
                "timed runs": len(g),
                "median step (ms)": _step_ms(g["step_s"].median(), shown.get(config)),
                "largest load (1 min) before": "—"
                if g["load_1m_before"].isna().all()
                else g["load_1m_before"].max(),
                "largest others' CPU share before": _share(g["others_cpu_share_before"].max()),
                "others' CPU share, timed steps (median, largest)": (
                    f"{_share(g['others_cpu_share'].median())}, "
                    f"{_share(g['others_cpu_share'].max())}"
                ),
                "CPU clock (MHz, median)": "not readable" if pd.isna(clock) else f"{clock:.0f}",
                "marked": int(g["flag_reasons"].str.startswith(sidetables.BUSY).sum()),
            }
        )
    return rows


def machine_lines(rd: ResultsDir, t: Tables, protocol: Protocol) -> list[str]:
    """A CPU series' conditions (§5 on a CPU) beside each timed run's step time: the load and
    other processes' share of the CPUs before it, their share over its timed steps, the CPUs'
    clock, and the busy mark; past MACHINE_ROWS timed runs, the same per configuration.
    Nothing for a series without them (a card's)."""
    runs = t.runs
    if "busy_share" not in runs:
        return []
    timed = runs[(runs["kind"] == "timed") & runs["busy_share"].notna()]
    if timed.empty:
        return []
    shown = dict(zip(t.configurations["config"], t.configurations["publication"]))
    limit = float(timed["busy_share"].iloc[0])
    marked = int(timed["flag_reasons"].str.startswith(sidetables.BUSY).sum())
    sizes = models_of(t, timed, protocol, rd)  # §9: every M1 number with its size
    if len(timed) <= MACHINE_ROWS:
        rows = _machine_run_rows(timed, names(rd, t, timed["config"]), shown)
        shows = "Per timed run, beside its step time"
        title = f"The machine through each timed run; {sizes}"
    else:
        configs = pd.Series(timed["config"].unique())
        named = dict(zip(configs, names(rd, t, configs)))  # §9: PyTorch by version and mode
        rows = _machine_config_rows(timed, named, shown)
        shows = (
            f"With {len(timed)} timed runs, a row per configuration (every run's row is in "
            "`tables/runs.csv`), beside its median step time"
        )
        title = f"The machine through the timed runs of each configuration; {sizes}"
    return [
        f"## {MACHINE}",
        "",
        f"**{marked} of {len(timed)} timed runs were {sidetables.BUSY}.**"
        if marked
        else f"No timed run was {sidetables.BUSY}.",
        "",
        "Before every run of this CPU series the kit read the CPUs' counters in /proc: while "
        f"processes other than the kit's and the run's used more than {limit:.0%} of all CPUs' "
        "time (the protocol's conditions.cpu_busy_share), it waited (up to --idle-timeout), "
        f"then let the run go on, marked as measured on a busy machine. {shows}: the load and "
        "the others' share of the CPUs before it, their share over its timed steps, and the "
        "CPUs' clock; a marked run is flagged in the configurations' notes, with why. From "
        "each run's idle.json and machine.jsonl; every digit is in `tables/runs.csv`.",
        "",
        caption(t, title),
        "",
        pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True),
        "",
    ]


def aa_lines(rd: ResultsDir, t: Tables, protocol: Protocol) -> list[str]:
    """The A/A section (kit.report.aa), each configuration named as §9 names it, each number
    beside its model's size; nothing for a series without A/A runs."""
    if t.aa is None:
        return []
    text = f"A/A runs of each chosen configuration and its twin; {models_of(t, t.aa, protocol, rd)}"
    named = names(rd, t, t.aa["config"])
    return aa.lines(t.aa, protocol.diagnostics.threshold, named, caption(t, text))


def markdown_report(
    rd: ResultsDir,
    t: Tables,
    gating: GatingJson | None = None,
    resolved: bool = True,
    earlier: bool = False,
    labelled: bool = True,
) -> str:
    """The whole report: the summary first, the metadata folded, then every table. `gating`:
    the checks that gate it (gating.json's content), else those `publish --checks` saved.
    `resolved`: with the resolution beside each verdict (resolution.py). A smoke series'
    scaled-down model is described once, by its short name after (§9 holds M1's own size
    sentence beside every number of a protocol series); `earlier`: as a kit before
    summary.json's schema 3 wrote it, the description in every caption (a directory it
    published verifies as it was made); `labelled`: where the protocol is not the one this
    kit ships, the title says so and the first lines say how, key by key (a directory
    published before summary.json's schema 4 verifies without)."""
    protocol = store.load_protocol(rd)
    differs = shipped_of(rd) if labelled else None
    lines = [
        _title(rd, t, protocol, differs),
        "",
        *(shipped_lines(differs) if differs else []),
        *overview.summary_lines(rd, t, protocol),
        # rule 6's way out on the first screen where it withholds the times; below the
        # comparison and configurations in a preview, whose times the first screen shows
        *([] if t.preview else next_steps.markdown_lines(rd, t, protocol)),
        *overview.metadata_lines(rd, t, protocol),
        "## Comparison (D1)",
        "",
        *publication_lines(t),
        *gating_lines(rd, gating),
        *comparison_lines(rd, t, protocol.models, smoke_args(rd, protocol), resolved),
        "## Configurations",
        "",
        *configurations_lines(rd, t, protocol.models, smoke_args(rd, protocol)),
        *(next_steps.markdown_lines(rd, t, protocol) if t.preview else []),
        *machine_lines(rd, t, protocol),
        *aa_lines(rd, t, protocol),
        *overview.compile_cost_lines(rd, t, protocol),
        *overview.plan_notes(rd),
        *footprint_lines(rd.root),  # §8, where the series measured images
        *_side_lines(rd, t, protocol),
        *(shipped_lines(differs, None) if differs else []),
    ]
    odd = t.runs[~t.runs["status"].isin([RunStatus.OK, RunStatus.NOT_PROFILED])]
    if len(odd):
        lines += ["## Runs that gave no time", ""]
        for _, r in odd.iterrows():
            lines.append(
                f"- run {r['run_id']} {r['config']}: {r['status']}: {r['reason']} "
                f"([logs]({r['log_dir']}))"
            )
        lines.append("")
    lines += _amendment_lines(rd, protocol)
    text = "\n".join(lines)
    smoke_scaling = smoke_args(rd, protocol)
    if earlier or smoke_scaling is None:
        return text  # §9: M1's size sentence travels with every M1 number
    return _described_once(text, t, protocol, smoke_scaling)


def _title(rd: ResultsDir, t: Tables, protocol: Protocol, differs: Shipped | None) -> str:
    """The report's title with its labels: rule 9's and rule 6's, D3's, a protocol other than
    the shipped one, an A/A not level."""
    manifest = rd.manifest()
    found = rd.versions()
    other = f" — {differs.label()}" if differs and not differs.shipped else ""
    label = f" — {preparation_label(found)}" if is_preparation(found) else ""
    label += other
    label += "".join(f" — {x}" for x in labels(t))
    if level := aa.title_label(t.aa):  # the kit's diagnostic: this card's A/A not level
        label += f" — {level}"
    smoke = " (CPU smoke series: scaled-down models, not a protocol measurement)"
    title = f"# {protocol.name} series on {manifest.card}{smoke if manifest.smoke else ''}"
    # an earlier kit's directory keeps its title as made
    if manifest.smoke and resolution.in_pm(rd):
        # rule 6's label, the one disclaimer a smoke series needs (it is a preview whole)
        title = f"# {protocol.name} CPU smoke series — {states.PREVIEW} (scaled-down models)"
        label = other + (f" — {level}" if level else "")
    return title + label


def _amendment_lines(rd: ResultsDir, protocol: Protocol) -> list[str]:
    """The amendments in force, each in full; a smoke series', which measures nothing they
    govern, named in one line (an earlier kit's directory keeps its list as made)."""
    lines = ["## Amendments in force", ""]
    in_force = set(rd.manifest().amendments_in_force)
    if rd.manifest().smoke and resolution.in_pm(rd):
        named = ", ".join(str(a.number) for a in protocol.amendments if a.number in in_force)
        return [*lines, f"Amendments {named}; each in full in `protocol.toml`.", ""]
    for a in protocol.amendments:
        if a.number in in_force:
            lines.append(f"- Amendment {a.number}, {a.date}: {a.title}. {a.reason}")
    return [*lines, ""]


def _described_once(text: str, t: Tables, protocol: Protocol, smoke: list[str]) -> str:
    """A smoke series' description of each scaled-down model where it first stands, and its
    short name ("M1, scaled down") wherever it stood again."""
    for model in dict.fromkeys(t.configurations["model"]):
        said = model_words(protocol.models, model, smoke)
        short = model_short(protocol.models, model, smoke=True)
        first = text.find(said)
        if first < 0 or said == short:
            continue
        cut = first + len(said)
        text = text[:cut] + text[cut:].replace(said, short)
    return text


def _side_lines(rd: ResultsDir, t: Tables, protocol: Protocol) -> list[str]:
    """Amendment 2's libraries and §6's kernel families and graph breaks, headed in words."""
    lines = ["## What each side opened (amendment 2, discarded runs)", ""]
    if not t.libraries.empty:
        words = models_of(t, t.libraries, protocol, rd)
        text = f"NVIDIA libraries each configuration's discarded run opened; {words}"
        lines += [caption(t, text), ""]
    ids = t.libraries["config"] if not t.libraries.empty else pd.Series([], dtype=str)
    lines += sidetables.library_lines(t.libraries, dict(zip(ids, names(rd, t, ids))))
    lines += ["", "## Profiled runs and graph breaks (§6)", ""]
    if not t.kernel_families.empty:
        words = models_of(t, t.kernel_families, protocol, rd)
        text = f"Kernel families, labelled as the {kernels.KERNEL_TIME_LABEL}; {words}"
        lines += [caption(t, text), ""]
        f = t.kernel_families
        shown = pd.DataFrame(
            {
                "configuration": f["config"],
                "named (§9)": names(rd, t, f["config"]),
                KERNEL_FAMILY: f["family"],
                "kernel time (ms)": f["total_time_ns"] / 1e6,
                "launches": f["instances"],
                "share of kernel time": f["share"],
            }
        )
        lines += [_dashed(shown).to_markdown(index=False, floatfmt=".3f", missingval="—"), ""]
    if not t.graph_breaks.empty:
        words = models_of(t, t.graph_breaks, protocol, rd)
        lines += [caption(t, f"Graph breaks and recompiles (§6); {words}"), ""]
        g = t.graph_breaks
        breaks = pd.DataFrame(
            {
                "configuration": g["config"],
                "named (§9)": names(rd, t, g["config"]),
                "run": g["status"],
                GRAPH_BREAKS: g["graph_breaks"],
                "break sites": g["break_sites"],
                "recompiles": g["recompiles"],
            }
        )
        lines += [_dashed(breaks).to_markdown(index=False, missingval="—"), ""]
    lines += [f"- {m}" for m in t.missing] or ["- every separate record is present"]
    return [*lines, ""]


def _dashed(df: pd.DataFrame) -> pd.DataFrame:
    """A table whose missing cells print "—", as the rest of the report, never `nan`
    (summary.json's null)."""
    return df.astype(object).where(df.notna(), None)


def gating_lines(rd: ResultsDir, gating: GatingJson | None) -> list[str]:
    """Which correctness check gave each configuration its status (rule 6): its directory and
    the program it ran, by SHA-256; a check binds only the program the series measured."""
    if gating is None and (rd.root / GATING).exists():
        gating = rd.read_json(GATING)
    if not gating:
        return []
    program = gating.get("contender_sha256") or "not recorded"
    lines = [
        f"Correctness checks, each bound to the program it ran: this series' contender has "
        f"SHA-256 `{program}`.",
        "",
    ]
    for key, status in (gating.get("statuses") or {}).items():
        named = [
            f"method {g['method']} on {g['card']}: `{g['check_dir']}` (sha256 "
            f"{str(g['contender_sha256'])[:12]}…)"
            for g in (gating.get("gated_by") or {}).get(key, [])
        ]
        lines.append(f"- {key}: {status}" + (f"; gated by {'; '.join(named)}" if named else ""))
    return [*lines, ""]


# the headers by which report.html finds these tables' rows (kit.report.html.SEPARATE)
KERNEL_FAMILY = "kernel family"
GRAPH_BREAKS = "graph breaks"


def publication_lines(t: Tables) -> list[str]:
    """Rule 6 said once above the tables: what is shown, and what is withheld and why."""
    if t.preview:
        return [
            f"**{states.PREVIEW}**: every complete configuration's time is shown, whether or "
            "not its correctness check passed (§3 rule 6 publishes a speed only after it has).",
            "",
        ]
    return [
        "A speed is given only for a configuration whose correctness check passed for its "
        "model, precision and contender build (§3 rule 6, amendment 7.3); the others read "
        f"“{states.WITHHELD_NOT_CHECKED}” or “{states.WITHHELD_FAILED}”.",
        "",
    ]

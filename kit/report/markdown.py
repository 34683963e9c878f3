"""The words around the numbers (§9): the Markdown report of a results directory.

Formatting functions return text and print nothing. The wording rules live here, so no other
module can publish a number without them: PyTorch is named with its version, mode, precision and
attention kernels; every M1 number travels with its model's size; "faster", "level" and
"slower" appear only as D1's verdicts; what is not a protocol result is labelled a hypothesis.
"""

from __future__ import annotations

import math

import pandas as pd

from kit.engine import store
from kit.engine.store import ResultsDir
from kit.report import separate as sidetables
from kit.report import states
from kit.report.footprint import footprint_lines
from kit.status import RunStatus
from kit.telemetry import kernels

PREPARATION = "preparation (a development build, rule 9)"
# §9, word for word: how kernels are made
KERNELS_SENTENCE = (
    "Mica writes every kernel in its intermediate language; Dragon’s NVIDIA provider renders "
    "it as CUDA C, and NVIDIA’s NVRTC compiles it to the card’s machine code; matrix products "
    "run in cuBLAS."
)
DOMAIN = "mica-dev.com"  # §9: the domain


def ms(x: float) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x * 1e3:.3f}"


def mib(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x / 2**20:.0f}"


def range_ms(lo: float, hi: float) -> str:
    if math.isnan(lo):
        return "—"
    return f"{ms(lo)}–{ms(hi)}"


def pytorch_name(found: dict, mode: str, precision: str, attention: str) -> str:
    """§9: PyTorch is named with its version, mode, precision and attention kernels, always."""
    version = found.get("pytorch", {}).get("torch", "(version not recorded)")
    return f"PyTorch {version} {mode} mode, {precision}, attention: {attention}"


def recorded_versions(rd: ResultsDir) -> dict:
    path = rd.root / "versions.json"
    return rd.read_json("versions.json") if path.exists() else {}


def is_preparation(found: dict) -> bool:
    """Rule 9: a development build's numbers, or numbers under a torch other than the
    protocol's pin (--allow-torch), are preparation, wherever they appear."""
    if found.get("pytorch", {}).get("torch_other_allowed"):
        return True
    return found.get("contender", {}).get("build_kind") == "development"


def preparation_label(found: dict) -> str:
    """Rule 9's label for a directory's numbers, naming why they are preparation; "" if not."""
    pytorch = found.get("pytorch", {})
    if pytorch.get("torch_other_allowed"):
        return (
            f"preparation (torch {pytorch.get('torch')}, not the protocol's "
            f"{pytorch.get('torch_pinned')}, rule 9)"
        )
    return PREPARATION if is_preparation(found) else ""


def model_words(protocol_models: dict, model: str, smoke_args: list[str] | None = None) -> str:
    """§9: every number travels with its model's size (M1's sentence above all).

    A smoke series' model is the protocol's scaled down, and is never given the real one's size.
    """
    m = protocol_models.get(model)
    if m is None:
        return model
    if smoke_args is not None:
        size = m.parameters.replace(" ", "-")
        return (
            f"{m.label} ({model}) scaled down for the CPU smoke series "
            f"({' '.join(smoke_args)}), not the protocol's {size}-parameter model"
        )
    return f"{m.label} ({model}): {m.size_sentence}"


def smoke_args(rd: ResultsDir, protocol) -> list[str] | None:
    """The smoke series' scaling of the models, or None for a protocol series."""
    return list(protocol.smoke.args) if rd.manifest()["series"].get("smoke") else None


def labels(t) -> list[str]:
    """What every title, table caption and plot of a series says of itself (rule 6, D3)."""
    out = []
    if t.preview:
        out.append(states.PREVIEW)
    if not t.card_named:
        out.append(states.NOT_NAMED)
    return out


def caption(t, text: str) -> str:
    """A table's caption: what it shows, and the series' labels beside every number."""
    return caption_words(text, labels(t))


def caption_words(text: str, said: list[str]) -> str:
    return f"*{'; '.join([text, *said])}.*"


def attention_by_config(t) -> dict[str, str]:
    """Each profiled PyTorch configuration's attention, named from its kernels (§6)."""
    out: dict[str, str] = {}
    if not t.kernels.empty:
        for config, rows in t.kernels.groupby("config", sort=False):
            if str(config).split("/")[2:3] == ["pytorch"]:
                out[str(config)] = kernels.attention_kind(rows)
    return out


def config_named(found: dict, attention: dict[str, str], c) -> str:
    """§9: a configuration as the report names it; PyTorch with version, mode, precision and
    attention kernels, every time."""
    if c["side"] == "pytorch":
        kind = attention.get(c["config"], "not profiled")
        return pytorch_name(found, c["variant"], c["precision"], kind)
    role = "primary" if c.get("primary", True) else "secondary"
    return f"contender {c['variant']} ({role}), {c['precision']}"


def step_cells(median: float, lo: float, hi: float, state: str, publication: str):
    """The median and range cells: the numbers, or the state, or why they are withheld."""
    if state != states.State.COMPLETE.value:
        return state, "—"
    if publication.startswith("withheld"):
        return publication, "—"
    return ms(median), range_ms(lo, hi)


def comparison_lines(rd: ResultsDir, t, models: dict, smoke: list[str] | None = None) -> list[str]:
    comparison = t.comparison
    found = recorded_versions(rd)
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
        rows = []
        for _, r in g.iterrows():
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
            rows.append(
                {
                    "contender build": f"{r['contender_build']} ({r['build_role']})",
                    "state": state,
                    "runs": r["contender_runs"],
                    "median ms": median,
                    "range ms": spread,
                    "against": torch,
                    "PyTorch runs": r["pytorch_runs"],
                    "PyTorch median ms": p_median,
                    "PyTorch range ms": p_spread,
                    "ratio P/M": ratio,
                    "verdict": r["verdict"],
                }
            )
        lines.append(pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True))
        lines.append("")
        for _, r in g.iterrows():
            if r["times_alone_say"] and r["verdict"] != r["times_alone_say"]:
                lines.append(
                    f"- Hypothesis, not a protocol result: by step times alone, "
                    f"{r['contender_build']} would read *{r['times_alone_say']}*; it has no "
                    f"verdict until its correctness check passes (§3 rule 6)."
                )
            if r["pytorch_modes_without_time"]:
                lines.append(
                    f"- PyTorch modes without a time (amendments 5 and 8): "
                    f"{r['pytorch_modes_without_time']}; the fastest of the complete modes "
                    f"is compared."
                )
        lines.append("")
    return lines


def configurations_lines(
    rd: ResultsDir, t, models: dict, smoke: list[str] | None = None
) -> list[str]:
    """Per model, every configuration in one table: deficits and states beside the leads."""
    configs = t.configurations
    found = recorded_versions(rd)
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
                    "median ms": median,
                    "range ms": spread,
                    "peak memory MiB": mib(c.get("peak_memory_bytes")),
                    "notes": c["notes"],
                }
            )
        lines += [pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True), ""]
    return lines


def versions_line(found: dict) -> str:
    """Rule 4's versions in one line; a version not recorded (null) is left out, never "None"."""
    py = found.get("pytorch", {})
    card = found.get("card", {})
    parts = [f"card {card.get('name', '?')}"]
    for key in ("driver_version", "cuda_driver_version", "uuid"):
        if card.get(key):
            parts.append(f"{key} {card[key]}")
    for key in ("python", "torch", "triton", "cudnn", "numpy", "cuda_runtime", "nanogpt_commit"):
        if py.get(key) is not None:
            parts.append(f"{key} {py[key]}")
    # the key kit.executors.docker.connection.versions() writes
    engine = found.get("executor", {})
    if engine.get("docker_engine"):
        parts.append(f"Docker {engine['docker_engine']}")
    return ", ".join(parts) + " (all in versions.json)"


def markdown_report(rd: ResultsDir, t) -> str:

    protocol = store.load_protocol(rd)
    manifest = rd.manifest()
    plan = rd.read_json(store.PLAN)
    series = manifest["series"]
    found = recorded_versions(rd)
    label = f" — {preparation_label(found)}" if is_preparation(found) else ""
    label += "".join(f" — {x}" for x in labels(t))
    smoke = " (CPU smoke series: scaled-down models, not a protocol measurement)"
    title = f"# {protocol.name} series on {series['card']}{smoke if series['smoke'] else ''}"
    models = sorted(dict.fromkeys(t.configurations["model"]), key=list(protocol.models).index)
    sizes = [model_words(protocol.models, m, smoke_args(rd, protocol)) for m in models]
    lines = [
        title + label,
        "",
        f"- {DOMAIN}: every number below links its results directory, [this directory](./) (§9)",
        f"- how kernels are made (§9): “{KERNELS_SENTENCE}”",
        *[f"- {words}" for words in sizes],
        f"- date {manifest['date_utc']}, host {manifest['host']}, executor {manifest['executor']}",
        f"- kit {manifest['kit_version']} ({manifest['kit_commit'][:12]}), protocol "
        f"{protocol.name} sha256 {manifest['protocol_sha256']}",
        f"- contender: {series.get('extra', {}).get('contender', 'none given')}"
        + (f", which says: {found['contender']['says']!r}" if "contender" in found else ""),
        f"- versions: {versions_line(found)}",
        f"- step time: the outside clock, (stamp of step {protocol.timing.window[1]}'s line − "
        f"stamp of step {protocol.timing.window[0]}'s) / "
        f"{protocol.timing.window[1] - protocol.timing.window[0]} (§5); every number below "
        f"is recomputed from the raw logs under `runs/` by `micakit report`",
        "",
        "## Comparison (D1)",
        "",
        *publication_lines(t),
        *comparison_lines(rd, t, protocol.models, smoke_args(rd, protocol)),
        "## Configurations",
        "",
        *configurations_lines(rd, t, protocol.models, smoke_args(rd, protocol)),
    ]
    adjustments = rd.root / "adjustments.json"
    if adjustments.exists():
        lines += ["## Batch halved (amendment 5.1)", ""]
        for model, a in rd.read_json("adjustments.json").items():
            lines.append(
                f"- {model}: both sides train a batch of {a['batch_size']}: {a['because']}"
            )
        lines.append("")
    if plan.get("not_measured"):
        lines += ["## Not measured", ""]
        lines += [f"- {n['model']} {n['precision']}: {n['why']}" for n in plan["not_measured"]]
        lines.append("")
    lines += footprint_lines(rd.root)  # §8, where the series measured images
    lines += ["## What each side opened (amendment 2, discarded runs)", ""]
    if not t.libraries.empty:
        words = _models_of(t, t.libraries, protocol, rd)
        text = f"NVIDIA libraries each configuration's discarded run opened; {words}"
        lines += [caption(t, text), ""]
    ids = t.libraries["config"] if not t.libraries.empty else pd.Series([], dtype=str)
    names = dict(zip(ids, _names(rd, t, ids)))
    lines += sidetables.library_lines(t.libraries, names)
    lines.append("")
    lines += ["## Profiled runs and graph breaks (§6)", ""]
    if not t.kernel_families.empty:
        words = _models_of(t, t.kernel_families, protocol, rd)
        text = f"Kernel families, labelled as the {kernels.KERNEL_TIME_LABEL}; {words}"
        lines += [caption(t, text), ""]
        shown = t.kernel_families.assign(ms=t.kernel_families["total_time_ns"] / 1e6)
        shown = shown.assign(named=_names(rd, t, shown["config"]))
        shown = shown[["config", "named", "family", "ms", "instances", "share"]]
        lines += [shown.to_markdown(index=False, floatfmt=".3f"), ""]
    if not t.graph_breaks.empty:
        words = _models_of(t, t.graph_breaks, protocol, rd)
        lines += [caption(t, f"Graph breaks and recompiles (§6); {words}"), ""]
        breaks = t.graph_breaks.assign(named=_names(rd, t, t.graph_breaks["config"]))
        lines += [breaks.to_markdown(index=False), ""]
    lines += [f"- {m}" for m in t.missing] or ["- every separate record is present"]
    lines.append("")
    odd = t.runs[~t.runs["status"].isin([RunStatus.OK, RunStatus.NOT_PROFILED])]
    if len(odd):
        lines += ["## Runs that gave no time", ""]
        for _, r in odd.iterrows():
            lines.append(
                f"- run {r['run_id']} {r['config']}: {r['status']}: {r['reason']} "
                f"([logs]({r['log_dir']}))"
            )
        lines.append("")
    lines += ["## Amendments in force", ""]
    in_force = set(manifest.get("amendments_in_force", []))
    for a in protocol.amendments:
        if a.number in in_force:
            lines.append(f"- Amendment {a.number}, {a.date}: {a.title}. {a.reason}")
    lines.append("")
    return "\n".join(lines)


def publication_lines(t) -> list[str]:
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


def _names(rd: ResultsDir, t, config_ids: pd.Series) -> list[str]:
    """§9's naming of each configuration id of a table."""
    found = recorded_versions(rd)
    attention = attention_by_config(t)
    by_id = {c["config"]: c for _, c in t.configurations.iterrows()}
    return [config_named(found, attention, by_id[c]) if c in by_id else str(c) for c in config_ids]


def _models_of(t, table: pd.DataFrame, protocol, rd: ResultsDir) -> str:
    """§9: the size sentence of every model whose numbers a table holds."""
    by_id = dict(zip(t.configurations["config"], t.configurations["model"]))
    models = dict.fromkeys(by_id.get(c, "") for c in table["config"])
    words = [model_words(protocol.models, m, smoke_args(rd, protocol)) for m in models if m]
    return "; ".join(words)

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
from kit.report.footprint import footprint_lines
from kit.status import RunStatus
from kit.telemetry import kernels

PREPARATION = "preparation (a development build, rule 9)"


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


def comparison_lines(
    rd: ResultsDir, comparison: pd.DataFrame, models: dict, smoke: list[str] | None = None
) -> list[str]:
    found = recorded_versions(rd)
    lines = []
    if comparison.empty:
        return ["No contender configuration ran in this series, so there is no comparison.", ""]
    for (card, model, precision), g in comparison.groupby(
        ["card", "model", "precision"], sort=False
    ):
        lines += [f"### {card} · {model_words(models, model, smoke)} · {precision}", ""]
        rows = []
        for _, r in g.iterrows():
            attention = r.get("pytorch_attention", "") or "not profiled"
            torch = (
                pytorch_name(found, r["pytorch_fastest_mode"], precision, attention)
                if r["pytorch_fastest_mode"]
                else "no PyTorch mode ran"
            )
            ratio = "—" if math.isnan(r["ratio"]) else f"{r['ratio']:.3f}"
            rows.append(
                {
                    "contender build": f"{r['contender_build']} ({r['build_role']})",
                    "runs": r["contender_runs"],
                    "median ms": ms(r["contender_median_step_s"]),
                    "range ms": range_ms(r["contender_min_step_s"], r["contender_max_step_s"]),
                    "against": torch,
                    "PyTorch runs": r["pytorch_runs"],
                    "PyTorch median ms": ms(r["pytorch_median_step_s"]),
                    "PyTorch range ms": range_ms(r["pytorch_min_step_s"], r["pytorch_max_step_s"]),
                    "ratio P/M": ratio,
                    "verdict": r["verdict"],
                }
            )
        lines.append(pd.DataFrame(rows).to_markdown(index=False))
        lines.append("")
        for _, r in g.iterrows():
            if r["times_alone_say"] and r["verdict"] != r["times_alone_say"]:
                lines.append(
                    f"- Hypothesis, not a protocol result: by step times alone, "
                    f"{r['contender_build']} would read *{r['times_alone_say']}*; it has no "
                    f"verdict until its correctness check passes (§3 rule 6)."
                )
            if r["pytorch_modes_out_of_memory"]:
                lines.append(
                    f"- PyTorch modes out of memory (amendment 5): "
                    f"{r['pytorch_modes_out_of_memory']}; the fastest of the modes that ran "
                    f"is compared."
                )
        lines.append("")
    return lines


def configurations_lines(
    configs: pd.DataFrame, models: dict, smoke: list[str] | None = None
) -> list[str]:
    rows = []
    for _, c in configs.iterrows():
        rows.append(
            {
                "model": c["model"],
                "precision": c["precision"],
                "side": c["side"],
                "mode or build": c["variant"],
                "runs": c["runs"],
                "median ms": ms(c["median_step_s"]),
                "range ms": range_ms(c["min_step_s"], c["max_step_s"]),
                "peak memory MiB": mib(c.get("peak_memory_bytes")),
                "notes": c["notes"],
            }
        )
    sizes = [f"- {model_words(models, m, smoke)}" for m in dict.fromkeys(configs["model"])]
    return [pd.DataFrame(rows).to_markdown(index=False), "", *sizes]


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
    # the key kit.executors.docker.engine.versions() writes
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
    smoke = " (CPU smoke series: scaled-down models, not a protocol measurement)"
    title = f"# {protocol.name} series on {series['card']}{smoke if series['smoke'] else ''}"
    lines = [
        title + label,
        "",
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
        *comparison_lines(rd, t.comparison, protocol.models, smoke_args(rd, protocol)),
        "## Configurations",
        "",
        *configurations_lines(t.configurations, protocol.models, smoke_args(rd, protocol)),
        "",
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
    lines += sidetables.library_lines(t.libraries)
    lines.append("")
    lines += ["## Profiled runs and graph breaks (§6)", ""]
    if not t.kernel_families.empty:
        lines.append(f"Kernel families, labelled as the {kernels.KERNEL_TIME_LABEL}:")
        lines.append("")
        shown = t.kernel_families.assign(ms=t.kernel_families["total_time_ns"] / 1e6)
        shown = shown[["config", "family", "ms", "instances", "share"]]
        lines += [shown.to_markdown(index=False, floatfmt=".3f"), ""]
    if not t.graph_breaks.empty:
        lines += [t.graph_breaks.to_markdown(index=False), ""]
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

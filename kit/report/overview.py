"""What report.md says before and after its tables: the summary at the top, the series'
metadata in a collapsible block, and what compiling costs.

The summary gives one line per model and precision: D1's verdict with the two medians and
their ratio, or why there is none. It is the line most often read alone, so it shows a time
only beside a verdict or labelled as preparation (a preview, whose verdict cell says so): a
configuration withheld (rule 6), out of memory, void, failed or incomplete reads its state and
no number.
"""

from __future__ import annotations

import math

import pandas as pd

from kit.protocol.load import Protocol
from kit.report import compile_cost, flags, resolution, states, words
from kit.report.tables import Tables
from kit.report.verdict import FASTER, LEVEL, SLOWER
from kit.results.store import ResultsDir

# report.md's collapsible block; report.html turns these two paragraphs into <details>
DETAILS_SUMMARY = "How this series was run: metadata and versions"
DETAILS_OPEN = f"<details><summary>{DETAILS_SUMMARY}</summary>"
DETAILS_CLOSE = "</details>"
SUMMARY = "Summary"
VERDICTS = (FASTER, LEVEL, SLOWER)
COMPILE_COSTS = "What compiling costs"
WARMUP = "warm-up median (s)"  # the header by which report.html finds the table's rows
VERSION_WORDS = {
    "card": "card",
    "driver_version": "NVIDIA driver",
    "cuda_driver_version": "CUDA version of the driver",
    "uuid": "card UUID",
    "python": "Python",
    "torch": "torch",  # the package; "PyTorch" names a configuration (§9)
    "triton": "Triton",
    "cudnn": "cuDNN",
    "numpy": "NumPy",
    "cuda_runtime": "CUDA runtime",
    "nanogpt_commit": "nanoGPT commit",
}


def _said(r: pd.Series, as_table: bool = True) -> str:
    """The summary's verdict cell: D1's verdict, or "no verdict" with the state or reason; a
    preview's in the comparison table's words (`as_table`; the title says it is preparation),
    else as an earlier kit said it."""
    state = str(r["contender_state"])
    word = state.split(":")[0]
    if word in (states.State.VOID, states.State.FAILED):
        # its reason quotes clock readings: said once, in the configurations' table
        return f"no verdict: {word} (why: the configurations below)"
    if state != states.State.COMPLETE.value:
        return f"no verdict: {state}"
    publication = states.Publication.of(r["publication"])
    if publication is states.Publication.PREVIEW:
        return str(r["verdict"]) if as_table else f"no verdict: {states.PREVIEW}"
    if publication is states.Publication.WITHHELD:
        return f"no verdict: {r['publication']}"
    return str(r["verdict"])


NONE_RAN = {  # the summary's row of a model and precision no contender configuration ran
    "contender build": "none ran",
    "verdict": "no verdict: no contender configuration ran",
    "contender median (ms)": "—",
    "against": "—",
    "PyTorch median (ms)": "—",
    "ratio P/M": "—",
}


def summary_lines(rd: ResultsDir, t: Tables, protocol: Protocol) -> list[str]:
    """One line per card, model, precision and contender build, in the comparison's order."""
    found = rd.versions()
    smoke = words.smoke_args(rd, protocol) is not None
    configs = t.configurations
    cards = configs["card"].nunique() > 1
    rows = []
    compared = t.comparison
    groups = configs[["card", "model", "precision"]].drop_duplicates()
    for card, model, precision in groups.itertuples(index=False):
        mine = compared[
            (compared["card"] == card)
            & (compared["model"] == model)
            & (compared["precision"] == precision)
        ]
        base = {"card": card} if cards else {}
        base |= {"model": words.model_short(protocol.models, model, smoke), "precision": precision}
        if mine.empty:
            rows.append(base | NONE_RAN)
            continue
        for _, r in mine.iterrows():
            said = _said(r, resolution.in_pm(rd))
            # a time beside a verdict, or a preview's labelled as preparation (the first
            # screen shows the numbers a reader came for); never a withheld or incomplete one
            preview = states.Publication.of(r["publication"]) is states.Publication.PREVIEW
            complete = str(r["contender_state"]) == states.State.COMPLETE.value
            shown = said in VERDICTS or (preview and complete)
            mode = r["pytorch_fastest_mode"]
            against = (
                words.pytorch_name(found, mode, precision, r["pytorch_attention"] or "—")
                if mode
                else "no PyTorch mode is complete"
            )
            rows.append(
                base
                | {
                    "contender build": f"{r['contender_build']} ({r['build_role']})",
                    "verdict": said,
                    "contender median (ms)": words.ms(r["contender_median_step_s"])
                    if shown
                    else "—",
                    "against": against,
                    "PyTorch median (ms)": words.ms(r["pytorch_median_step_s"]) if shown else "—",
                    "ratio P/M": f"{r['ratio']:.3f}" if shown else "—",
                }
            )
    text = (
        "Summary, one line per model and precision: D1's verdict with both medians and their "
        "ratio (PyTorch's median over the contender's), or why there is none; "
        f"{words.models_of(t, configs, protocol, rd)}"
    )
    table = pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)
    return [f"## {SUMMARY}", "", words.caption(t, text), "", table, "", *_conditions(rd, t)]


def _conditions(rd: ResultsDir, t: Tables) -> list[str]:
    """§5's flags beside the numbers they may move (a directory an earlier kit published keeps
    its summary as made, for verify)."""
    said = flags.headline(t.runs, t.aa) if resolution.in_pm(rd) else ""
    return [f"**{said}.**", ""] if said else []


def metadata_lines(rd: ResultsDir, t: Tables, protocol: Protocol) -> list[str]:
    """The series' conditions (rule 4, §9), folded: the reader opens them when wanted."""
    manifest = rd.manifest()
    found = rd.versions()
    models = sorted(dict.fromkeys(t.configurations["model"]), key=list(protocol.models).index)
    sizes = [words.model_words(protocol.models, m, words.smoke_args(rd, protocol)) for m in models]
    contender = found.sides.get("contender")
    says = f", which says: {contender['says']!r}" if contender else ""
    window = protocol.timing.window
    rows = [(VERSION_WORDS.get(k, k), v) for k, v in words.versions_rows(found)]
    versions = pd.DataFrame(rows, columns=["software", "version"])
    return [
        DETAILS_OPEN,
        "",
        f"- {words.DOMAIN}: every number below links its results directory, "
        "[this directory](./) (§9)",
        f"- how kernels are made (§9): “{words.KERNELS_SENTENCE}”",
        *[f"- {w}" for w in sizes],
        f"- date {manifest.date_utc}, host {manifest.host}, executor {manifest.executor}",
        f"- kit {manifest.kit_version} (commit {manifest.kit_commit[:12]}), protocol "
        f"{protocol.name} (sha256 {manifest.protocol_sha256[:12]}…, whole in manifest.json)",
        f"- contender: {manifest.spec.get('extra', {}).get('contender', 'none given')}{says}",
        f"- step time: the outside clock, (stamp of step {window[1]}'s line − stamp of step "
        f"{window[0]}'s) / {window[1] - window[0]} (§5); every number below is recomputed from "
        "the raw logs under `runs/` by `micakit report`",
        "",
        words.caption(t, "Software versions (rule 4), every one in versions.json"),
        "",
        versions.to_markdown(index=False, disable_numparse=True),
        "",
        DETAILS_CLOSE,
        "",
    ]


def _break_even(row: pd.Series) -> str:
    v = row["break_even_steps_vs_eager"]
    if row["variant"] == "eager":
        return compile_cost.REFERENCE
    if v is None or (isinstance(v, float) and math.isnan(v)):
        why = row.get("break_even_why") or compile_cost.NO_EAGER
        return f"— ({why})"
    if v == math.inf:
        return "never"
    if v == 0:
        return "0: it starts no later than eager"
    return f"{int(v):,}"


def _extra(row: pd.Series) -> str:
    v = row.get("extra_warmup_vs_eager_s")
    if row["variant"] == "eager" or v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:+.3f}"


def compile_cost_lines(rd: ResultsDir, t: Tables, protocol: Protocol) -> list[str]:
    """What compiling costs, per complete PyTorch mode whose times the report may show."""
    lines = [
        f"## {COMPILE_COSTS}",
        "",
        "Per complete PyTorch mode: its warm-up, the stamp of its first step line − the "
        "program's start (start-up, compilation and the first step, as the clock read them), "
        "median and range over its timed runs; against eager on the same card, model and "
        "precision, its extra warm-up (the difference of the medians) and its break-even run "
        "length, the number of steps after which it has saved that extra warm-up (never, where "
        "eager's steps are quicker). Each is given only where the runs tell the two "
        "modes apart, where the ranges of their warm-ups (and for the break-even, of their step "
        "times) do not overlap; elsewhere the table says which ranges overlap. "
        "From the stamps alone; every digit is in `tables/compile_costs.csv`.",
        "",
    ]
    costs = t.compile_costs
    if costs.empty:
        return [*lines, "No PyTorch mode of this series is complete, so none has a warm-up.", ""]
    publication = dict(zip(t.configurations["config"], t.configurations["publication"]))
    why = [str(publication.get(c, "")) for c in costs["config"]]
    held = [states.Publication.of(w) is states.Publication.WITHHELD for w in why]
    order = {c: i for i, c in enumerate(t.configurations["config"])}  # eager first, as planned
    shown = costs[[not h for h in held]] if why else costs
    shown = shown.sort_values("config", key=lambda x: x.map(order))
    withheld = pd.Series([w for w, h in zip(why, held) if h], dtype=str).value_counts()
    if not shown.empty:
        sizes = words.models_of(t, shown, protocol, rd)
        text = f"What compiling costs, per complete PyTorch mode; {sizes}"
        named = words.names(rd, t, shown["config"])
        rows = [
            {
                "configuration": r["config"],
                "named (§9)": name,
                "timed runs": int(r["runs"]),
                WARMUP: f"{r['median_warmup_s']:.3f}",
                "warm-up range (s)": f"{r['min_warmup_s']:.3f}–{r['max_warmup_s']:.3f}",
                "extra warm-up against eager (s)": _extra(r),
                "break-even against eager (steps)": _break_even(r),
            }
            for name, (_, r) in zip(named, shown.iterrows())
        ]
        table = pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)
        lines += [words.caption(t, text), "", table, ""]
    # rule 6: the reason is said once, for every mode it withholds
    for reason, n in withheld.sort_index().items():
        lines.append(f"- The warm-up of {n} mode{'s' if n > 1 else ''} is not shown: {reason}.")
    return [*lines, ""] if len(withheld) else lines


def plan_notes(rd: ResultsDir) -> list[str]:
    """Amendment 5.1's halved batches and the configurations the plan could not measure."""
    lines: list[str] = []
    if (rd.root / "adjustments.json").exists():
        lines += ["## Batch halved (amendment 5.1)", ""]
        for model, a in rd.read_json("adjustments.json").items():
            lines.append(
                f"- {model}: both sides train a batch of {a['batch_size']}: {a['because']}"
            )
        lines.append("")
    not_measured = rd.plan().not_measured
    if not_measured:
        lines += ["## Not measured", ""]
        lines += [f"- {n.model} {n.precision}: {n.why}" for n in not_measured]
        lines.append("")
    return lines

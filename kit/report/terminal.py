"""The result on the terminal, in hyperfine's manner: what a series (or `micakit report` on a
terminal) ends with.

Per card, model and precision: each side's median and range, the ratio and D1's verdict as
the report has it, or why there is none; every configuration without a time with its state;
then the commands that apply next (`micakit verify`, the checks rule 6 waits for, `micakit
publish --checks`). Every number is the tables' own (recomputed from the raw logs), and a time
rule 6 withholds is not shown here either. Formatting functions return lines.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable

import pandas as pd

from kit.protocol import shipped
from kit.protocol.load import Protocol
from kit.report import flags, intervals, next_steps, resolution, states, words
from kit.report.tables import Tables
from kit.results.planned import PYTORCH
from kit.results.store import ResultsDir


def _times(median: float, low: float, high: float, runs: int) -> str:
    if math.isnan(median):
        return ""
    return (
        f"median {median * 1e3:8.3f} ms/step   range {low * 1e3:.3f} … {high * 1e3:.3f} ms"
        f"   ({runs} runs)"
    )


def _side_line(name: str, times: str, publication: str) -> str:
    name = f"{name:<36}"[: max(36, len(name))] + "  "
    if times:
        return f"  {name}{times}"
    if states.Publication.of(publication) is states.Publication.WITHHELD:
        return f"  {name}{publication}"
    return f"  {name}no time"


def _group_lines(rows: pd.DataFrame, pytorch_ran: bool) -> list[str]:
    """Each contender build, PyTorch's fastest complete mode once, then per build the ratio
    and D1's verdict as the comparison has it, or why there is none."""
    out = []
    for _, r in rows.iterrows():
        times = _times(r["contender_median_step_s"], r["contender_min_step_s"],
                       r["contender_max_step_s"], int(r["contender_runs"]))  # fmt: skip
        name = f"contender {r['contender_build']} ({r['build_role']} build)"
        out.append(_side_line(name, times, str(r["publication"])))
    first = rows.iloc[0]
    mode = first["pytorch_fastest_mode"]
    if mode:
        times = _times(first["pytorch_median_step_s"], first["pytorch_min_step_s"],
                       first["pytorch_max_step_s"], int(first["pytorch_runs"]))  # fmt: skip
        out.append(_side_line(f"PyTorch {mode} mode (fastest)", times, str(first["publication"])))
    else:
        out.append("  PyTorch: " + ("no mode is complete" if pytorch_ran else "not in this series"))
    for _, r in rows.iterrows():
        ratio = r["ratio"]
        said = "" if math.isnan(float(ratio)) else f"ratio P/M {ratio:.3f} · "
        out.append(f"  {r['contender_build']}: {said}{r['verdict']}")
    return out


def sentence(t: Tables, r: pd.Series) -> str:
    """One comparison in hyperfine's manner: "contender mica ran 2.31× faster than PyTorch
    default mode (95% interval 2.20–2.40)", in the protocol's direction (P/M), or why there is
    no such line."""
    build = f"contender {r['contender_build']}"
    if math.isnan(float(r["ratio"])):
        if not r["pytorch_fastest_mode"]:
            return f"{build}: no sentence: no PyTorch mode is complete"
        if str(r["contender_state"]) != states.State.COMPLETE.value:
            return f"{build}: no sentence: {r['contender_state']}"
        return f"{build}: no sentence: {r['publication']}"
    ratio = float(r["ratio"])
    found = resolution.of_row(t.runs, r, t.aa)
    if found is None or found.interval_low is None or found.interval_high is None:
        runs = min(int(r["contender_runs"]), int(r["pytorch_runs"]))
        bounds = intervals.no_interval(runs)
    else:
        iv = intervals.Interval(found.ratio, found.interval_low, found.interval_high, found.level)
        bounds = intervals.shown(iv)
    against = f"PyTorch {r['pytorch_fastest_mode']} mode"
    if ratio >= 1:
        return f"{build} ran {ratio:.2f}× faster than {against} ({bounds})"
    return f"{build} ran {1 / ratio:.2f}× slower than {against} (P/M {ratio:.3f}; {bounds})"


def _no_time(t: Tables, card: str, model: str, precision: str) -> list[str]:
    """Every configuration of the group without a time, with its state (rule 5)."""
    c = t.configurations
    mine = c[(c["card"] == card) & (c["model"] == model) & (c["precision"] == precision)]
    lines = []
    for _, row in mine[mine["state"] != states.State.COMPLETE.value].iterrows():
        lines.append(f"  no time: {row['side']} {row['variant']}: {t.noted(row)}")
    return lines


def result_lines(rd: ResultsDir, t: Tables, protocol: Protocol) -> list[str]:
    """The result per card, model and precision, in the plan's order."""
    said = words.labels(t) + ([words.preparation_label(rd.versions())] if words.is_preparation(
        rd.versions()) else [])  # fmt: skip
    smoke = words.smoke_args(rd, protocol) is not None
    lines = []
    groups = t.configurations[["card", "model", "precision"]].drop_duplicates()
    for card, model, precision in groups.itertuples(index=False):
        title = f"{words.model_short(protocol.models, model, smoke)} ({model}) · {precision}"
        title += f" · {card}" + (f"  [{'; '.join(said)}]" if said else "")
        lines.append(title)
        cmp = t.comparison
        here = (cmp["card"] == card) & (cmp["model"] == model)
        rows = cmp[here & (cmp["precision"] == precision)]
        c = t.configurations
        mine = c[(c["card"] == card) & (c["model"] == model) & (c["precision"] == precision)]
        if not rows.empty:
            lines += _group_lines(rows, bool((mine["side"] == PYTORCH).any()))
        else:
            lines += _pytorch_only(t, card, model, precision)
        lines += _no_time(t, card, model, precision)
        flagged = flags.words(t.runs[t.runs["config"].isin(mine["config"])])
        if flagged:  # §5's flags beside the numbers they may move
            lines.append(f"  Conditions: {flagged}: a difference may be the machine's")
        lines.append("")
    if level := flags.aa_words(t.aa):
        lines += [f"Conditions: {level}", ""]
    sentences = [sentence(t, r) for _, r in t.comparison.iterrows()]
    return [*lines, *sentences, ""] if sentences else lines


def _pytorch_only(t: Tables, card: str, model: str, precision: str) -> list[str]:
    c = t.configurations
    mine = c[(c["card"] == card) & (c["model"] == model) & (c["precision"] == precision)]
    lines = []
    for _, r in mine[(mine["side"] == PYTORCH) & (mine["state"] == "complete")].iterrows():
        times = _times(r["median_step_s"], r["min_step_s"], r["max_step_s"], int(r["runs"]))
        lines.append(_side_line(f"PyTorch {r['variant']} mode", times, str(r["publication"])))
    lines.append("  no verdict: no contender configuration ran")
    return lines


def shipped_lines(found: shipped.Shipped) -> list[str]:
    """The block's first lines where the protocol is not the one the kit ships."""
    if found.shipped:
        return []
    return [
        f"PROTOCOL: {found.label()}: {found.sentence()}",
        *(f"  {line.replace('`', '')}" for line in found.lines()),
        "",
    ]


VARIABLE = "R"  # the results folder in the commands under "Next", set once above them


WIDTH = 96  # a command's lines under "Next", continued with a backslash past it


def _short(command: str, series: str) -> str:
    """A command with the results folder as "$R" (set above the commands), cut at its options
    into lines of at most WIDTH characters, each but the last ending in a backslash: short,
    and it runs as printed, pasted whole."""
    command = command.replace(f" {shlex.quote(series)}", f' "${VARIABLE}"')
    parts = command.split(" --")
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + len(part) + 3 > WIDTH:
            lines.append(f"--{part}")
        else:
            lines[-1] += f" --{part}"
    return " \\\n      ".join(lines)


def next_lines(
    rd: ResultsDir, t: Tables, protocol: Protocol, series: str, where: Callable[[str], str]
) -> list[str]:
    """The commands that apply next: the resume of an incomplete series first; verify; the
    checks rule 6 waits for; publish --checks. The results folder is "$R", set first."""
    c = next_steps.context(rd, protocol, series, where)
    waits = next_steps.waiting(t, c, protocol)
    lines = ["Next:", f"  {VARIABLE}={shlex.quote(series)}"]
    if (t.configurations["state"] == states.State.INCOMPLETE.value).any():
        lines.append(f'  micakit series --resume "${VARIABLE}"')
    lines.append(f'  micakit verify "${VARIABLE}"')
    if not waits:
        return lines
    lines.append("  rule 6: no verdict until the correctness checks pass:")
    for w in waits:
        wants = "; ".join(n.what for n in w.needs) or w.note
        lines.append(f"    {w.key} waits for {wants}")
    for command in next_steps.commands(waits):
        lines.append(f"  {_short(command, series)}")
    if any(next_steps.ELSEWHERE in x for x in next_steps.commands(waits)):
        lines.append(f"  ({next_steps.ELSEWHERE}/… is the folder of the series of the card named)")
    if any(w.needs for w in waits):
        lines.append(f"  {_short(next_steps.publish_command(c, waits), series)}")
    return lines


def block(
    rd: ResultsDir,
    t: Tables,
    protocol: Protocol,
    series: str,
    where: Callable[[str], str],
) -> str:
    """The whole block: a protocol other than the shipped one first, key by key (§3 rule 1);
    the result, where the report lies, the commands that apply next."""
    lines = ["", *shipped_lines(words.shipped_of(rd)), *result_lines(rd, t, protocol)]
    lines.append(f"Report: {series}/report.md (and report.html)")
    lines += next_lines(rd, t, protocol, series, where)
    return "\n".join(lines) + "\n"

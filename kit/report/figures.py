"""The report's plots, where a reader would rather look than read. Each takes plain data and
returns PNG bytes; kit.report.html_sections gathers the data from the raw files, names them in
the caption, and writes the bytes into plots/ and report.html.

Every mode has its own colour, from Okabe and Ito's palette (told apart by every common kind of
colour blindness), and its own marker and line style, so a page printed in grey still tells
them apart. Titles are short: the model's size sentence and the series' labels are said once,
in the caption. Figures are drawn with Agg through matplotlib's object API and saved without
the Software entry, so the same data give the same bytes (`micakit verify`).
"""

from __future__ import annotations

import io
import math
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kit.results.planned import PYTORCH

if TYPE_CHECKING:  # matplotlib loads where a plot is drawn (`micakit report` and `verify`
    # name the plots without drawing them; importing it costs a third of a second); pandas
    # is not loaded by the plots' drawer (kit.report.drawer), a process of its own
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_DPI = 120
# Okabe & Ito (2008): blue, vermilion, bluish green, reddish purple, orange, sky blue, black
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")


@dataclass(frozen=True)
class Style:
    colour: str
    marker: str
    line: str | tuple[int, tuple[int, ...]]  # a matplotlib line style


# PyTorch's four modes (§3 rule 2), each its own; contender builds take what follows, in order
MODES = {
    "eager": Style(PALETTE[0], "o", "-"),
    "default": Style(PALETTE[2], "s", "--"),
    "reduce-overhead": Style(PALETTE[3], "^", "-."),
    "max-autotune": Style(PALETTE[5], "D", ":"),
}
BUILDS = (
    Style(PALETTE[1], "v", (0, (6, 2))),
    Style(PALETTE[4], "P", (0, (3, 1, 1, 1, 1, 1))),
    Style(PALETTE[6], "X", (0, (1, 1))),
)


def styles(keys: list[tuple[str, str]]) -> list[Style]:
    """One style per (side, mode or build): a PyTorch mode always the same, builds in order."""
    builds: dict[str, Style] = {}
    out = []
    for side, variant in keys:
        if side == PYTORCH and variant in MODES:
            out.append(MODES[variant])
            continue
        if variant not in builds:
            builds[variant] = BUILDS[len(builds) % len(BUILDS)]
        out.append(builds[variant])
    return out


def _figure(figsize: tuple[float, float] | None = None) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=figsize)


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG, without the Software entry: the same data give the same bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, metadata={"Software": None})
    return buf.getvalue()


def _wrap(label: str, width: int = 46) -> str:
    return "\n".join(textwrap.wrap(label, width)) or label


@dataclass(frozen=True)
class StepTimeRow:
    """One configuration's row: every timed run that counted, or why it has none."""

    label: str  # §9: PyTorch named with its version, mode, precision and attention
    side: str
    step_s: tuple[float, ...]
    note: str = ""  # why no time: out of memory (amendment 8), every run void, ...
    variant: str = ""  # the mode or build, which picks its colour and marker


# sides whose medians differ by more than this are drawn on a log axis: on a linear one the
# faster side is squashed against the left edge
LOG_ABOVE = 10.0
STEP_AXIS = "step time (ms), the outside clock (\u00a75)"
# the legend's top, below the axis: clear of the tick labels and the axis' own label
LEGEND_BELOW_IN = 0.62


def step_times_png(rows: list[StepTimeRow], title: str, earlier: bool = False) -> bytes:
    """step_times_figure as PNG."""
    return png_bytes(step_times_figure(rows, title, earlier))


def step_times_figure(rows: list[StepTimeRow], title: str, earlier: bool = False) -> Figure:
    """§5 "What is reported": every timed run a dot, the median marked, the range a bar.

    Rule 5: a deficit is drawn exactly as a lead is; rows differ only by their mode's colour
    and marker. On the right, each row's runs, median and range in numbers (rule 4). Medians
    more than LOG_ABOVE apart are drawn on a log axis, and the axis' label says what it is
    (log, or linear and whether it starts at zero). `earlier`: as a kit before summary.json's
    schema 3 drew it (a directory it published verifies as it was made).
    """
    n = max(len(rows), 1)
    fig = _figure(figsize=(12, 1.6 + 0.62 * n))
    ax = fig.add_subplot()
    ys = list(range(len(rows) - 1, -1, -1))  # the first row on top
    numbers = []
    looks = styles([(r.side, r.variant) for r in rows])
    for y, row, look in zip(ys, rows, looks):
        ms = np.asarray(row.step_s, dtype=float) * 1e3
        if not len(ms):
            numbers.append(_wrap(row.note or "no timed run counted", 44))
            continue
        ax.hlines(y, ms.min(), ms.max(), color=look.colour, linewidth=9, alpha=0.3)
        ax.plot(
            ms, np.full(len(ms), float(y)), look.marker, color=look.colour, markersize=6, zorder=4
        )
        median = float(np.median(ms))
        ax.plot([median], [y], marker="|", markersize=24, mew=1.5, color="black", zorder=3)
        spread = f"range {ms.min():.3f}\u2013{ms.max():.3f} ms"
        numbers.append(f"{len(ms)} runs, median {median:.3f} ms\n{spread}")
    ax.set_yticks(ys, [_wrap(r.label) for r in rows], fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    right = ax.twinx()
    right.set_ylim(ax.get_ylim())
    right.set_yticks(ys, numbers, fontsize=8)
    if earlier:
        ax.set_xlabel(f"{STEP_AXIS}; the axis does not start at zero")
    else:
        ax.set_xlabel(_step_axis(ax, [float(np.median(r.step_s)) for r in rows if r.step_s]))
    ax.grid(True, axis="x", color="0.85", linewidth=0.6)
    ax.set_title(_wrap(title, 110), fontsize=10)
    _legend(fig, ax, looks, earlier)
    fig.tight_layout()
    return fig


def _legend(fig: Figure, ax: Axes, looks: list[Style], earlier: bool) -> None:
    """The step-time plot's legend, below the axis' label: a run, the median, the range; its
    swatches in the rows' own colours (`earlier`: grey, as a kit before drew them)."""
    from matplotlib.legend_handler import HandlerTuple
    from matplotlib.lines import Line2D
    from matplotlib.transforms import ScaledTranslation

    handles = [
        Line2D([], [], marker="o", linestyle="", color="0.3", label="a timed run"),
        Line2D(
            [], [], marker="|", linestyle="", color="black", markersize=12, mew=2, label="median"
        ),
        Line2D([], [], color="0.3", linewidth=7, alpha=0.3, label="range (fastest to slowest)"),
    ]
    if not earlier:  # the swatches in the rows' own colours, as the bars and dots are drawn
        shown = list({look.colour: look for look in looks}.values())
        if shown:
            handles[0] = tuple(  # type: ignore[call-overload]
                Line2D([], [], marker=x.marker, linestyle="", color=x.colour) for x in shown
            )
            handles[2] = tuple(  # type: ignore[call-overload]
                Line2D([], [], color=x.colour, linewidth=7, alpha=0.3) for x in shown
            )
    # below the axis' label, whatever the figure's height (a series of one configuration is
    # short: a place in the axis' own fraction of it would lie on the label)
    below = ScaledTranslation(0, -LEGEND_BELOW_IN, fig.dpi_scale_trans)
    ax.legend(
        handles=handles,
        labels=["a timed run", "median", "range (fastest to slowest)"],
        handler_map={tuple: HandlerTuple(ndivide=None)},
        fontsize=8,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16) if earlier else (0.5, 0.0),
        bbox_transform=ax.transAxes if earlier else ax.transAxes + below,
        ncol=3,
        frameon=False,
    )


def _step_axis(ax: Axes, medians_ms: list[float]) -> str:
    """The step-time axis made log where the medians differ more than LOG_ABOVE times, and its
    label, true to it: log, or linear and whether it starts at zero."""
    said = STEP_AXIS
    if medians_ms and min(medians_ms) > 0 and max(medians_ms) / min(medians_ms) > LOG_ABOVE:
        ax.set_xscale("log")
        return f"{said}; log scale: the medians differ more than {LOG_ABOVE:g}\u00d7"
    low = ax.get_xlim()[0]
    return f"{said}; the axis does not start at zero" if low > 0 else said


@dataclass(frozen=True)
class ConditionTrace:
    """One run's card readings (§5 "Conditions"), seconds from its first sample."""

    label: str
    t_s: tuple[float, ...]
    sm_clock_mhz: tuple[float, ...]
    temperature_c: tuple[float, ...]
    power_w: tuple[float, ...]
    window_s: tuple[float, float] | None = None  # the timed window, on the same time axis


RUN_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def conditions_png(traces: list[ConditionTrace], title: str) -> bytes:
    """The card's SM clock, temperature and power through each run; the window drawn bold."""
    fig = _figure(figsize=(11, 5.4))
    axes = fig.subplots(3, 1, sharex=True)
    panels = [
        ("sm_clock_mhz", "SM clock (MHz)"),
        ("temperature_c", "temperature (\u00b0C)"),
        ("power_w", "power (W)"),
    ]
    for i, tr in enumerate(traces):
        colour = PALETTE[i % len(PALETTE)]
        marker = RUN_MARKERS[i % len(RUN_MARKERS)]
        t = np.asarray(tr.t_s, dtype=float)
        for ax, (field, _) in zip(axes, panels):
            v = np.asarray(getattr(tr, field), dtype=float)
            ax.plot(
                t,
                v,
                "-",
                color=colour,
                linewidth=0.9,
                alpha=0.7,
                marker=marker,
                markersize=3,
                label=tr.label if ax is axes[0] else None,
            )
            if tr.window_s is not None:
                inside = (t >= tr.window_s[0]) & (t <= tr.window_s[1])
                if inside.any():
                    ax.plot(t[inside], v[inside], "-", color=colour, linewidth=2.6)
    for ax, (_, name) in zip(axes, panels):
        ax.set_ylabel(name, fontsize=9)
        ax.grid(True, color="0.85", linewidth=0.6)
    axes[-1].set_xlabel("seconds from the run's first sample (bold: the timed window, \u00a75)")
    axes[0].set_title(_wrap(title, 110), fontsize=10)
    if traces:
        axes[0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return png_bytes(fig)


HATCHES = ("", "//", "..", "xx", "\\\\", "oo", "++")


def kernel_families_png(families: pd.DataFrame, title: str) -> bytes:
    """§6: each profiled run's kernel time by family, one bar a configuration.

    `families` has columns label (the configuration, named by §9's rules), family,
    total_time_ns and, where known, side and variant (which pick the bar's colour; a hatch
    tells the bars apart in grey). The axis says what the bars are: the profiled run's kernel
    time.
    """

    labels = list(dict.fromkeys(families["label"]))
    first = families.drop_duplicates("label").set_index("label")
    keys = [
        (str(first.loc[x].get("side", "")), str(first.loc[x].get("variant", x))) for x in labels
    ]
    order = families.groupby("family", sort=False)["total_time_ns"].max().sort_values(kind="stable")
    fams = list(order.index)
    bars = 0.22 * len(fams) * max(1, len(labels)) ** 0.7
    fig = _figure(figsize=(12, 1.4 + max(bars, 0.42 * len(labels))))
    ax = fig.add_subplot()
    height = 0.8 / max(len(labels), 1)
    for j, (label, look) in enumerate(zip(labels, styles(keys))):
        mine = families[families["label"] == label].set_index("family")["total_time_ns"]
        values = [float(mine.get(f, 0.0)) / 1e6 for f in fams]
        ys = np.arange(len(fams)) - 0.4 + height * (j + 0.5)
        ax.barh(
            ys,
            values,
            height=height,
            color=look.colour,
            hatch=HATCHES[j % len(HATCHES)],
            edgecolor="white",
            label=_wrap(label, 40),
        )
    ax.set_yticks(np.arange(len(fams)), fams, fontsize=8)
    from kit.telemetry.kernels import KERNEL_TIME_LABEL  # lazy: pandas (the drawer's start)

    ax.set_xlabel(f"{KERNEL_TIME_LABEL} (ms): explains a step time, never stands in for one")
    ax.grid(True, axis="x", color="0.85", linewidth=0.6)
    ax.set_title(_wrap(title, 100), fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), reverse=True)
    fig.tight_layout()
    return png_bytes(fig)


@dataclass(frozen=True)
class LossCurve:
    """One run's training loss as its program printed it."""

    label: str
    side: str
    step: tuple[int, ...]
    loss: tuple[float, ...]
    variant: str = ""  # the mode or build, which picks its colour, marker and line


def loss_curves_png(curves: list[LossCurve], title: str) -> bytes:
    """Per configuration, one timed run's loss against step, each in its mode's style.

    Curves that agree lie on top of each other, so each curve's markers sit on steps of their
    own (every k-th printed step, offset by its place): every curve shows, even one hidden
    under another.
    """
    fig = _figure(figsize=(11, 5.5))
    ax = fig.add_subplot()
    n = max(len(curves), 1)
    looks = styles([(c.side, c.variant) for c in curves])
    for i, (c, look) in enumerate(zip(curves, looks)):
        ax.plot(
            c.step,
            c.loss,
            linestyle=look.line,
            color=look.colour,
            linewidth=1.4,
            marker=look.marker,
            markersize=6,
            markevery=(i % max(len(c.step), 1), n),
            label=_wrap(c.label, 60),
        )
    ax.set_xlabel("step")
    ax.set_ylabel("training loss, as the program printed it")
    ax.grid(True, color="0.85", linewidth=0.6)
    ax.set_title(_wrap(title, 110), fontsize=10)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return png_bytes(fig)


@dataclass(frozen=True)
class CompileCost:
    """One complete PyTorch mode's warm-up (seconds) and break-even against eager (steps)."""

    label: str  # §9's name
    variant: str
    median_s: float
    min_s: float
    max_s: float
    break_even_steps: float | None  # None: none given (`why` says why); inf: never
    why: str = ""  # why no break-even is given: eager itself, no eager, overlapping ranges


def compile_costs_png(
    rows: list[CompileCost], title: str, earlier: bool = False, warm_up_only: bool = False
) -> bytes:
    """compile_costs_figure as PNG."""
    return png_bytes(compile_costs_figure(rows, title, earlier, warm_up_only))


def compile_costs_figure(
    rows: list[CompileCost], title: str, earlier: bool = False, warm_up_only: bool = False
) -> Figure:
    """Left, each mode's warm-up, median and range; right, its break-even against eager. A
    range below zero is drawn below zero, never cut (`earlier`: as a kit before summary.json's
    schema 3 drew it, from zero). `warm_up_only`: the warm-ups alone, where no compiled mode
    has a break-even to draw (eager alone ran)."""
    n = max(len(rows), 1)
    fig = _figure(figsize=(12, 1.8 + 0.6 * n))
    if warm_up_only:
        left = fig.subplots(1, 1)
        right = _figure().subplots(1, 1)  # drawn on, never shown: the panel is left out
    else:
        left, right = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [3, 2]})
    ys = list(range(len(rows) - 1, -1, -1))
    looks = styles([(PYTORCH, r.variant) for r in rows])
    finite = [r.break_even_steps for r in rows if r.break_even_steps not in (None, math.inf)]
    far = max([float(x) for x in finite if x is not None] + [1.0])  # an axis, even at 0
    below = 0.0 if earlier else min([float(x) for x in finite if x is not None] + [0.0])
    # the words of a row without a bar start where zero lies on the axis
    start = far * 0.03 if earlier else (0.03 * (far - below) * 1.35)
    for y, r, look in zip(ys, rows, looks):
        left.hlines(y, r.min_s, r.max_s, color=look.colour, linewidth=9, alpha=0.3)
        left.plot([r.median_s], [y], look.marker, color=look.colour, markersize=8, zorder=4)
        left.annotate(
            f"{r.median_s:.3f} s ({r.min_s:.3f}\u2013{r.max_s:.3f})",
            (r.max_s, y),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
        v = r.break_even_steps
        if v is None:
            words = r.why or ("eager: the reference" if r.variant == "eager" else "none given")
            right.text(start, y, _wrap(words, 48), va="center", fontsize=8, color="0.35")
        elif v == math.inf:
            right.text(start, y, "never", va="center", fontsize=9, fontweight="bold")
        else:
            right.barh(y, v, height=0.5, color=look.colour, hatch="//", edgecolor="white")
            at = v + far * 0.02 if earlier else max(v, 0.0) + 0.02 * (far - below)
            right.text(at, y, f"{int(v):,} steps", va="center", fontsize=8)
    left.set_yticks(ys, [_wrap(r.label, 40) for r in rows], fontsize=8)
    left.set_ylim(-0.7, len(rows) - 0.3)
    high = max([r.max_s for r in rows] or [1.0])
    low = 0.0 if earlier else min([r.min_s for r in rows] + [0.0])
    left.set_xlim(low - 0.1 * (high - low) if low < 0 else 0.0, high * 1.55)  # room for numbers
    left.set_xlabel("warm-up (s), from the stamps: median (mark) and range (bar)")
    right.set_xlim(below * 1.35, far * 1.35)
    right.set_xlabel("break-even against eager (steps)")
    for ax in (left, right):
        ax.grid(True, axis="x", color="0.85", linewidth=0.6)
    if warm_up_only:
        left.set_xlim(left.get_xlim()[0], high * 1.25)  # the numbers' room, no panel beside
    fig.suptitle(_wrap(title, 110), fontsize=10)
    fig.tight_layout()
    return fig

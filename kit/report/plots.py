"""Plots the protocol publishes, kept out of the core: each function reads results, writes a PNG.

§7 A: "All ten curves are published on one plot"; §7 B: "Both curves are published on one
plot". Figures are drawn with Agg through matplotlib's object API (no pyplot state, no GUI)
and saved without the Software entry, so the same data give the same bytes.
"""

from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from kit.correctness.curves import CONTENDER, PYTORCH, TrainCurve, train_frame
from kit.correctness.methods import STEP0_TOLERANCE, STEP_TOLERANCE, MethodAResult

SIDE_LABELS = {PYTORCH: "PyTorch (nanoGPT)", CONTENDER: "Mica program"}
SIDE_COLOURS = {PYTORCH: "Blues", CONTENDER: "Oranges"}  # one family of shades a side
_DPI = 120


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # no Software entry (it carries matplotlib's version): same data, same bytes
    fig.savefig(path, format="png", dpi=_DPI, metadata={"Software": None})
    return path


def _shades(cmap: str, n: int) -> list:
    from matplotlib import colormaps

    return [colormaps[cmap](x) for x in np.linspace(0.45, 0.9, n)]


def plot_method_a(result: MethodAResult, path: Path, title: str = "") -> Path:
    """§7 A: every seed's validation loss against step, both sides, on one plot.

    An inset magnifies the judged steps, where the families lie within hundredths of a loss.
    """
    fig = Figure(figsize=(11, 5.8))
    ax = fig.add_subplot()
    curves = result.curves
    last = int(curves["step"].max())
    judged = curves[curves["step"] >= result.from_step]
    inset = None
    if len(judged):
        inset = ax.inset_axes((0.38, 0.36, 0.6, 0.6))
        inset.set_title("judged steps, magnified", fontsize=8)
        inset.tick_params(labelsize=7)
        inset.grid(True, color="0.85", linewidth=0.6)
        pad = 0.1 * max(float(np.ptp(judged["val_loss"])), 1e-3)
        inset.set_ylim(judged["val_loss"].min() - pad, judged["val_loss"].max() + pad)
        inset.set_xlim(result.from_step, last)
    for side in (PYTORCH, CONTENDER):
        mine = curves[curves["side"] == side]
        seeds = sorted(mine["seed"].unique())
        style = "-" if side == PYTORCH else "--"
        for colour, seed in zip(_shades(SIDE_COLOURS[side], len(seeds)), seeds):
            c = mine[mine["seed"] == seed]
            for target in (ax, inset) if inset is not None else (ax,):
                target.plot(
                    c["step"],
                    c["val_loss"],
                    style,
                    color=colour,
                    marker="o",
                    markersize=2.5,
                    linewidth=1.2,
                    label=f"{SIDE_LABELS[side]}, seed {seed}",
                )
    if result.from_step <= last:
        ax.axvspan(result.from_step, last, color="0.93", zorder=0, label="judged steps (§7 A)")
    verdict = {True: "passed", False: "failed", None: "read, not judged"}[result.verdict]
    ax.set_title(title or f"§7 A: validation loss, {len(result.seeds)} seed(s) a side")
    ax.set_xlabel("step")
    ax.set_ylabel("validation loss")
    ax.grid(True, color="0.85", linewidth=0.6)
    ax.legend(
        fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title=f"method A: {verdict}"
    )
    _inset_final(ax, result.final)
    fig.tight_layout()
    return _save(fig, path)


def _inset_final(ax: Axes, final: pd.DataFrame) -> None:
    lines = [
        f"{SIDE_LABELS[r['side']]}: final {r['val_loss_median']:.4f} "
        f"[{r['val_loss_min']:.4f}, {r['val_loss_max']:.4f}]"
        for _, r in final.iterrows()
    ]
    ax.text(
        0.02,
        0.03,
        "\n".join(lines),
        transform=ax.transAxes,
        fontsize=8,
        va="bottom",
        bbox={"facecolor": "white", "edgecolor": "0.7", "alpha": 0.9},
    )


def plot_method_b(
    pytorch: TrainCurve,
    contender: TrainCurve,
    window: tuple[int, int],
    path: Path,
    title: str = "",
    also_window: tuple[int, int] | None = None,
    step_tol: float = STEP_TOLERANCE,
) -> Path:
    """§7 B: both training-loss curves on one plot, the judged window shaded.

    Below them, the relative difference |contender - PyTorch| / |PyTorch| against the 1%
    tolerance, since two curves within 1% lie on top of each other at this scale.
    """
    p = train_frame(pytorch, PYTORCH)["loss"]
    c = train_frame(contender, CONTENDER)["loss"]
    fig = Figure(figsize=(9, 6.5))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    lo, hi = window
    for ax in (top, bottom):
        ax.axvspan(lo, hi, color="0.92", zorder=0, label=f"judged: steps {lo} to {hi}")
        if also_window:
            ax.axvline(
                also_window[1],
                color="0.5",
                linestyle=":",
                linewidth=1,
                label=f"end of steps {also_window[0]} to {also_window[1]}: verdict beside",
            )
        ax.grid(True, color="0.85", linewidth=0.6)
    top.plot(
        p.index, p.to_numpy(), "-", color="tab:blue", linewidth=1.3, label=SIDE_LABELS[PYTORCH]
    )
    top.plot(
        c.index,
        c.to_numpy(),
        "--",
        color="tab:orange",
        linewidth=1.3,
        label=SIDE_LABELS[CONTENDER],
    )
    top.set_ylabel("training loss")
    top.set_title(title or "§7 B: one shared start, one batch order")
    top.legend(fontsize=8, loc="upper right")
    common = p.index.intersection(c.index)
    rel = (c[common] - p[common]).abs() / p[common].abs() * 100
    bottom.plot(common, rel.to_numpy(), color="tab:red", linewidth=1.0)
    bottom.axhline(step_tol * 100, color="black", linewidth=0.8, linestyle="--")
    bottom.text(
        0.01,
        0.95,
        f"dashed: tolerance {step_tol:.0%} (step 0: {STEP0_TOLERANCE:g})",
        transform=bottom.transAxes,
        ha="left",
        va="top",
        fontsize=8,
    )
    bottom.set_xlabel("step")
    bottom.set_ylabel("relative difference (%)")
    bottom.set_ylim(bottom=0)
    fig.tight_layout()
    return _save(fig, path)


# ---------------------------------------------------------------------------------------------
# The report's plots (issue 7), where a reader would rather look than read. Each takes plain
# data and returns PNG bytes; kit.report.html gathers the data from the raw files, names them in the
# caption, and writes the bytes into plots/ and report.html.

SIDE_COLOUR = {PYTORCH: "tab:blue", CONTENDER: "tab:orange"}


def png_bytes(fig: Figure) -> bytes:
    """The figure as PNG, without the Software entry: the same data give the same bytes."""
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


def step_times_png(rows: list[StepTimeRow], title: str) -> bytes:
    """§5 "What is reported": every timed run a dot, the median marked, the range a bar.

    Rule 5: a deficit is drawn exactly as a lead is; the only difference between rows is the
    side's colour. On the right, each row's runs, median and range in numbers (rule 4).
    """
    n = max(len(rows), 1)
    fig = Figure(figsize=(12, 1.6 + 0.62 * n))
    ax = fig.add_subplot()
    ys = list(range(len(rows) - 1, -1, -1))  # the first row on top
    numbers = []
    for y, row in zip(ys, rows):
        ms = np.asarray(row.step_s, dtype=float) * 1e3
        if not len(ms):
            numbers.append(_wrap(row.note or "no timed run counted", 44))
            continue
        colour = SIDE_COLOUR.get(row.side, "0.3")
        ax.hlines(y, ms.min(), ms.max(), color=colour, linewidth=9, alpha=0.3)
        ax.plot(ms, np.full(len(ms), float(y)), "o", color=colour, markersize=5, zorder=4)
        median = float(np.median(ms))
        ax.plot([median], [y], marker="|", markersize=24, mew=1.5, color="black", zorder=3)
        spread = f"range {ms.min():.3f}\u2013{ms.max():.3f} ms"
        numbers.append(f"{len(ms)} runs, median {median:.3f} ms\n{spread}")
    ax.set_yticks(ys, [_wrap(r.label) for r in rows], fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    right = ax.twinx()
    right.set_ylim(ax.get_ylim())
    right.set_yticks(ys, numbers, fontsize=8)
    ax.set_xlabel("step time (ms), the outside clock (\u00a75); the axis does not start at zero")
    ax.grid(True, axis="x", color="0.85", linewidth=0.6)
    ax.set_title(_wrap(title, 110), fontsize=10)
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], marker="o", linestyle="", color="0.3", label="a timed run"),
        Line2D(
            [], [], marker="|", linestyle="", color="black", markersize=12, mew=2, label="median"
        ),
        Line2D([], [], color="0.3", linewidth=7, alpha=0.3, label="range (fastest to slowest)"),
    ]
    ax.legend(
        handles=handles,
        fontsize=8,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16),
        ncol=3,
        frameon=False,
    )
    fig.tight_layout()
    return png_bytes(fig)


@dataclass(frozen=True)
class ConditionTrace:
    """One run's card readings (§5 "Conditions"), seconds from its first sample."""

    label: str
    t_s: tuple[float, ...]
    sm_clock_mhz: tuple[float, ...]
    temperature_c: tuple[float, ...]
    power_w: tuple[float, ...]
    window_s: tuple[float, float] | None = None  # the timed window, on the same time axis


def conditions_png(traces: list[ConditionTrace], title: str) -> bytes:
    """The card's SM clock, temperature and power through each run; the window drawn bold."""
    fig = Figure(figsize=(11, 5.4))
    axes = fig.subplots(3, 1, sharex=True)
    panels = [
        ("sm_clock_mhz", "SM clock (MHz)"),
        ("temperature_c", "temperature (\u00b0C)"),
        ("power_w", "power (W)"),
    ]
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    for i, tr in enumerate(traces):
        colour = cmap(i % 10)
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
                marker=".",
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


def kernel_families_png(families: pd.DataFrame, title: str) -> bytes:
    """§6: each profiled run's kernel time by family, one bar a configuration.

    `families` has columns label (the configuration, named by §9's rules), family and
    total_time_ns. The axis says what the bars are: the profiled run's kernel time.
    """
    from kit.telemetry.kernels import KERNEL_TIME_LABEL

    labels = list(dict.fromkeys(families["label"]))
    order = families.groupby("family", sort=False)["total_time_ns"].max().sort_values(kind="stable")
    fams = list(order.index)
    bars = 0.22 * len(fams) * max(1, len(labels)) ** 0.7
    fig = Figure(figsize=(12, 1.4 + max(bars, 0.42 * len(labels))))
    ax = fig.add_subplot()
    height = 0.8 / max(len(labels), 1)
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    for j, label in enumerate(labels):
        mine = families[families["label"] == label].set_index("family")["total_time_ns"]
        values = [float(mine.get(f, 0.0)) / 1e6 for f in fams]
        ys = np.arange(len(fams)) - 0.4 + height * (j + 0.5)
        ax.barh(ys, values, height=height, color=cmap(j % 10), label=_wrap(label, 40))
    ax.set_yticks(np.arange(len(fams)), fams, fontsize=8)
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


def loss_curves_png(curves: list[LossCurve], title: str) -> bytes:
    """Per configuration, one timed run's loss against step (PyTorch solid, contender dashed)."""
    fig = Figure(figsize=(11, 5.5))
    ax = fig.add_subplot()
    by_side: dict[str, list[LossCurve]] = {}
    for c in curves:
        by_side.setdefault(c.side, []).append(c)
    for side, mine in by_side.items():
        style = "--" if side == CONTENDER else "-"
        shades = _shades(SIDE_COLOURS.get(side, "Greys"), len(mine))
        for colour, c in zip(shades, mine):
            ax.plot(
                c.step,
                c.loss,
                style,
                color=colour,
                linewidth=1.3,
                marker="o",
                markersize=2.5,
                label=_wrap(c.label, 60),
            )
    ax.set_xlabel("step")
    ax.set_ylabel("training loss, as the program printed it")
    ax.grid(True, color="0.85", linewidth=0.6)
    ax.set_title(_wrap(title, 110), fontsize=10)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return png_bytes(fig)

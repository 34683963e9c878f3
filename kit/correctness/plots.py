"""Plots the protocol publishes, kept out of the core: each function reads results, writes a PNG.

§7 A: "All ten curves are published on one plot"; §7 B: "Both curves are published on one
plot". Figures are drawn with Agg through matplotlib's object API (no pyplot state, no GUI)
and saved without the Software entry, so the same data give the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from kit.correctness.curves import TrainCurve, train_frame
from kit.correctness.methods import STEP0_TOLERANCE, STEP_TOLERANCE, MethodAResult
from kit.results.planned import CONTENDER, PYTORCH, SIDES

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
    for side in SIDES:
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

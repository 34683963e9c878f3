"""Correctness (§7): the same model, trained alike, judged from the two sides' loss curves.

Method A (§7 A, D5) compares families: five seeds a side, evaluated every 250 steps; it passes
when, at every evaluation from step 1,000 on, the two sides' median validation losses differ by
no more than the larger of the two sides' ranges. Method B (§7 B, amendment 6) compares two
runs from one shared start on one batch order, step by step. A configuration's check has passed
when method A passed with five seeds a side and method B passed on its own card (amendment 7.3).

Everything here is a pure function of the parsed curves (`kit.correctness.curves`), so a check
can be recomputed from the raw logs alone (D6). Bad input is a `UserError` that names the side,
seed and step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kit.correctness.curves import (
    SideCurves,
    TrainCurve,
    check_curve,
    check_grid,
    compare_steps,
    needed,
    seeded,
    train_frame,
)
from kit.errors import UserError
from kit.protocol.load import Protocol
from kit.results.planned import CONTENDER, PYTORCH, SIDES

# The defaults of the pure functions below are §7's reference values, for direct use; the runner
# always passes the protocol file's (its correctness table), and the windows of amendment 6, the
# seeds and the five-seed card are read from that file alone (Protocol.method_b_window ...).
METHOD_A_FROM_STEP = 1000  # §7 A: judged at every evaluation from step 1,000 on
STEP0_TOLERANCE = 1e-5  # §7 B: step-0 losses within 1e-5 relative
STEP_TOLERANCE = 0.01  # §7 B: each step of the window within 1% relative
DEFAULT_WINDOW = (1, 200)  # §7 B: the first 200 steps
# Losses are printed as decimals; a difference equal to a limit in decimals may come out a few
# units in the last binary place either way, so a tie is taken as within (the rules say "within").
_ABS_SLACK = 1e-9  # method A, in loss units (losses are printed to 1e-4)
_REL_SLACK = 1e-9  # method B, a fraction of the tolerance
# A printed loss must resolve a tenth of the tolerance it is judged by, or the verdict is chance.
_RESOLUTION_FRACTION = 0.1


# -- method A --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MethodAResult:
    """§7 A's verdict and everything it was computed from (all DataFrames publishable as CSV)."""

    verdict: bool | None  # None: one seed a side, read and not judged (amendment 7.1)
    reason: str  # "passed", why it failed, or why there is no verdict
    from_step: int
    seeds: tuple[int, ...]  # the same seeds on both sides
    first_failing_step: int | None
    # step, judged, {side}_median/_min/_max/_range, difference, allowed, ok
    table: pd.DataFrame
    final: pd.DataFrame  # per side: last step, seeds, val/train loss median, min, max, range
    curves: pd.DataFrame  # long form: side, seed, step, train_loss, val_loss

    @property
    def passed(self) -> bool:
        return self.verdict is True


def method_a(
    pytorch: SideCurves,
    contender: SideCurves,
    from_step: int = METHOD_A_FROM_STEP,
    *,
    eval_interval: int | None = None,
    last_step: int | None = None,
) -> MethodAResult:
    """§7 A: compare the two sides' families of validation curves.

    `pytorch` and `contender` map each seed (rising) to its evaluation curve. Passes when, at
    every evaluation from `from_step` on, |median_P - median_C| <= max(range_P, range_C), a
    side's range being max - min across its seeds at that step. One seed a side gives no
    verdict (amendment 7.1). `eval_interval` and `last_step` (the model's full schedule),
    when given, also catch an evaluation point or an ending that every curve lacks alike.
    """
    sides = {PYTORCH: seeded(PYTORCH, pytorch), CONTENDER: seeded(CONTENDER, contender)}
    seeds = {side: [s for s, _ in pairs] for side, pairs in sides.items()}
    if seeds[PYTORCH] != seeds[CONTENDER]:
        raise UserError(
            f"method A: the sides ran different seeds: pytorch {seeds[PYTORCH]}, "
            f"contender {seeds[CONTENDER]}",
            "run the same seeds on both sides (§7 A: 1337 to 1341)",
        )
    ref_steps = _common_steps(sides, from_step, eval_interval, last_step)
    curves = pd.concat(
        [df.assign(side=side, seed=seed) for side, pairs in sides.items() for seed, df in pairs],
        ignore_index=True,
    )[["side", "seed", "step", "train_loss", "val_loss"]]
    table = _families_table(curves, ref_steps, from_step)
    verdict, reason, first = _method_a_verdict(table, len(seeds[PYTORCH]))
    return MethodAResult(
        verdict=verdict,
        reason=reason,
        from_step=from_step,
        seeds=tuple(seeds[PYTORCH]),
        first_failing_step=first,
        table=table,
        final=_final(curves, ref_steps[-1]),
        curves=curves,
    )


def _common_steps(
    sides: dict[str, list[tuple[int, pd.DataFrame]]],
    from_step: int,
    eval_interval: int | None,
    last_step: int | None,
) -> list[int]:
    """The evaluation steps every curve holds alike (PyTorch's first seed's), each curve
    checked against them; refused when none is judged."""
    for side, pairs in sides.items():
        for seed, df in pairs:
            check_curve(side, seed, df)
    ref_seed, ref_df = sides[PYTORCH][0]
    ref_where, ref_steps = f"pytorch seed {ref_seed}", ref_df["step"].tolist()
    for side, pairs in sides.items():
        for seed, df in pairs:
            compare_steps(f"{side} seed {seed}", df["step"].tolist(), ref_where, ref_steps)
    check_grid(ref_where, ref_steps, eval_interval, last_step)
    if ref_steps[-1] < from_step:
        raise UserError(
            f"method A: no evaluation from step {from_step} on: the curves end at step "
            f"{ref_steps[-1]}",
            "run the model's whole schedule (§7 A)",
        )
    return ref_steps


def _families_table(curves: pd.DataFrame, ref_steps: list[int], from_step: int) -> pd.DataFrame:
    """§7 A per evaluation step: each side's median and range across its seeds, and whether
    the medians differ by no more than the larger range."""
    table = pd.DataFrame({"step": ref_steps})
    table["judged"] = table["step"] >= from_step  # §7 A: from step 1,000 on
    for side in SIDES:
        wide = curves[curves["side"] == side].pivot(index="step", columns="seed", values="val_loss")
        values = wide.loc[ref_steps].to_numpy()
        table[f"{side}_median"] = np.median(values, axis=1)
        table[f"{side}_min"] = values.min(axis=1)
        table[f"{side}_max"] = values.max(axis=1)
        table[f"{side}_range"] = table[f"{side}_max"] - table[f"{side}_min"]
    table["difference"] = (table["pytorch_median"] - table["contender_median"]).abs()
    table["allowed"] = np.maximum(table["pytorch_range"], table["contender_range"])
    table["ok"] = table["difference"] <= table["allowed"] + _ABS_SLACK
    return table


def _method_a_verdict(
    table: pd.DataFrame, seeds_per_side: int
) -> tuple[bool | None, str, int | None]:
    """The verdict, its reason and the first failing step; no verdict on one seed a side."""
    failing = table[table["judged"] & ~table["ok"]]
    first = int(failing["step"].iloc[0]) if len(failing) else None
    if seeds_per_side < 2:
        verdict, reason = None, "one seed a side: read, not judged"
    elif first is None:
        verdict, reason = True, "passed"
    else:
        row = failing.iloc[0]
        verdict = False
        reason = (
            f"method A failed at step {first}: medians differ by {row['difference']:.4g} "
            f"> larger range {row['allowed']:.4g}"
        )
    return verdict, reason, first


def _final(curves: pd.DataFrame, last: int) -> pd.DataFrame:
    """§7 A: "the final losses as median and range", per side."""
    rows = []
    for side in SIDES:
        at = curves[(curves["side"] == side) & (curves["step"] == last)]
        row: dict[str, Any] = {"side": side, "step": last, "seeds": len(at)}
        for col in ("val_loss", "train_loss"):
            v = at[col].to_numpy()
            row |= {
                f"{col}_median": float(np.median(v)),
                f"{col}_min": float(v.min()),
                f"{col}_max": float(v.max()),
                f"{col}_range": float(v.max() - v.min()),
            }
        rows.append(row)
    return pd.DataFrame(rows)


# -- method B --------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowVerdict:
    """Method B's verdict over one window of steps, step 0 included."""

    window: tuple[int, int]
    passed: bool
    first_failing_step: int | None
    max_relative_difference: float  # over the window's steps (step 0 apart)
    max_at_step: int
    reason: str


@dataclass(frozen=True)
class MethodBResult:
    """§7 B's verdict; for M2b the amendment-6 window judges and §7 B's 200 steps stand beside."""

    judged: WindowVerdict
    beside: WindowVerdict | None  # amendment 6.2: the earlier wording's verdict, published beside
    step0_pytorch_loss: float
    step0_contender_loss: float
    step0_relative_difference: float
    # step, pytorch_loss, contender_loss, relative_difference, tolerance, ok, judged, beside
    table: pd.DataFrame

    @property
    def passed(self) -> bool:
        return self.judged.passed

    @property
    def reason(self) -> str:
        return self.judged.reason

    @property
    def first_failing_step(self) -> int | None:
        return self.judged.first_failing_step


def _check_resolution(table: pd.DataFrame, res: pd.DataFrame, step0_tol: float, tol: float) -> None:
    """A printed loss must resolve a tenth of its tolerance, or the verdict would be chance."""
    for step, row in res.iterrows():
        limit = (step0_tol if step == 0 else tol) * _RESOLUTION_FRACTION
        for side in SIDES:
            unit = row[side]
            if math.isfinite(unit) and unit / abs(table.at[step, "pytorch_loss"]) > limit:
                rule = f"{step0_tol:g} at step 0" if step == 0 else f"{tol:.0%} a step"
                raise UserError(
                    f"method B: the {side} loss at step {step} is printed to {unit:g} "
                    f"({unit / abs(table.at[step, 'pytorch_loss']):.2g} relative), too coarse "
                    f"to judge the rule of {rule}",
                    "print the training losses with more digits (at least a tenth of the "
                    "tolerance relative)",
                )


def _window_verdict(table: pd.DataFrame, window: tuple[int, int], step_tol: float) -> WindowVerdict:
    lo, hi = window
    steps = table[(table["step"] == 0) | ((table["step"] >= lo) & (table["step"] <= hi))]
    inner = steps[steps["step"] >= lo]
    i_max = int(inner["relative_difference"].to_numpy().argmax())
    failing = steps[~steps["ok"]]
    worst = float(inner["relative_difference"].iloc[i_max])
    worst_step = int(inner["step"].iloc[i_max])
    if not len(failing):
        return WindowVerdict(window, True, None, worst, worst_step, "passed")
    row = failing.iloc[0]
    step = int(row["step"])
    rel = row["relative_difference"]
    shown = f"{rel:.4g}" if step == 0 else f"{rel:.3%}"
    limit = f"{row['tolerance']:g}" if step == 0 else f"{step_tol:.0%}"
    reason = (
        f"method B failed at step {step} (window {lo} to {hi}): the contender's loss "
        f"{row['contender_loss']:.6g} and PyTorch's {row['pytorch_loss']:.6g} differ by "
        f"{shown} relative > {limit}"
    )
    return WindowVerdict(window, False, step, worst, worst_step, reason)


def method_b(
    pytorch: TrainCurve,
    contender: TrainCurve,
    step0_tol: float = STEP0_TOLERANCE,
    step_tol: float = STEP_TOLERANCE,
    window: tuple[int, int] = DEFAULT_WINDOW,
    also_window: tuple[int, int] | None = None,
) -> MethodBResult:
    """§7 B: two runs from one shared start on one batch order, compared step by step.

    Passes when |a - b| / |b| <= step0_tol at step 0 and <= step_tol at each step of `window`,
    where b is PyTorch's loss and a the contender's: PyTorch is the reference the protocol
    compares against, so its loss is the denominator. A difference equal to a tolerance passes.
    `also_window` (amendment 6.2, M2b: steps 1 to 200) gets its own verdict, published beside.
    Curves carrying `loss_resolution` (from `parse_train_lines`) are refused when the digits
    printed cannot resolve a tenth of a tolerance.
    """
    for w in (window, also_window):
        if w is not None and not (1 <= w[0] <= w[1]):
            raise ValueError(f"a method B window must be 1 <= lo <= hi, not {w}")
    last = max(window[1], also_window[1] if also_window else 0)
    frames = {
        side: needed(train_frame(c, side), side, last)
        for side, c in ((PYTORCH, pytorch), (CONTENDER, contender))
    }
    steps = np.arange(0, last + 1)
    b = frames[PYTORCH]["loss"].to_numpy()
    a = frames[CONTENDER]["loss"].to_numpy()
    table = pd.DataFrame({"step": steps, "pytorch_loss": b, "contender_loss": a})
    with np.errstate(divide="ignore", invalid="ignore"):
        table["relative_difference"] = np.abs(a - b) / np.abs(b)
    table["tolerance"] = np.where(steps == 0, step0_tol, step_tol)
    table["ok"] = table["relative_difference"] <= table["tolerance"] * (1 + _REL_SLACK)
    table["judged"] = (steps == 0) | ((steps >= window[0]) & (steps <= window[1]))
    table["beside"] = (
        ((steps == 0) | ((steps >= also_window[0]) & (steps <= also_window[1])))
        if also_window
        else False
    )
    res = pd.DataFrame(
        {side: frames[side]["loss_resolution"].to_numpy() for side in SIDES}, index=steps
    )
    published = (table["judged"] | table["beside"]).to_numpy()
    _check_resolution(table.set_index("step"), res[published], step0_tol, step_tol)
    return MethodBResult(
        judged=_window_verdict(table, window, step_tol),
        beside=_window_verdict(table, also_window, step_tol) if also_window else None,
        step0_pytorch_loss=float(b[0]),
        step0_contender_loss=float(a[0]),
        step0_relative_difference=float(table["relative_difference"].iloc[0]),
        table=table,
    )


def method_b_for(
    protocol: Protocol, model: str, pytorch: TrainCurve, contender: TrainCurve
) -> MethodBResult:
    """Method B with the protocol file's tolerances and the model's windows (amendment 6)."""
    c = protocol.correctness
    return method_b(
        pytorch,
        contender,
        c.step0_tolerance,
        c.step_tolerance,
        window=protocol.method_b_window(model),
        also_window=protocol.method_b_beside_window(model),
    )

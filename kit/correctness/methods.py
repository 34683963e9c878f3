"""Correctness (§7): the same model, trained alike, judged from the two sides' loss curves.

Method A (§7 A, D5) compares families: five seeds a side, evaluated every 250 steps; it passes
when, at every evaluation from step 1,000 on, the two sides' median validation losses differ by
no more than the larger of the two sides' ranges. Method B (§7 B, amendment 6) compares two
runs from one shared start on one batch order, step by step. A configuration's check has passed
when method A passed with five seeds a side and method B passed on its own card (amendment 7.3).

Everything here is a pure function of the parsed curves, so a check can be recomputed from the
raw logs alone (D6). Bad input is a `UserError` that names the side, seed and step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from kit.errors import UserError
from kit.protocol.load import Protocol

# nanoGPT's evaluation line: print(f"step {iter_num}: train loss {...:.4f}, val loss {...:.4f}").
# D4: the contender prints the same grammar at its evaluations. A protocol file may declare
# another expression per side later; any replacement needs the same three named groups.
EVAL_LINE_REGEX = (
    r"^step (?P<step>\d+): train loss (?P<train_loss>[^,\s]+), val loss (?P<val_loss>\S+)$"
)
EVAL_LINE_PREFIX = r"^step \d+:"  # a line that starts like an evaluation but breaks the grammar

PYTORCH, CONTENDER = "pytorch", "contender"
SIDES = (PYTORCH, CONTENDER)
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

EvalCurve: TypeAlias = "pd.DataFrame | Sequence[tuple[int, float, float]]"
TrainCurve: TypeAlias = "pd.DataFrame | Sequence[tuple[int, float]]"
SideCurves: TypeAlias = "Mapping[int, EvalCurve] | Sequence[tuple[int, EvalCurve]]"


# -- parsing ---------------------------------------------------------------------------------


def _resolution(text: str) -> float:
    """The unit of the last digit a number was printed with: "4.1744" -> 1e-4."""
    try:
        exponent = Decimal(text).as_tuple().exponent
    except InvalidOperation:
        return math.nan
    return 10.0**exponent if isinstance(exponent, int) else math.nan


def _parse(
    lines: Sequence[str],
    regex: str,
    prefix: str | None,
    columns: list[str],
    where: str,
    other: str | None = None,
):
    line_rx, prefix_rx = re.compile(regex), re.compile(prefix) if prefix else None
    other_rx = re.compile(other) if other else None
    rows: list[list[Any]] = []
    for number, raw in enumerate(lines, 1):
        text = raw.rstrip("\r\n")
        m = line_rx.search(text)
        if not m:
            if other_rx and other_rx.search(text):
                continue  # a line of the other grammar, not a broken one of this
            if prefix_rx and prefix_rx.search(text):
                raise UserError(
                    f"{where} line {number} starts like a loss line but breaks the grammar "
                    f"{regex!r}: {text[:120]!r}"
                )
            continue
        step = int(m["step"])
        if rows and step <= rows[-1][0]:
            raise UserError(
                f"{where} line {number}: step {step} comes after step {rows[-1][0]}: "
                "steps must rise (a log of two runs?)"
            )
        row: list[Any] = [step]
        for col in columns:
            try:
                row.append(float(m[col]))
            except ValueError:
                raise UserError(
                    f"{where} line {number}: the {col.replace('_', ' ')} {m[col]!r} at step "
                    f"{step} is not a number"
                ) from None
        rows.append(row + [_resolution(m[columns[-1]])])
    return rows


def parse_eval_lines(
    lines: Sequence[str], regex: str = EVAL_LINE_REGEX, where: str = "log"
) -> pd.DataFrame:
    """The evaluations of one run: DataFrame[step, train_loss, val_loss], steps rising.

    NaN losses are kept (the methods name them); a line that starts like an evaluation but
    breaks the grammar is an error.
    """
    rows = _parse(lines, regex, EVAL_LINE_PREFIX, ["train_loss", "val_loss"], where)
    df = pd.DataFrame([r[:3] for r in rows], columns=["step", "train_loss", "val_loss"])
    return df.astype({"step": "int64", "train_loss": "float64", "val_loss": "float64"})


def parse_train_lines(
    lines: Sequence[str], line_regex: str, step_prefix: str | None = None, where: str = "log"
) -> pd.DataFrame:
    """The per-step training losses of one run: DataFrame[step, loss, loss_resolution].

    `line_regex` is the side's grammar from the protocol file (`protocol.pytorch.line_regex`
    for nanoGPT's `iter N: loss X, time ...`, `protocol.contender.line_regex` for
    `step N loss X time_ms T`); it needs the groups `step` and `loss`. `loss_resolution` is
    the unit of the last digit printed (nanoGPT prints `.4f`: 1e-4), which method B checks.
    """
    # the contender's step prefix (`^step \d+\b`) also matches its evaluation lines (D4)
    rows = _parse(lines, line_regex, step_prefix, ["loss"], where, other=EVAL_LINE_PREFIX)
    df = pd.DataFrame(rows, columns=["step", "loss", "loss_resolution"])
    return df.astype({"step": "int64", "loss": "float64", "loss_resolution": "float64"})


def read_log_lines(stdout_log: Path) -> list[str]:
    """The text of a stamped log's lines (kit.measure.clock's format), for the parsers above."""
    from kit.measure.clock import read_stamped

    try:
        return [line.text for line in read_stamped(stdout_log)]
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read the log {stdout_log}: {e}") from None


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


def _eval_frame(curve: EvalCurve, where: str) -> pd.DataFrame:
    if isinstance(curve, pd.DataFrame):
        missing = {"step", "train_loss", "val_loss"} - set(curve.columns)
        if missing:
            raise UserError(f"{where}: the curve has no column {sorted(missing)[0]!r}")
        df = curve[["step", "train_loss", "val_loss"]]
    else:
        df = pd.DataFrame(list(curve), columns=["step", "train_loss", "val_loss"])
    return df.astype({"step": "int64", "train_loss": "float64", "val_loss": "float64"})


def _seeded(side: str, curves: SideCurves) -> list[tuple[int, pd.DataFrame]]:
    pairs = list(curves.items()) if isinstance(curves, Mapping) else list(curves)
    if not pairs:
        raise UserError(f"method A: the {side} side has no curve", "run at least one seed a side")
    out: list[tuple[int, pd.DataFrame]] = []
    for seed, curve in pairs:
        seed = int(seed)
        if any(seed == s for s, _ in out):
            raise UserError(f"method A: {side} seed {seed} appears twice", "give each seed once")
        if out and seed < out[-1][0]:
            raise UserError(
                f"method A: {side} seed {seed} comes after seed {out[-1][0]}",
                "give the seeds in rising order (1337 to 1341)",
            )
        out.append((seed, _eval_frame(curve, f"method A: {side} seed {seed}")))
    return out


def _check_curve(side: str, seed: int, df: pd.DataFrame) -> None:
    where = f"{side} seed {seed}"
    if df.empty:
        raise UserError(f"method A: {where} has no evaluation", "check that the run finished")
    steps = df["step"].to_numpy()
    back = np.flatnonzero(np.diff(steps) <= 0)
    if len(back):
        i = int(back[0])
        raise UserError(
            f"method A: {where} has step {steps[i + 1]} after step {steps[i]}: "
            "evaluation steps must rise, once each"
        )
    for col in ("val_loss", "train_loss"):
        bad = df[~np.isfinite(df[col].to_numpy())]
        if len(bad):
            row = bad.iloc[0]
            raise UserError(
                f"method A: {where} has a {col.replace('_', ' ')} of {row[col]} at step "
                f"{int(row['step'])}",
                "a run whose loss is not a number did not train: find the cause, then run it again",
            )


def _compare_steps(where: str, steps: list[int], ref_where: str, ref: list[int]) -> None:
    """One curve's evaluation steps against the reference curve's; the message names both."""
    if steps == ref:
        return
    if steps == ref[: len(steps)]:
        raise UserError(
            f"method A: {where} stopped early: its last evaluation is at step {steps[-1]}, "
            f"{ref_where} goes on to step {ref[-1]}",
            "run the whole schedule on both sides",
        )
    if ref == steps[: len(ref)]:
        raise UserError(
            f"method A: {ref_where} stopped early: its last evaluation is at step {ref[-1]}, "
            f"{where} goes on to step {steps[-1]}",
            "run the whole schedule on both sides",
        )
    lacking = sorted(set(ref) - set(steps))
    extra = sorted(set(steps) - set(ref))
    parts = []
    if lacking:
        parts.append(f"no evaluation at step {_list(lacking)} where {ref_where} has one")
    if extra:
        parts.append(f"an evaluation at step {_list(extra)} that {ref_where} lacks")
    raise UserError(
        f"method A: {where} has different evaluation steps: {'; '.join(parts)}",
        "evaluate both sides at the same steps (eval_interval 250)",
    )


def _list(steps: list[int], n: int = 5) -> str:
    shown = ", ".join(str(s) for s in steps[:n])
    return shown + (f" and {len(steps) - n} more" if len(steps) > n else "")


def _check_grid(
    where: str, steps: list[int], eval_interval: int | None, last_step: int | None
) -> None:
    """Evaluation points missing on every curve alike: a gap in the grid, or an early end."""
    if last_step is not None and steps[-1] < last_step:
        raise UserError(
            f"method A: both sides stopped early: the last evaluation is at step {steps[-1]}, "
            f"the schedule ends at step {last_step}",
            "run the model's whole schedule (§7 A)",
        )
    interval = eval_interval or (int(np.min(np.diff(steps))) if len(steps) > 1 else None)
    if interval is None:
        return
    expected = list(range(steps[0] if eval_interval is None else 0, steps[-1] + 1, interval))
    lacking = sorted(set(expected) - set(steps))
    off_grid = sorted(set(steps) - set(expected))
    if lacking or off_grid:
        what = f"missing evaluation point at step {_list(lacking)}" if lacking else ""
        if off_grid:
            what += ("; " if what else "") + f"evaluation off the grid at step {_list(off_grid)}"
        raise UserError(
            f"method A: {what} (every {interval} steps, as {where} and every other curve show)",
            "evaluate every eval_interval steps to the end of the schedule",
        )


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
    sides = {PYTORCH: _seeded(PYTORCH, pytorch), CONTENDER: _seeded(CONTENDER, contender)}
    seeds = {side: [s for s, _ in pairs] for side, pairs in sides.items()}
    if seeds[PYTORCH] != seeds[CONTENDER]:
        raise UserError(
            f"method A: the sides ran different seeds: pytorch {seeds[PYTORCH]}, "
            f"contender {seeds[CONTENDER]}",
            "run the same seeds on both sides (§7 A: 1337 to 1341)",
        )
    for side, pairs in sides.items():
        for seed, df in pairs:
            _check_curve(side, seed, df)
    ref_seed, ref_df = sides[PYTORCH][0]
    ref_where, ref_steps = f"pytorch seed {ref_seed}", ref_df["step"].tolist()
    for side, pairs in sides.items():
        for seed, df in pairs:
            _compare_steps(f"{side} seed {seed}", df["step"].tolist(), ref_where, ref_steps)
    _check_grid(ref_where, ref_steps, eval_interval, last_step)
    if ref_steps[-1] < from_step:
        raise UserError(
            f"method A: no evaluation from step {from_step} on: the curves end at step "
            f"{ref_steps[-1]}",
            "run the model's whole schedule (§7 A)",
        )

    curves = pd.concat(
        [df.assign(side=side, seed=seed) for side, pairs in sides.items() for seed, df in pairs],
        ignore_index=True,
    )[["side", "seed", "step", "train_loss", "val_loss"]]
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

    failing = table[table["judged"] & ~table["ok"]]
    first = int(failing["step"].iloc[0]) if len(failing) else None
    if len(seeds[PYTORCH]) < 2:
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


def train_frame(curve: TrainCurve, side: str) -> pd.DataFrame:
    if isinstance(curve, pd.DataFrame):
        if not {"step", "loss"} <= set(curve.columns):
            raise UserError(f"method B: the {side} curve needs the columns step and loss")
        df = curve.copy()
    else:
        df = pd.DataFrame(list(curve), columns=["step", "loss"])
    if "loss_resolution" not in df.columns:
        df["loss_resolution"] = np.nan  # unknown: not checked
    df = df.astype({"step": "int64", "loss": "float64", "loss_resolution": "float64"})
    steps = df["step"].to_numpy()
    back = np.flatnonzero(np.diff(steps) <= 0)
    if len(back):
        i = int(back[0])
        raise UserError(
            f"method B: the {side} curve has step {steps[i + 1]} after step {steps[i]}: "
            "steps must rise, once each"
        )
    return df.set_index("step")


def _needed(df: pd.DataFrame, side: str, last: int) -> pd.DataFrame:
    have = df.index
    if len(have) == 0 or have.max() < last:
        end = "no step at all" if len(have) == 0 else f"its last step is {int(have.max())}"
        raise UserError(
            f"method B: the {side} side stopped early: {end}, and method B needs every step "
            f"from 0 to {last}",
            "train through the whole window",
        )
    lacking = sorted(set(range(0, last + 1)) - set(have))
    if lacking:
        raise UserError(
            f"method B: the {side} curve has no loss at step {_list(lacking)}; method B needs "
            f"every step from 0 to {last}",
            "print a loss at every step (nanoGPT: --log_interval=1)",
        )
    out = df.loc[0:last]
    bad = out[~np.isfinite(out["loss"].to_numpy())]
    if len(bad):
        raise UserError(
            f"method B: the {side} loss at step {int(bad.index[0])} is {bad['loss'].iloc[0]}",
            "a run whose loss is not a number did not train: find the cause, then run it again",
        )
    return out


def _check_resolution(table: pd.DataFrame, res: pd.DataFrame, step0_tol: float, tol: float):
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
        side: _needed(train_frame(c, side), side, last)
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


def method_b_for(protocol: Protocol, model: str, pytorch: TrainCurve, contender: TrainCurve):
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

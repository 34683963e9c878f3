"""The loss curves §7 judges: parsed from the stamped logs, and checked whole before a method
compares them (each side's seeds once and rising, the same evaluation steps, every step a window
needs). Bad input is a `UserError` that names the side, seed and step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from kit.errors import UserError
from kit.measure.stamped import read_stamped

# nanoGPT's evaluation line: print(f"step {iter_num}: train loss {...:.4f}, val loss {...:.4f}").
# D4: the contender prints the same grammar at its evaluations. A protocol file may declare
# another expression per side later; any replacement needs the same three named groups.
EVAL_LINE_REGEX = (
    r"^step (?P<step>\d+): train loss (?P<train_loss>[^,\s]+), val loss (?P<val_loss>\S+)$"
)
EVAL_LINE_PREFIX = r"^step \d+:"  # a line that starts like an evaluation but breaks the grammar


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
) -> list[list[Any]]:
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
    try:
        return [line.text for line in read_stamped(stdout_log)]
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read the log {stdout_log}: {e}") from None


# -- the curves whole, before a method compares them ------------------------------------------


def eval_frame(curve: EvalCurve, where: str) -> pd.DataFrame:
    """A method A curve as DataFrame[step, train_loss, val_loss]."""
    if isinstance(curve, pd.DataFrame):
        missing = {"step", "train_loss", "val_loss"} - set(curve.columns)
        if missing:
            raise UserError(f"{where}: the curve has no column {sorted(missing)[0]!r}")
        df = curve[["step", "train_loss", "val_loss"]]
    else:
        df = pd.DataFrame(list(curve), columns=["step", "train_loss", "val_loss"])
    return df.astype({"step": "int64", "train_loss": "float64", "val_loss": "float64"})


def seeded(side: str, curves: SideCurves) -> list[tuple[int, pd.DataFrame]]:
    """A side's curves as (seed, curve) pairs: each seed once, rising."""
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
        out.append((seed, eval_frame(curve, f"method A: {side} seed {seed}")))
    return out


def check_curve(side: str, seed: int, df: pd.DataFrame) -> None:
    """One evaluation curve can be judged: its steps rise, and every loss is a number."""
    where = f"{side} seed {seed}"
    if df.empty:
        raise UserError(f"method A: {where} has no evaluation", "check that the run finished")
    if fell := _first_fall(df["step"]):
        raise UserError(
            f"method A: {where} has step {fell[1]} after step {fell[0]}: "
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


def compare_steps(where: str, steps: list[int], ref_where: str, ref: list[int]) -> None:
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
        parts.append(f"no evaluation at step {listed(lacking)} where {ref_where} has one")
    if extra:
        parts.append(f"an evaluation at step {listed(extra)} that {ref_where} lacks")
    raise UserError(
        f"method A: {where} has different evaluation steps: {'; '.join(parts)}",
        "evaluate both sides at the same steps (eval_interval 250)",
    )


def listed(steps: list[int], n: int = 5) -> str:
    """Steps for a message: the first few, and how many more."""
    shown = ", ".join(str(s) for s in steps[:n])
    return shown + (f" and {len(steps) - n} more" if len(steps) > n else "")


def check_grid(
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
        what = f"missing evaluation point at step {listed(lacking)}" if lacking else ""
        if off_grid:
            what += ("; " if what else "") + f"evaluation off the grid at step {listed(off_grid)}"
        raise UserError(
            f"method A: {what} (every {interval} steps, as {where} and every other curve show)",
            "evaluate every eval_interval steps to the end of the schedule",
        )


def train_frame(curve: TrainCurve, side: str) -> pd.DataFrame:
    """A method B curve indexed by step, its steps rising once each."""
    if isinstance(curve, pd.DataFrame):
        if not {"step", "loss"} <= set(curve.columns):
            raise UserError(f"method B: the {side} curve needs the columns step and loss")
        df = curve.copy()
    else:
        df = pd.DataFrame(list(curve), columns=["step", "loss"])
    if "loss_resolution" not in df.columns:
        df["loss_resolution"] = np.nan  # unknown: not checked
    df = df.astype({"step": "int64", "loss": "float64", "loss_resolution": "float64"})
    if fell := _first_fall(df["step"]):
        raise UserError(
            f"method B: the {side} curve has step {fell[1]} after step {fell[0]}: "
            "steps must rise, once each"
        )
    return df.set_index("step")


def needed(df: pd.DataFrame, side: str, last: int) -> pd.DataFrame:
    """A side's losses at every step from 0 to `last`, each a number."""
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
            f"method B: the {side} curve has no loss at step {listed(lacking)}; method B needs "
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


def _first_fall(steps: pd.Series) -> tuple[int, int] | None:
    """The first pair of steps that does not rise (a step, then one no later), or None."""
    values = steps.to_numpy()
    back = np.flatnonzero(np.diff(values) <= 0)
    return None if not len(back) else (int(values[back[0]]), int(values[back[0] + 1]))

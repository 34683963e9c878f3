"""What compiling costs, from stamps: warm-up per run and the break-even against eager."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kit.protocol.load import load
from kit.report import compile_cost
from kit.results import judging
from kit.results.records import RunRecord

GRAMMAR = judging.grammar(load(), "pytorch")
STEPS = 400


class FakeRd:
    """A results directory of timed runs: each run's start in its record, its stamped stdout."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.records: list[RunRecord] = []

    def runs(self) -> list[RunRecord]:
        return self.records

    def add(self, run_id: int, first_line_s: float, step_s: list[float] | float) -> str:
        """A run whose step-0 line came `first_line_s` after its start, then steps of step_s
        (one for every step, or one for all)."""
        log_dir = f"runs/{run_id:04d}-x/attempt-1"
        start_ns = 1_000_000_000 * run_id
        each = np.broadcast_to(np.asarray(step_s, dtype=float), (STEPS,))
        at = start_ns + int(first_line_s * 1e9) + np.concatenate([[0], np.cumsum(each * 1e9)])
        lines = [
            f"{int(at[s])} iter {s}: loss 4.0, time {each[s - 1] * 1e3:.2f}ms, mfu -100.00%"
            for s in range(0, STEPS + 1, 10)
        ]
        folder = self.root / log_dir
        folder.mkdir(parents=True)
        (folder / "stdout.log").write_text("\n".join(["1 tokens per iteration", *lines]) + "\n")
        self.records.append(RunRecord(run_id, log_dir, "", "ok", "", "local", start_ns=start_ns))
        return log_dir


def _runs(rd: FakeRd, rows) -> pd.DataFrame:
    """rows: (mode, first_line_s, step_s[, status]); step_s is also the run's §5 step time,
    unless a list is given (its window's mean, steps 100 to 400, is then the step time)."""
    out = []
    for run_id, (mode, first_s, step_s, *status) in enumerate(rows, start=1):
        log_dir = rd.add(run_id, first_s, step_s)
        window = float(np.mean(np.broadcast_to(step_s, (STEPS,))[100:400]))
        out.append(
            {
                "run_id": run_id, "config": f"m/f32/pytorch/{mode}", "card": "L4", "model": "m",
                "precision": "float32", "side": "pytorch", "variant": mode, "kind": "timed",
                "status": status[0] if status else "ok", "step_s": window, "log_dir": log_dir,
            }
        )  # fmt: skip
    return pd.DataFrame(out)


def _costs(tmp_path, made: list) -> pd.DataFrame:
    """The compile-cost table, by variant, of the runs `_runs` makes of `made`."""
    rd = FakeRd(tmp_path)
    return compile_cost.compile_costs(rd, _runs(rd, made), GRAMMAR).set_index("variant")


def test_warmup_is_the_time_to_the_first_step_line(tmp_path):
    # eager: its first line after 0.5 and 0.7 s, 10 ms steps; default: 30 and 40 s, 5 ms steps
    t = _costs(
        tmp_path,
        [("eager", 0.5, 0.010), ("eager", 0.7, 0.010), ("default", 40.0, 0.005),
         ("default", 30.0, 0.005)],
    )  # fmt: skip
    assert t.loc["eager", "median_warmup_s"] == pytest.approx(0.6)
    assert t.loc["default", "min_warmup_s"] == pytest.approx(30.0)
    assert t.loc["default", "max_warmup_s"] == pytest.approx(40.0)
    assert t.loc["default", "extra_warmup_vs_eager_s"] == pytest.approx(34.4)
    # (35 - 0.6) s of extra warm-up, 5 ms saved a step: 6,880 steps to pay for itself
    assert t.loc["default", "break_even_steps_vs_eager"] == math.ceil(34.4 / 0.005)
    assert t.loc["default", "break_even_why"] == ""
    assert math.isnan(t.loc["eager", "break_even_steps_vs_eager"])
    assert t.loc["eager", "break_even_why"] == compile_cost.REFERENCE


def test_a_busy_machine_makes_no_negative_warmup_and_no_break_even(tmp_path):
    """The series the report once published from a loaded machine: steps 0 to 100 quick, the
    window's steps slowed by other work, so 100 steps at the window's step time came to more
    than the time to step 100 (a warm-up of −9.86 s, a break-even of 0 steps)."""
    rng = np.random.default_rng(20)
    rd = FakeRd(tmp_path)
    rows = []
    for mode, first_s in (("eager", 1.6), ("default", 2.4), ("reduce-overhead", 2.6)):
        for _ in range(5):
            steps = np.full(STEPS, 0.008)
            steps[100:] = rng.uniform(0.110, 0.420)  # the window's steps, slowed by others
            rows.append((mode, first_s + rng.uniform(0.0, 1.5), steps.tolist()))
    runs = _runs(rd, rows)
    # what the old estimate made of it: the time to step 100 less 100 window steps
    to_100 = np.array([f + 100 * 0.008 for _, f, _ in rows])
    assert (to_100 - 100 * runs["step_s"].to_numpy() < 0).any()

    t = compile_cost.compile_costs(rd, runs, GRAMMAR).set_index("variant")
    assert (t[["min_warmup_s", "median_warmup_s", "max_warmup_s"]] > 0).all().all()
    for mode in ("default", "reduce-overhead"):
        assert math.isnan(t.loc[mode, "break_even_steps_vs_eager"])
        assert math.isnan(t.loc[mode, "extra_warmup_vs_eager_s"])
        assert t.loc[mode, "break_even_why"] == compile_cost.WARMUPS_OVERLAP


def test_a_cost_apart_with_steps_that_overlap_has_a_cost_and_no_break_even(tmp_path):
    t = _costs(
        tmp_path,
        [("eager", 1.0, 0.010), ("eager", 1.2, 0.012), ("default", 9.0, 0.011),
         ("default", 9.5, 0.0105)],
    )  # fmt: skip
    assert t.loc["default", "extra_warmup_vs_eager_s"] == pytest.approx(9.25 - 1.1)
    assert math.isnan(t.loc["default", "break_even_steps_vs_eager"])
    assert t.loc["default", "break_even_why"] == compile_cost.STEPS_OVERLAP


def test_a_mode_with_slower_steps_never_pays_and_an_incomplete_one_has_no_figure(tmp_path):
    t = _costs(
        tmp_path,
        [("eager", 1.5, 0.010), ("max-autotune", 60.0, 0.012), ("default", 10.0, 0.005),
         ("default", 9.0, 0.005, "void")],
    )  # fmt: skip
    assert math.isinf(t.loc["max-autotune", "break_even_steps_vs_eager"])
    assert t.loc["max-autotune", "break_even_why"] == compile_cost.NEVER
    assert "default" not in t.index  # a void run: the configuration is not complete


def test_the_report_says_never_for_a_mode_that_never_pays_and_draws_it():
    from kit.report import figures, overview

    def row(variant: str, v: float, why: str = "") -> pd.Series:
        return pd.Series(
            {"variant": variant, "break_even_steps_vs_eager": v, "break_even_why": why}
        )

    assert overview._break_even(row("default", math.inf)) == "never"
    assert overview._break_even(row("default", 1234.0)) == "1,234"
    assert overview._break_even(row("eager", math.nan)) == "eager is the reference"
    assert overview._break_even(row("default", math.nan)) == "— (no complete eager mode)"
    overlap = overview._break_even(row("default", math.nan, compile_cost.WARMUPS_OVERLAP))
    assert overlap == f"— ({compile_cost.WARMUPS_OVERLAP})"
    rows = [
        figures.CompileCost("eager", "eager", 1.0, 0.9, 1.1, None),
        figures.CompileCost("default", "default", 30.0, 29.0, 31.0, math.inf),
        figures.CompileCost("max-autotune", "max-autotune", 90.0, 80.0, 95.0, 4100.0),
        figures.CompileCost("reduce-overhead", "reduce-overhead", 2.0, 1.0, 3.0, None, "overlap"),
    ]
    png = figures.compile_costs_png(rows, "What compiling costs")
    assert png.startswith(b"\x89PNG") and png == figures.compile_costs_png(
        rows, "What compiling costs"
    )


def test_every_mode_and_build_has_its_own_colour_marker_and_line():
    """Told apart in colour, and in grey by marker and line style."""
    from kit.report import figures

    keys = [("pytorch", m) for m in figures.MODES] + [("contender", "mica"), ("contender", "b2")]
    looks = figures.styles(keys)
    for field in ("colour", "marker", "line"):
        values = [str(getattr(x, field)) for x in looks]
        assert len(set(values)) == len(values), field
    assert figures.styles([("contender", "mica")]) == looks[4:5]  # a build keeps its place

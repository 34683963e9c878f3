"""What compiling costs, from stamps: warm-up per run and the break-even against eager."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from kit.engine.records import RunRecord
from kit.report import compile_cost


class FakeRd:
    def __init__(self, starts: dict[int, int]) -> None:
        self.starts = starts

    def runs(self) -> list[RunRecord]:
        return [
            RunRecord(k, f"runs/{k:04d}-x/attempt-1", "", "ok", "", "local", start_ns=v)
            for k, v in self.starts.items()
        ]


def _runs(rows):
    cols = [
        "run_id",
        "config",
        "card",
        "model",
        "precision",
        "side",
        "variant",
        "kind",
        "status",
        "step_s",
        "window_start_ns",
    ]
    return pd.DataFrame(rows, columns=cols)


def _row(run_id, mode, step_s, to_step100_s, status="ok"):
    return [
        run_id,
        f"m/f32/pytorch/{mode}",
        "L4",
        "m",
        "float32",
        "pytorch",
        mode,
        "timed",
        status,
        step_s,
        int(to_step100_s * 1e9),
    ]


def test_warmup_is_the_time_to_step_100_less_100_measured_steps():
    # eager: 10 ms steps, step 100 after 1.5 s → 0.5 s warm-up; default: 5 ms steps, 40.5 s → 40 s
    runs = _runs(
        [
            _row(1, "eager", 0.010, 1.5),
            _row(2, "eager", 0.010, 1.7),
            _row(3, "default", 0.005, 40.5),
            _row(4, "default", 0.005, 30.5),
        ]
    )
    rd = FakeRd({i: 0 for i in range(1, 5)})
    t = compile_cost.compile_costs(rd, runs, 100).set_index("variant")
    assert t.loc["eager", "median_warmup_s"] == pytest.approx(0.6)
    assert t.loc["default", "min_warmup_s"] == pytest.approx(30.0)
    assert t.loc["default", "max_warmup_s"] == pytest.approx(40.0)
    # (35 - 0.6) s of extra warm-up, 5 ms saved a step: 6,880 steps to pay for itself
    assert t.loc["default", "break_even_steps_vs_eager"] == math.ceil(34.4 / 0.005)
    assert math.isnan(t.loc["eager", "break_even_steps_vs_eager"])


def test_a_mode_with_slower_steps_never_pays_and_an_incomplete_one_has_no_figure():
    runs = _runs(
        [
            _row(1, "eager", 0.010, 1.5),
            _row(2, "max-autotune", 0.012, 60.0),
            _row(3, "default", 0.005, 10.0),
            _row(4, "default", 0.005, 9.0, "void"),
        ]
    )
    t = compile_cost.compile_costs(FakeRd({i: 0 for i in range(1, 5)}), runs, 100)
    t = t.set_index("variant")
    assert math.isinf(t.loc["max-autotune", "break_even_steps_vs_eager"])
    assert "default" not in t.index  # a void run: the configuration is not complete


def test_the_report_says_never_for_a_mode_that_never_pays_and_draws_it():
    from kit.report import figures, overview

    def row(variant: str, v: float) -> pd.Series:
        return pd.Series({"variant": variant, "break_even_steps_vs_eager": v})

    assert overview._break_even(row("default", math.inf)) == "never"
    assert overview._break_even(row("default", 1234.0)) == "1,234"
    assert overview._break_even(row("eager", math.nan)) == "eager is the reference"
    assert overview._break_even(row("default", math.nan)) == "— (no complete eager mode)"
    rows = [
        figures.CompileCost("eager", "eager", 1.0, 0.9, 1.1, None),
        figures.CompileCost("default", "default", 30.0, 29.0, 31.0, math.inf),
        figures.CompileCost("max-autotune", "max-autotune", 90.0, 80.0, 95.0, 4100.0),
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

"""`compare`'s classes and `--fail-slower`'s gate on sides built from step times: conditions
decide the class, an interval only from MIN_RUNS runs a side, and a gate that fails closed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kit.errors import ExitCode
from kit.report import compare_gate, compare_view, comparison, intervals

THRESHOLD = 0.01
KEYS = ("shakespeare-char", "float32")


def _side(
    root: str,
    times: dict[str, list[float] | str],
    flagged: dict[str, str] | None = None,
    aa_not_level: str = "",
) -> comparison.Side:
    """A directory as comparison.read gives it (kit/report/comparison.py read): per
    configuration ("contender/b1"), its ok timed runs' step times, or the state of one without
    a time ("failed", "out of memory")."""
    rows, step_s = [], {}
    for name, t in times.items():
        side, variant = name.split("/")
        config = f"{KEYS[0]}/{KEYS[1]}/{side}/{variant}"
        has = not isinstance(t, str)
        if has:
            step_s[config] = tuple(t)
        rows.append(
            {
                "config": config, "card": "cpu", "model": KEYS[0], "precision": KEYS[1],
                "side": side, "variant": variant, "state": "complete" if has else t,
                "median_step_s": float(np.median(t)) if has else np.nan,
                "min_step_s": min(t) if has else np.nan, "max_step_s": max(t) if has else np.nan,
                "out_of_memory": t == "out of memory",
            }
        )  # fmt: skip
    named = {f"{KEYS[0]}/{KEYS[1]}/{k}": v for k, v in (flagged or {}).items()}
    return comparison.Side(
        Path(root), "0" * 64, pd.DataFrame(rows), step_s, THRESHOLD, {},
        flagged=named, aa_not_level=aa_not_level,
    )  # fmt: skip


def _runs(median: float, n: int = 5, noise: float = 0.002, seed: int = 1) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median * (1 + rng.normal(0, noise, n)))


def test_a_crashed_b_fails_the_gate_each_configuration_named():
    a = _side(
        "a", {"contender/b1": _runs(0.1), "pytorch/eager": _runs(0.2), "pytorch/c": _runs(0.15)}
    )
    b = _side("b", {"contender/b1": "failed", "pytorch/eager": "out of memory"})
    result = comparison.compare(a, b)
    found = compare_gate.gate(result, 0.10)
    assert found.exit_code() is ExitCode.GATE_MISSING
    why = {f.configuration.split(" · ")[-1]: f.why for f in found.missing}
    assert "failed" in why["b1"] and "out of memory" in why["eager"]
    assert why["c"] == "B lacks this configuration"
    said = "\n".join(found.lines())
    assert "B lacks what A has" in said and "failed (exit 6)" in said
    allowed = compare_gate.gate(result, 0.10, allow_missing=True)
    assert allowed.exit_code() is ExitCode.OK and allowed.missing  # still named
    assert "--allow-missing: not failed" in "\n".join(allowed.lines())


def test_flagged_runs_make_a_slower_b_ambiguous_and_the_gate_undecided():
    a = _side("a", {"contender/b1": _runs(0.100)})
    slow = _runs(0.108, seed=2)
    busy = (
        "4 of 5 timed runs flagged: measured on a busy machine (others used up to 99% of the CPUs)"
    )
    clean = comparison.compare(a, _side("b", {"contender/b1": slow}))
    assert clean["both"][0]["verdict"] == comparison.SLOWER
    assert compare_gate.gate(clean, 0.02).exit_code() is ExitCode.SLOWER
    for b in (
        _side("b", {"contender/b1": slow}, flagged={"contender/b1": busy}),
        _side("b", {"contender/b1": slow}, aa_not_level="A/A not level on this card: ratio 0.978"),
    ):
        (e,) = comparison.compare(a, b)["both"]
        assert e["verdict"] == comparison.AMBIGUOUS, e["reason"]
        assert "the numbers alone read slower" in e["reason"]
        assert (e["flagged_b"] or e["aa_not_level_b"]) in e["reason"]
        found = compare_gate.gate(comparison.compare(a, b), 0.02)
        assert found.exit_code() is ExitCode.OK and len(found.undecided) == 1
        assert "the gate could not decide" in found.lines()[0]
        strict = compare_gate.gate(comparison.compare(a, b), 0.02, fail_ambiguous=True)
        assert strict.exit_code() is ExitCode.GATE_UNDECIDED
    # the column the table shows
    (e,) = comparison.compare(a, _side("b", {"contender/b1": slow}, {"contender/b1": busy}))["both"]
    assert compare_view.flagged(e) == f"B: {busy}"


@pytest.mark.parametrize("n", [2, 3, intervals.MIN_RUNS - 1])
def test_below_min_runs_there_is_no_interval_and_ranges_decide(n):
    a = _side("a", {"contender/b1": _runs(0.100, n)})
    b = _side("b", {"contender/b1": _runs(0.120, n, seed=3)})
    (e,) = comparison.compare(a, b)["both"]
    assert e["interval_b_over_a"] is None and e["interval_level"] is None
    assert f"{n} runs a side: no interval" in e["reason"]
    assert e["verdict"] == comparison.SLOWER  # 20% apart, the ranges far apart
    assert compare_view.ratio(e) == f"{e['ratio_b_over_a']:.3f} ({n} runs a side: no interval)"
    assert compare_gate.gate(comparison.compare(a, b), 0.05).exit_code() is ExitCode.SLOWER
    # ranges that overlap: never faster or slower without an interval
    close = _side("b", {"contender/b1": [x * 1.003 for x in _runs(0.100, n, noise=0.02)]})
    (e,) = comparison.compare(_side("a", {"contender/b1": _runs(0.1, n, noise=0.02)}), close)[
        "both"
    ]
    assert e["verdict"] in (comparison.SAME, comparison.AMBIGUOUS)


def test_from_min_runs_the_interval_is_of_b_over_a_in_one_direction():
    a = _side("a", {"contender/b1": _runs(0.100, intervals.MIN_RUNS)})
    b = _side("b", {"contender/b1": _runs(0.090, intervals.MIN_RUNS, seed=4)})
    (e,) = comparison.compare(a, b)["both"]
    low, high = e["interval_b_over_a"]
    assert low <= e["ratio_b_over_a"] <= high < 1  # B faster: below 1, its interval too
    assert e["verdict"] == comparison.FASTER
    assert "ratio_a_over_b" not in e


def test_the_gate_message_names_its_own_percent_alone():
    a = _side("a", {"contender/b1": _runs(0.100)})
    b = _side("b", {"contender/b1": _runs(0.120, seed=5)})
    (line, outcome) = compare_gate.gate(comparison.compare(a, b), 0.05).lines()
    assert "more than 5%" in line and "above 1.05" in line and "1.0%" not in line
    assert outcome == "gate 5%: failed (exit 5)"
    assert compare_gate.gate(comparison.compare(a, b), 0.005).lines()[-1].startswith("gate 0.5%")


def test_on_a_terminal_the_table_is_drawn_by_rich_with_one_ratio_column():
    import io

    from rich.console import Console

    a = _side("a", {"contender/b1": _runs(0.100)})
    b = _side("b", {"contender/b1": _runs(0.120, seed=5)})
    out = io.StringIO()
    compare_view.terminal(comparison.compare(a, b), Console(file=out, width=400))
    text = out.getvalue()
    assert "┃ class" in text and "B / A (interval)" in text and "A / B" not in text
    (row,) = [line for line in text.splitlines() if "│ contender" in line]
    assert "│ slower" in row and "│ none" in row

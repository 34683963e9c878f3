"""§7 correctness: methods A and B at the exact edges of their rules, bad input, the verdict gate."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kit.correctness import checks, curves, methods
from kit.errors import UserError
from kit.protocol.load import load
from kit.results import store

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "correctness"
P = load()
SEEDS = list(range(1337, 1342))
M1_STEPS = list(range(0, 5001, 250))


# -- synthetic families for method A --------------------------------------------------------


def base(step: int) -> float:
    return round(4.2 - step / 2500, 4)  # a plain decreasing curve, printed to 4 decimals


def family(
    offsets=(-0.01, -0.005, 0.0, 0.005, 0.01), shift=0.0, steps=M1_STEPS, seeds=SEEDS, at=None
):
    """Five seeds: val = base + shift + offset; `at` maps a step to (shift, offsets) there."""
    out = {}
    for i, seed in enumerate(seeds):
        rows = []
        for step in steps:
            s, offs = (at or {}).get(step, (shift, offsets))
            v = round(base(step) + s + offs[i], 6)
            rows.append((step, v - 0.05, v))
        out[seed] = pd.DataFrame(rows, columns=["step", "train_loss", "val_loss"])
    return out


def test_identical_families_pass():
    r = methods.method_a(family(), family())
    assert r.passed and r.verdict is True and r.reason == "passed"
    assert r.first_failing_step is None
    assert r.seeds == tuple(SEEDS)
    assert list(r.table.columns) == [
        "step", "judged", "pytorch_median", "pytorch_min", "pytorch_max", "pytorch_range",
        "contender_median", "contender_min", "contender_max", "contender_range",
        "difference", "allowed", "ok",
    ]  # fmt: skip
    assert len(r.curves) == 2 * 5 * len(M1_STEPS)


def test_difference_equal_to_the_larger_range_passes():
    # PyTorch's range 0.02, the contender's 0.01; medians 0.02 apart: exactly at the edge
    r = methods.method_a(family(), family(offsets=(-0.005, -0.0025, 0, 0.0025, 0.005), shift=0.02))
    assert r.passed, r.reason
    judged = r.table[r.table["judged"]]
    assert judged["difference"].to_numpy() == pytest.approx(0.02, abs=1e-12)
    assert judged["allowed"].to_numpy() == pytest.approx(0.02, abs=1e-12)


def test_difference_just_above_the_larger_range_fails():
    r = methods.method_a(
        family(), family(offsets=(-0.005, -0.0025, 0, 0.0025, 0.005), shift=0.0201)
    )
    assert r.verdict is False and not r.passed
    assert r.first_failing_step == 1000
    assert r.reason == "method A failed at step 1000: medians differ by 0.0201 > larger range 0.02"


def test_the_larger_of_the_two_ranges_is_allowed():
    # the contender's range (0.04) is the larger; PyTorch's alone (0.02) would fail 0.03
    wide = (-0.02, -0.01, 0.0, 0.01, 0.02)
    r = methods.method_a(family(), family(offsets=wide, shift=0.03))
    assert r.passed, r.reason
    assert r.table["allowed"].iloc[-1] == pytest.approx(0.04)
    r = methods.method_a(family(offsets=wide, shift=0.03), family())  # and from either side
    assert r.passed, r.reason


def test_step_750_is_not_judged_and_step_1000_is():
    apart = (0.5, (-0.01, -0.005, 0.0, 0.005, 0.01))
    r = methods.method_a(family(), family(at={750: apart}))
    assert r.passed, r.reason
    row = r.table.set_index("step").loc[750]
    assert not row["judged"] and not row["ok"]  # shown, not judged
    r = methods.method_a(family(), family(at={1000: apart}))
    assert r.first_failing_step == 1000 and not r.passed


def test_failure_reason_names_step_difference_and_range():
    shifted = (0.031, (-0.01, -0.005, 0.0, 0.005, 0.01))
    r = methods.method_a(family(), family(at={1250: shifted, 1500: shifted}))
    assert r.reason == "method A failed at step 1250: medians differ by 0.031 > larger range 0.02"
    assert r.first_failing_step == 1250


def test_from_step_is_a_parameter():
    shifted = (0.5, (-0.01, -0.005, 0.0, 0.005, 0.01))
    r = methods.method_a(family(), family(at={1000: shifted}), from_step=1250)
    assert r.passed


def test_final_losses_as_median_and_range():
    r = methods.method_a(family(), family(shift=0.002))
    f = r.final.set_index("side")
    assert f.loc["pytorch", "step"] == 5000 and f.loc["pytorch", "seeds"] == 5
    assert f.loc["pytorch", "val_loss_median"] == pytest.approx(base(5000))
    assert f.loc["pytorch", "val_loss_range"] == pytest.approx(0.02)
    assert f.loc["contender", "val_loss_median"] == pytest.approx(base(5000) + 0.002)
    assert f.loc["contender", "train_loss_min"] == pytest.approx(base(5000) + 0.002 - 0.01 - 0.05)


def test_one_seed_a_side_is_read_not_judged():
    one = {1337: family()[1337]}
    r = methods.method_a(one, {1337: family(shift=0.3)[1337]})
    assert r.verdict is None and not r.passed
    assert r.reason == "one seed a side: read, not judged"
    assert r.seeds == (1337,)
    assert r.first_failing_step == 1000  # the table still says where the medians part


def test_curves_as_lists_of_tuples():
    rows = [(s, base(s) - 0.05, base(s)) for s in M1_STEPS]
    r = methods.method_a([(1337, rows), (1338, rows)], {1337: rows, 1338: rows})
    assert r.passed


# -- bad input to method A ------------------------------------------------------------------


def test_seeds_out_of_order():
    f = family()
    with pytest.raises(UserError, match="contender seed 1338 comes after seed 1339"):
        methods.method_a(f, {1337: f[1337], 1339: f[1339], 1338: f[1338]})


def test_seed_repeated():
    f = family()
    with pytest.raises(UserError, match="pytorch seed 1338 appears twice"):
        methods.method_a([(1337, f[1337]), (1338, f[1338]), (1338, f[1339])], f)


def test_sides_with_different_seeds():
    f = family()
    with pytest.raises(
        UserError,
        match=r"different seeds: pytorch \[1337, 1338, 1339, 1340, 1341\], contender \[1337, 1338, 1339, 1340\]",
    ):
        methods.method_a(f, {s: f[s] for s in SEEDS[:4]})


def test_nan_loss_names_side_seed_and_step():
    f = family()
    f[1340].loc[f[1340]["step"] == 2500, "val_loss"] = float("nan")
    with pytest.raises(UserError, match="contender seed 1340 has a val loss of nan at step 2500"):
        methods.method_a(family(), f)
    g = family()
    g[1337].loc[g[1337]["step"] == 250, "train_loss"] = float("inf")
    with pytest.raises(UserError, match="pytorch seed 1337 has a train loss of inf at step 250"):
        methods.method_a(g, family())


def test_a_side_that_stopped_early_names_its_last_step():
    short = family(steps=list(range(0, 3001, 250)))
    f = family()
    f[1339] = short[1339]
    with pytest.raises(
        UserError,
        match="contender seed 1339 stopped early: its last evaluation is at step 3000, pytorch seed 1337 goes on to step 5000",
    ):
        methods.method_a(family(), f)
    # the reference itself stopped early
    with pytest.raises(
        UserError, match="pytorch seed 1337 stopped early: its last evaluation is at step 3000"
    ):
        methods.method_a(short, family())


def test_both_sides_stopped_early_against_the_schedule():
    short = family(steps=list(range(0, 3001, 250)))
    assert methods.method_a(short, short).passed  # without the schedule, nothing to tell
    with pytest.raises(
        UserError,
        match="both sides stopped early: the last evaluation is at step 3000, the schedule ends at step 5000",
    ):
        methods.method_a(short, short, last_step=5000)


def test_missing_evaluation_point_in_one_curve():
    f = family()
    f[1338] = f[1338][f[1338]["step"] != 1250].reset_index(drop=True)
    with pytest.raises(
        UserError,
        match="contender seed 1338 has different evaluation steps: no evaluation at step 1250 where pytorch seed 1337 has one",
    ):
        methods.method_a(family(), f)


def test_missing_evaluation_point_in_every_curve():
    steps = [s for s in M1_STEPS if s != 1250]
    f = family(steps=steps)
    with pytest.raises(UserError, match="missing evaluation point at step 1250"):
        methods.method_a(f, f)
    with pytest.raises(UserError, match="missing evaluation point at step 1250"):
        methods.method_a(f, f, eval_interval=250, last_step=5000)


def test_curves_with_different_evaluation_steps():
    f = family()
    moved = [s if s != 1250 else 1300 for s in M1_STEPS]
    f[1339] = family(steps=moved)[1339]
    with pytest.raises(
        UserError,
        match="contender seed 1339 has different evaluation steps: no evaluation at step 1250 where pytorch seed 1337 has one; an evaluation at step 1300 that pytorch seed 1337 lacks",
    ):
        methods.method_a(family(), f)


def test_between_seeds_of_one_side():
    f = family()
    f[1341] = family(steps=[s for s in M1_STEPS if s != 4000])[1341]
    with pytest.raises(
        UserError,
        match="pytorch seed 1341 has different evaluation steps: no evaluation at step 4000",
    ):
        methods.method_a(f, family())


def test_repeated_or_falling_steps_in_a_curve():
    f = family()
    df = f[1337]
    f[1337] = pd.concat([df.iloc[:5], df.iloc[4:]], ignore_index=True)
    with pytest.raises(UserError, match="pytorch seed 1337 has step 1000 after step 1000"):
        methods.method_a(f, family())


def test_no_evaluation_from_the_judged_step_on():
    f = family(steps=[0, 250, 500, 750])
    with pytest.raises(
        UserError, match="no evaluation from step 1000 on: the curves end at step 750"
    ):
        methods.method_a(f, f)


def test_a_side_without_curves():
    with pytest.raises(UserError, match="the contender side has no curve"):
        methods.method_a(family(), {})


# -- parsing --------------------------------------------------------------------------------


def test_parse_nanogpt_eval_lines():
    lines = (FIXTURES / "nanogpt_stdout.txt").read_text().splitlines()
    df = curves.parse_eval_lines(lines)
    assert list(df.columns) == ["step", "train_loss", "val_loss"]
    assert df["step"].tolist() == [0, 4, 8, 12]
    assert df.iloc[0].tolist() == [0, 4.1740, 4.1747]


def test_parse_contender_eval_lines_beside_its_step_lines():
    lines = (FIXTURES / "contender_stdout.txt").read_text().splitlines()
    df = curves.parse_eval_lines(lines)
    assert df["step"].tolist() == [0, 4, 8, 12]
    assert df["val_loss"].iloc[-1] == 4.1842


def _train_lines(fixture: str, grammar):
    """A fixture's training lines, parsed in a side's grammar."""
    lines = (FIXTURES / fixture).read_text().splitlines()
    return curves.parse_train_lines(lines, grammar.line_regex, grammar.step_prefix)


def test_parse_train_lines_of_both_sides():
    nano = _train_lines("nanogpt_stdout.txt", P.pytorch)
    assert nano["step"].tolist() == list(range(13))
    assert nano["loss"].iloc[0] == 4.1761
    assert nano["loss_resolution"].iloc[0] == pytest.approx(1e-4)  # nanoGPT prints .4f
    mica = _train_lines("contender_stdout.txt", P.contender)
    assert mica["step"].tolist() == list(range(13))
    assert mica["loss"].iloc[1] == 4.17947388
    assert mica["loss_resolution"].iloc[1] == pytest.approx(1e-8)


def test_parse_keeps_nan_and_refuses_broken_lines():
    df = curves.parse_eval_lines(["step 0: train loss nan, val loss nan"])
    assert np.isnan(df["val_loss"].iloc[0])
    with pytest.raises(UserError, match="line 2 starts like a loss line but breaks the grammar"):
        curves.parse_eval_lines(
            ["step 0: train loss 4.1, val loss 4.2", "step 250: train loss 3.0"]
        )
    with pytest.raises(UserError, match="the val loss 'x4' at step 0 is not a number"):
        curves.parse_eval_lines(["step 0: train loss 4.1, val loss x4"])
    with pytest.raises(UserError, match="step 0 comes after step 250"):
        curves.parse_eval_lines(
            ["step 250: train loss 4.1, val loss 4.2", "step 0: train loss 4.1, val loss 4.2"]
        )


def test_read_stamped_log(tmp_path: Path):
    log = tmp_path / "stdout.log"
    log.write_bytes(
        b"100 step 0: train loss 4.1740, val loss 4.1747\n200 iter 0: loss 4.1761, time 1ms, mfu 0%\n"
    )
    assert curves.parse_eval_lines(curves.read_log_lines(log))["step"].tolist() == [0]
    with pytest.raises(UserError, match="cannot read the log"):
        curves.read_log_lines(tmp_path / "absent.log")


# -- method B -------------------------------------------------------------------------------


def train_curve(n: int = 201, start: float = 4.0) -> pd.DataFrame:
    steps = np.arange(n)
    return pd.DataFrame({"step": steps, "loss": np.round(start - steps * 0.005, 6)})


def with_loss(curve: pd.DataFrame, **at: float) -> pd.DataFrame:
    out = curve.copy()
    for step, loss in at.items():
        out.loc[out["step"] == int(step.removeprefix("s")), "loss"] = loss
    return out


def test_method_b_identical_curves_pass():
    r = methods.method_b(train_curve(), train_curve())
    assert r.passed and r.reason == "passed" and r.beside is None
    assert r.judged.window == (1, 200)
    assert r.step0_relative_difference == 0
    assert r.table["step"].tolist() == list(range(201))


def test_step0_exactly_1e5_relative_passes():
    r = methods.method_b(train_curve(), with_loss(train_curve(), s0=4.00004))
    assert r.step0_relative_difference == pytest.approx(1e-5, rel=1e-9)
    assert r.passed, r.reason


def test_step0_just_above_1e5_fails():
    r = methods.method_b(train_curve(), with_loss(train_curve(), s0=4.0000401))
    assert not r.passed and r.first_failing_step == 0
    assert r.reason == (
        "method B failed at step 0 (window 1 to 200): the contender's loss 4.00004 "
        "and PyTorch's 4 differ by 1.002e-05 relative > 1e-05"
    )


def test_a_step_exactly_1pct_passes_and_just_above_fails():
    p = with_loss(train_curve(), s50=2.0)
    assert methods.method_b(p, with_loss(p, s50=2.02)).passed
    r = methods.method_b(p, with_loss(p, s50=2.0201))
    assert r.first_failing_step == 50
    assert r.reason == (
        "method B failed at step 50 (window 1 to 200): the contender's loss 2.0201 "
        "and PyTorch's 2 differ by 1.005% relative > 1%"
    )


def test_relative_to_pytorchs_loss():
    p = with_loss(train_curve(), s50=2.0)
    assert methods.method_b(p, with_loss(p, s50=1.98)).passed  # 0.02 / 2.0 = 1%
    q = with_loss(train_curve(), s50=1.98)
    assert not methods.method_b(q, with_loss(q, s50=2.0)).passed  # 0.02 / 1.98 > 1%


def test_steps_after_the_window_judge_nothing():
    long = train_curve(400)
    r = methods.method_b(long, with_loss(long, s300=9.0))
    assert r.passed and len(r.table) == 201


def test_m2b_window_judges_to_step_100_and_200_steps_stand_beside():
    # amendment 6: step 150 differs by 1.2%: passes steps 1 to 100, fails §7 B's 200 steps
    p = with_loss(train_curve(), s150=3.0)
    q = with_loss(p, s150=3.036)
    protocol = load()  # amendment 6's windows are the protocol file's
    assert protocol.method_b_window("gpt2-medium") == (1, 100)
    assert protocol.method_b_beside_window("gpt2-medium") == (1, 200)
    r = methods.method_b_for(protocol, "gpt2-medium", p, q)
    assert r.passed and r.judged.window == (1, 100)
    assert r.beside is not None and not r.beside.passed
    assert r.beside.window == (1, 200) and r.beside.first_failing_step == 150
    assert r.beside.reason.startswith("method B failed at step 150 (window 1 to 200)")
    assert "1.200% relative > 1%" in r.beside.reason
    assert r.table.set_index("step").loc[150, "judged"] == False  # noqa: E712
    assert r.table.set_index("step").loc[150, "beside"] == True  # noqa: E712
    # M1 and M2 keep their 200 steps
    for model in ("shakespeare-char", "gpt2-small"):
        assert protocol.method_b_window(model) == (1, 200)
        assert protocol.method_b_beside_window(model) is None
        small = methods.method_b_for(protocol, model, p, q)
        assert not small.passed and small.first_failing_step == 150


def test_method_b_max_difference_is_reported():
    p = train_curve()
    r = methods.method_b(p, with_loss(p, s77=p["loss"].iloc[77] * 1.004))
    assert r.judged.max_at_step == 77
    assert r.judged.max_relative_difference == pytest.approx(0.004)


def test_method_b_missing_step():
    q = train_curve().drop(index=57)
    with pytest.raises(
        UserError,
        match="the contender curve has no loss at step 57; method B needs every step from 0 to 200",
    ) as e:
        methods.method_b(train_curve(), q)
    assert "--log_interval=1" in str(e.value.fix)


def test_method_b_side_that_stopped_early():
    with pytest.raises(UserError, match="the pytorch side stopped early: its last step is 120"):
        methods.method_b(train_curve(121), train_curve())


def test_method_b_nan():
    with pytest.raises(UserError, match="the contender loss at step 33 is nan"):
        methods.method_b(train_curve(), with_loss(train_curve(), s33=float("nan")))


def test_method_b_steps_out_of_order():
    q = train_curve()
    q = pd.concat([q.iloc[:10], q.iloc[9:]], ignore_index=True)
    with pytest.raises(UserError, match="the contender curve has step 9 after step 9"):
        methods.method_b(train_curve(), q)


def test_method_b_refuses_losses_printed_too_coarsely():
    # nanoGPT prints `.4f`: at M1's step-0 loss near 4.17 that is 2.4e-5 relative, coarser than
    # a tenth of the 1e-5 rule, so step 0 cannot be judged from those digits
    nano = curves.parse_train_lines(
        (FIXTURES / "nanogpt_stdout.txt").read_text().splitlines(), P.pytorch.line_regex
    )
    mica = curves.parse_train_lines(
        (FIXTURES / "contender_stdout.txt").read_text().splitlines(), P.contender.line_regex
    )
    with pytest.raises(
        UserError,
        match=r"the pytorch loss at step 0 is printed to 0.0001 \(2.4e-05 relative\), too coarse to judge the rule of 1e-05 at step 0",
    ) as e:
        methods.method_b(nano, mica, window=(1, 12))
    assert "more digits" in str(e.value.fix)
    # full digits on both sides are judged
    full = mica.assign(loss_resolution=1e-9)
    r = methods.method_b(full, full.assign(loss=full["loss"] * (1 + 5e-6)), window=(1, 12))
    assert r.passed


def test_method_b_from_tuples():
    rows = [(s, 4.0 - s / 100) for s in range(201)]
    assert methods.method_b(rows, rows).passed


# -- records and the verdict gate (amendment 7.3) ---------------------------------------------

R4090, R3090, L4 = "NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090 Ti", "NVIDIA L4"


def a_rec(card=R4090, seeds=5, passed=True, step=None, model="gpt2-small", precision="bfloat16"):
    return checks.CheckRecord(
        "A",
        card,
        model,
        precision,
        seeds,
        passed,
        step,
        "passed" if passed else f"method A failed at step {step}: ...",
    )


def b_rec(card=R4090, passed=True, step=None, model="gpt2-small"):
    return checks.CheckRecord(
        "B", card, model, "float32", 1, passed, step, "passed" if passed else "..."
    )


def status(records, card=R4090, model="gpt2-small", precision="bfloat16"):
    return checks.check_verdict(model, precision, card, records)[0]


def test_status_passed_on_the_card_of_five_seeds():
    assert status([a_rec(), b_rec()]) == "passed"


def test_a_method_b_check_whose_sides_were_not_isolated_gates_no_verdict():
    import dataclasses

    open_b = dataclasses.replace(b_rec(), sides_isolated=False)
    said = status([a_rec(), open_b])
    assert said.startswith(f"method B on {R4090}: {checks.NOT_ISOLATED}"), said
    assert "--executor docker" in said
    # isolated, or a record of a kit that did not say: as before
    assert status([a_rec(), dataclasses.replace(b_rec(), sides_isolated=True)]) == "passed"
    assert status([a_rec(), b_rec()]) == "passed"


def test_status_reasons():
    assert status([]) == "correctness not checked"
    assert status([b_rec()]) == "method A not run"
    assert status([a_rec()]) == "method B not run on NVIDIA GeForce RTX 4090"
    assert status([a_rec(passed=False, step=1250), b_rec()]) == "method A failed at step 1250"
    assert status([a_rec(), b_rec(passed=False, step=150)]) == "method B failed at step 150"
    both = status([a_rec(passed=False, step=1250), b_rec(passed=False, step=0)])
    assert both == "method A failed at step 1250; method B failed at step 0"


def test_one_seed_a_side_gives_no_method_a():
    one = a_rec(card=R3090, seeds=1, passed=None)
    assert status([one, b_rec(card=R3090)], card=R3090) == "method A not run"


def test_method_b_belongs_to_its_own_card():
    records = [a_rec(), b_rec(card=R4090), a_rec(card=L4, seeds=1, passed=None)]
    assert status(records, card=L4) == "method B not run on NVIDIA L4"
    assert status([*records, b_rec(card=L4)], card=L4) == "passed"


def test_other_cards_need_their_one_seed_a_side():
    # amendment 7.3: on the RTX 3090 Ti and the L4, that card's one seed a side is published
    records = [a_rec(), b_rec(card=R3090)]
    assert (
        status(records, card=R3090)
        == "method A's one seed a side not run on NVIDIA GeForce RTX 3090 Ti"
    )
    records.append(a_rec(card=R3090, seeds=1, passed=None))
    assert status(records, card=R3090) == "passed"


def test_method_a_is_per_precision_and_method_b_per_model():
    records = [a_rec(precision="float32"), b_rec()]
    assert status(records, precision="bfloat16") == "method A not run"
    assert status(records, precision="float32") == "passed"
    assert (
        status([a_rec(), b_rec(model="gpt2-medium")])
        == "method B not run on NVIDIA GeForce RTX 4090"
    )


def test_the_latest_record_counts():
    assert status([a_rec(passed=False, step=1000), a_rec(), b_rec()]) == "passed"
    assert status([a_rec(), b_rec(), b_rec(passed=False, step=12)]) == "method B failed at step 12"


def test_statuses_feed_the_comparison_table():
    m = checks.check_statuses(R4090, ["gpt2-small"], ["float32", "bfloat16"], [a_rec(), b_rec()])
    assert m == {"gpt2-small/float32": "method A not run", "gpt2-small/bfloat16": "passed"}


def test_records_round_trip(tmp_path: Path):
    ra = checks.record_method_a(
        methods.method_a(family(), family()),
        R4090,
        "shakespeare-char",
        "float32",
        contender_build="mica",
        logs="a/",
    )
    p = with_loss(train_curve(), s150=3.0)
    rb = checks.record_method_b(
        methods.method_b_for(load(), "gpt2-medium", p, with_loss(p, s150=3.036)),
        R4090,
        "gpt2-medium",
        logs="b/",
    )
    checks.append_check(tmp_path, ra)
    checks.append_check(tmp_path, rb)
    back = checks.load_checks(tmp_path)
    assert back == [ra, rb]
    assert rb.window == (1, 100) and rb.beside_window == (1, 200)
    assert rb.passed is True and rb.beside_passed is False and "step 150" in rb.beside_reason
    first = json.loads((tmp_path / checks.CHECKS_FILE).read_text().splitlines()[0])
    assert (
        first["schema_version"] == checks.CHECKS_SCHEMA
        and first["method"] == "A"
        and first["seeds_per_side"] == 5
    )


def test_load_checks_without_a_file(tmp_path: Path):
    assert checks.load_checks(tmp_path) == []


def test_load_checks_refuses_a_newer_schema(tmp_path: Path):
    line = json.loads(b_rec().to_json())
    line["schema_version"] = checks.CHECKS_SCHEMA + 1
    (tmp_path / checks.CHECKS_FILE).write_text(json.dumps(line) + "\n")
    newer, mine = checks.CHECKS_SCHEMA + 1, checks.CHECKS_SCHEMA
    with pytest.raises(
        UserError, match=rf"checks.jsonl:1 has check schema {newer}; this kit reads schema {mine}"
    ):
        checks.load_checks(tmp_path)


def test_load_checks_damaged(tmp_path: Path):
    path = tmp_path / checks.CHECKS_FILE
    good = b_rec().to_json()
    path.write_text(good + "\n" + good[:20])  # a torn last line is not a record
    assert checks.load_checks(tmp_path) == [b_rec()]
    path.write_text("{not json\n")
    with pytest.raises(UserError, match="checks.jsonl:1 is not a JSON record"):
        checks.load_checks(tmp_path)
    path.write_text(json.dumps({**json.loads(good), "colour": "red"}) + "\n")
    with pytest.raises(UserError, match="unknown key colour"):
        checks.load_checks(tmp_path)


# -- the products directory (amendments 4.3, 7.4) --------------------------------------------


def series_dir(root: Path, card: str) -> Path:
    root.mkdir(parents=True)
    (root / store.MANIFEST).write_text(
        json.dumps({"schema": store.SCHEMA, "series": {"card": card}})
    )
    return root


def test_products_dir_of_this_card(tmp_path: Path):
    d = series_dir(tmp_path / "l4-series", L4)
    assert checks.check_products_dir(d, L4) == d


def test_products_dir_from_another_card(tmp_path: Path):
    d = series_dir(tmp_path / "4090-series", R4090)
    with pytest.raises(
        UserError,
        match="is the results directory of a series on 'NVIDIA GeForce RTX 4090', not on this card, 'NVIDIA L4'",
    ) as e:
        checks.check_products_dir(d, L4)
    assert "this card's own series" in str(e.value.fix)


def test_products_dir_that_is_no_results_dir(tmp_path: Path):
    with pytest.raises(UserError, match="is not a results directory"):
        checks.check_products_dir(tmp_path, L4)
    (tmp_path / store.MANIFEST).write_text(json.dumps({"schema": store.SCHEMA, "series": {}}))
    with pytest.raises(UserError, match="records no card"):
        checks.check_products_dir(tmp_path, L4)


# -- plots ------------------------------------------------------------------------------------


def test_plots_are_png_and_deterministic(tmp_path: Path):
    from kit.correctness import plots

    r = methods.method_a(family(), family(shift=0.003))
    a1 = plots.plot_method_a(r, tmp_path / "a1.png", title="M1 float32")
    a2 = plots.plot_method_a(r, tmp_path / "a2.png", title="M1 float32")
    assert a1.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert a1.read_bytes() == a2.read_bytes()
    assert b"Software" not in a1.read_bytes()
    p = with_loss(train_curve(), s150=3.0)
    b1 = plots.plot_method_b(
        p, with_loss(p, s150=3.036), (1, 100), tmp_path / "b1.png", also_window=(1, 200)
    )
    b2 = plots.plot_method_b(
        p, with_loss(p, s150=3.036), (1, 100), tmp_path / "b2.png", also_window=(1, 200)
    )
    assert b1.read_bytes() == b2.read_bytes()


# -- amendments 4.2, 7.1 and 7.3 read from the protocol file ---------------------------------

SEEDS = load().correctness.seeds


def gate(records, card=R4090, build="mica-half-intermediates", precision="bfloat16"):
    c_ = load().correctness
    return checks.check_verdict(
        "gpt2-small",
        precision,
        card,
        records,
        build=build,
        seeds=c_.seeds,
        five_seed_card=c_.five_seed_card,
    )[0]


def five(card=R4090, seeds=tuple(SEEDS), build="mica-half-intermediates", passed=True):
    rec = a_rec(card=card, seeds=len(seeds), passed=passed)
    return dataclasses.replace(rec, seeds=tuple(seeds), contender_build=build)


def test_the_protocol_names_the_five_seed_card_and_its_seeds():
    c_ = load().correctness
    assert c_.five_seed_card == R4090 and c_.seeds == [1337, 1338, 1339, 1340, 1341]


def test_a_secondary_build_does_not_inherit_the_primary_builds_check():
    records = [five(), b_rec()]
    assert gate(records) == "passed"
    assert gate(records, build="mica-strict") == "method A not run"
    assert gate([*records, five(build="mica-strict")], build="mica-strict") == "passed"


def test_method_a_families_must_be_the_five_seed_cards():
    # amendment 7.3: five seeds a side on the L4 stand for nothing; the 4090's stand for all
    on_l4 = [five(card=L4), b_rec(card=L4)]
    assert gate(on_l4, card=L4) == (
        "method A's five seeds a side ran on NVIDIA L4, not on NVIDIA GeForce RTX 4090 "
        "(amendment 7.3)"
    )
    one = dataclasses.replace(five(card=L4, seeds=(1337,)), passed=None)
    assert gate([five(), one, b_rec(card=L4)], card=L4) == "passed"


def test_method_a_must_run_the_protocols_seeds():
    other = [five(seeds=(1, 2, 3, 4, 5)), b_rec()]
    assert gate(other) == (
        "method A ran the seeds 1, 2, 3, 4, 5, not the protocol's 1337, 1338, 1339, 1340, "
        "1341 (§7 A)"
    )
    unrecorded = [dataclasses.replace(five(), seeds=()), b_rec()]
    assert "(not recorded)" in gate(unrecorded)
    # amendment 7.1: the other cards' one seed a side is the seed 1337
    wrong_one = dataclasses.replace(five(card=L4, seeds=(1338,)), passed=None)
    assert gate([five(), wrong_one, b_rec(card=L4)], card=L4) == (
        "method A's one seed a side (seed 1337) not run on NVIDIA L4"
    )


def test_statuses_are_per_build_when_builds_are_given():
    m = checks.check_statuses(
        R4090,
        ["gpt2-small"],
        ["bfloat16"],
        [five(), b_rec()],
        builds={"bfloat16": ["mica-half-intermediates", "mica-strict"]},
        seeds=SEEDS,
        five_seed_card=R4090,
    )
    assert m == {
        "gpt2-small/bfloat16/mica-half-intermediates": "passed",
        "gpt2-small/bfloat16/mica-strict": "method A not run",
    }


def test_seeds_round_trip(tmp_path: Path):
    checks.append_check(tmp_path, five())
    assert checks.load_checks(tmp_path)[0].seeds == tuple(SEEDS)


# -- a check names the program it ran (rule 6 gates only that program's series) -------------

MINE, OTHER = "a" * 64, "b" * 64


def ran(record, sha=MINE):
    return dataclasses.replace(record, contender_sha256=sha)


def bound(records, card=R4090, precision="bfloat16"):
    return checks.check_verdict("gpt2-small", precision, card, records, program_sha256=MINE)


def test_a_check_of_another_program_gates_nothing():
    assert bound([ran(a_rec()), ran(b_rec())]) == ("passed", [ran(a_rec()), ran(b_rec())])
    # the same build name and card, another program: not this series' check
    status, used = bound([ran(a_rec(), OTHER), ran(b_rec(), OTHER)])
    assert status == f"the check ran another program (sha256 {OTHER[:12]}…)" and used == []
    assert bound([ran(a_rec()), ran(b_rec(), OTHER)])[0] == (
        f"method B on {R4090}: the check ran another program (sha256 {OTHER[:12]}…)"
    )
    assert bound([ran(a_rec(), OTHER), ran(b_rec())])[0] == (
        f"method A: the check ran another program (sha256 {OTHER[:12]}…)"
    )
    # a passing check of another program does not hide a later one of this program's
    assert bound([ran(a_rec()), ran(b_rec()), ran(b_rec(passed=False, step=3), OTHER)])[0] == (
        "passed"
    )


def test_method_b_holds_for_every_precision_of_the_same_program():
    records = [ran(a_rec(precision="float32")), ran(a_rec()), ran(b_rec())]
    assert bound(records, precision="float32")[0] == "passed"
    assert bound(records, precision="bfloat16")[0] == "passed"


def test_the_withheld_speed_says_the_check_ran_another_program():
    from kit.report import states

    status = bound([ran(a_rec(), OTHER), ran(b_rec(), OTHER)])[0]
    assert states.publication(status, preview=False) == (
        f"withheld: the check ran another program (sha256 {OTHER[:12]}…)"
    )
    assert states.publication(checks.NO_SERIES_PROGRAM, preview=False).startswith("withheld: ")


def test_a_record_of_schema_1_is_read_and_never_gates(tmp_path: Path):
    old = {
        k: v
        for k, v in json.loads(b_rec().to_json()).items()
        if "contender_" not in k and k != "schema_version"
    }
    lines = [
        json.dumps({**old, "schema": 1}),
        json.dumps(
            {**old, "schema": 1, "method": "A", "precision": "bfloat16", "seeds_per_side": 5}
        ),
    ]
    (tmp_path / checks.CHECKS_FILE).write_text("\n".join(lines) + "\n")
    read = checks.load_checks(tmp_path)
    assert [r.method for r in read] == ["B", "A"] and {r.contender_sha256 for r in read} == {""}
    assert bound(read) == (
        "the check names no program (a record of an older kit): run the check again",
        [],
    )
    # without a program to ask for (a smoke check on the CPU, as before), it is read as it was
    assert checks.check_verdict("gpt2-small", "bfloat16", R4090, read)[0] == "passed"


def test_a_check_records_its_program_and_under_docker_its_image(tmp_path: Path):
    from kit.correctness import check_verdict

    rd = store.ResultsDir(tmp_path)
    rd.write_json(
        store.VERSIONS, {"contender": {"program_sha256": MINE, "identity": f"sha256:{MINE}"}}
    )
    assert check_verdict.identity(rd) == {"contender_sha256": MINE, "contender_image_id": ""}
    image = "sha256:" + "c" * 64  # the measured image's id (kit.sides.side)
    rd.write_json(store.VERSIONS, {"contender": {"program_sha256": MINE, "identity": image}})
    assert check_verdict.identity(rd) == {"contender_sha256": MINE, "contender_image_id": image}

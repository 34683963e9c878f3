"""Rule 6's way out: which checks a status waits for, and the commands that make them."""

from __future__ import annotations

import shlex

from kit.report import next_steps, states
from kit.results.run_options import SeriesOptions

CARD_4090 = "NVIDIA GeForce RTX 4090"


def context(card: str, smoke: bool = False) -> next_steps.Context:
    options = SeriesOptions(
        protocol="/p.toml", out="/r/L4", smoke=smoke, device="cuda", models=("gpt2-small",),
        precisions=("float32",), sides=("pytorch", "contender"), contender="/r/mica",
        nanogpt="/n", data_dir="/r/L4/work/data", input="/i/input.txt",
    )  # fmt: skip
    return next_steps.Context(
        series="results/L4", card=card, smoke=smoke, options=options, protocol_file=None,
        five_seed_card=CARD_4090, seeds=(1337, 1338), where=lambda p: f"/host{p}",
    )  # fmt: skip


def test_a_status_names_the_checks_it_waits_for():
    every = {states.METHOD_A, states.METHOD_B}
    assert states.missing_methods("correctness not checked") == every
    assert states.missing_methods("the check ran another program (sha256 abc…)") == every
    assert states.missing_methods("passed") == frozenset()
    assert states.missing_methods("method B not run on NVIDIA L4") == {states.METHOD_B}
    one_seed = "method A's one seed a side (seed 1337) not run on NVIDIA L4"
    assert states.missing_methods(f"{one_seed}; method B not run on NVIDIA L4") == {
        states.METHOD_A_ONE_SEED, states.METHOD_B,
    }  # fmt: skip
    assert states.missing_methods("method A failed at step 1250") == frozenset()


def test_each_check_has_its_command_with_the_series_options():
    # on the five-seed card: method A's five seeds and method B, both on this card
    (a, b) = next_steps.needed(
        context(CARD_4090), "gpt2-small", "float32", "correctness not checked"
    )
    argv = shlex.split(a.command)
    assert argv[:6] == ["micakit", "correctness", "--method", "A", "--model", "gpt2-small"]
    assert argv[argv.index("--products") + 1] == "results/L4"
    assert argv[argv.index("--contender") + 1] == "/host/r/mica"  # as the user's shell sees it
    assert argv[argv.index("--nanogpt") + 1] == "/host/n" and "--device" not in argv
    assert argv[argv.index("--out") + 1] == a.out == "results/L4-check-gpt2-small-float32-A"
    assert "--precision" not in b.command
    assert b.out == "results/L4-check-gpt2-small-B-nvidia-geforce-rtx-4090"
    # on another card (7.3): method A's five seeds on the 4090, its one seed here, then B
    found = next_steps.needed(
        context("NVIDIA L4"), "gpt2-small", "float32", "correctness not checked"
    )
    assert [n.what.split(" (")[0] for n in found] == [
        f"method A, five seeds a side, on the {CARD_4090}",
        "method A's one seed a side",
        "method B on NVIDIA L4",
    ]
    assert "--seeds 1337 " in found[1].command and "--products results/L4 " in found[1].command
    assert "--products RESULTS/" in found[0].command
    # only what is missing
    (only_b,) = next_steps.needed(
        context("NVIDIA L4"), "gpt2-small", "float32", "method B not run on NVIDIA L4"
    )
    assert "--method B" in only_b.command
    # a smoke check says so
    (smoke_a, _) = next_steps.needed(
        context("cpu", smoke=True), "gpt2-small", "float32", "correctness not checked"
    )
    assert "--smoke --device cuda " in smoke_a.command

"""`micakit correctness` (§7): methods A and B end to end with the fake sides, resumed, refused."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from kit.cli.correctness import correctness as correctness_cmd
from kit.cli.correctness import parse_seeds
from kit.cli.group import KitGroup
from kit.correctness import check_plan, checks, curves, gate, nanogpt_config
from kit.errors import UserError
from kit.protocol.load import load
from kit.results import store
from tests.conftest import (
    CONTENDER,
    FAKE_NANOGPT,
    REAL_INPUT,
    ROOT,
    STEADY_STEP_MS,
    TEXT_INPUT,
    flat,
    needs_real_input,
    write_protocol,
)

STAND_IN_MODEL = ROOT / "tests" / "fixtures" / "correctness" / "nanogpt" / "model.py"
NANOGPT_FILES = ["train.py", "model.py", "configurator.py", "config/train_shakespeare_char.py"]
SEEDS = [1337, 1338, 1339, 1340, 1341]


@click.group(cls=KitGroup)
def kit_main() -> None:
    """The command as `kit.cli.main.main` carries it: user errors mapped to exit codes."""


kit_main.add_command(correctness_cmd)


def invoke(*args: object):
    return CliRunner().invoke(kit_main, [str(a) for a in args], catch_exceptions=False)


def nanogpt_tree(
    tmp: Path, model: Path | None = None, changes: dict[str, object] | None = None
) -> tuple[Path, Path]:
    """The fake nanoGPT (with a stand-in model.py that builds weights, for method B) and a
    protocol pinning its files' hashes, as the kit checks and patches the real one."""
    tree = tmp / "nanogpt-src"
    shutil.copytree(FAKE_NANOGPT, tree)
    if model:
        shutil.copyfile(model, tree / "model.py")
    files = {f: hashlib.sha256((tree / f).read_bytes()).hexdigest() for f in NANOGPT_FILES}
    pinned = {"nanogpt.files": files, "nanogpt.patch": str(tree / "train.patch")}
    protocol = write_protocol(tmp / "protocol.toml", changes={**(changes or {}), **pinned})
    return tree, protocol


def check_args(out: Path, protocol: Path, tree: Path, method: str, *extra: object) -> list:
    return [
        "correctness", "--method", method, "--smoke", "--device", "cpu", "--executor", "local",
        "--model", "shakespeare-char", "--protocol", protocol, "--contender", CONTENDER,
        "--nanogpt", tree,
        "--input", TEXT_INPUT, "--out", out, *extra,
    ]  # fmt: skip


def records(out: Path) -> list[dict]:
    return [flat(json.loads(x)) for x in (out / "runs.jsonl").read_text().splitlines()]


def argv_of(out: Path, record: dict) -> list[str]:
    return json.loads((out / record["log_dir"] / "command.json").read_text())["argv"]


def stdout_of(out: Path, record: dict) -> list[str]:
    return curves.read_log_lines(out / record["log_dir"] / "stdout.log")


@pytest.fixture
def fakes(fake_env):
    def set_fake(**cfg) -> dict:
        return fake_env(step_ms=STEADY_STEP_MS, **cfg)

    return set_fake


# -- method A ----------------------------------------------------------------------------------


@pytest.mark.slow  # runs a whole check: more than a few seconds
def test_method_a_smoke_five_seeds_a_side_passes(tmp_path: Path, fakes):
    fakes()
    tree, protocol = nanogpt_tree(tmp_path)
    out = tmp_path / "a"
    result = invoke(*check_args(out, protocol, tree, "A"))
    assert result.exit_code == 0, result.output
    assert "method A, shakespeare-char, float32, cpu: passed" in result.output
    recs = records(out)
    assert [(r["side"], r["seed"]) for r in recs] == [
        (side, seed) for seed in SEEDS for side in ("pytorch", "contender")
    ]
    assert all(r["status"] == "ok" and r["files"] for r in recs)
    for r in recs:
        argv, lines = argv_of(out, r), stdout_of(out, r)
        if r["side"] == "pytorch":
            # §4's seed variable: the patched tree, at the protocol's mode
            assert "tree: patched" in lines
            for flag in (
                f"--seed={r['seed']}",
                "--max_iters=200",
                "--eval_interval=50",
                "--eval_iters=5",
                "--compile_mode=default",
                "--dtype=float32",
            ):
                assert flag in argv
        else:
            joined = " ".join(argv)
            assert f"--seed {r['seed']} --steps 200" in joined
            assert "--eval-interval 50 --eval-iters 5" in joined
    (check,) = checks.load_checks(out)
    assert (check.method, check.card, check.model, check.precision) == (
        "A",
        "cpu",
        "shakespeare-char",
        "float32",
    )
    assert check.passed is True and check.seeds_per_side == 5 and check.contender_build == "mica"
    assert (out / "method_a.png").stat().st_size > 10_000
    table = (out / "tables" / "method_a.csv").read_text()
    assert table.splitlines()[0].startswith("schema_version,step,judged,pytorch_median")
    md = (out / "correctness.md").read_text()
    assert "| verdict | **passed** |" in md
    assert "Final losses at step 200: median and range" in md
    assert "these ran on cpu" in md  # §7 A names the RTX 4090 for the families
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "correctness" and manifest["check"]["seeds"] == SEEDS

    # judged again on resume: nothing runs, nothing is appended twice
    again = invoke("correctness", "--resume", out)
    assert again.exit_code == 0, again.output
    assert "10 runs planned, 10 already done" in again.output and len(records(out)) == 10
    assert len(checks.load_checks(out)) == 1


@pytest.mark.slow  # runs a whole check: more than a few seconds
def test_method_a_contender_offset_fails_at_the_first_judged_step(tmp_path: Path, fakes):
    fakes(offset={"mica": [0, 0.5]})  # the contender's every loss half a nat higher
    tree, protocol = nanogpt_tree(tmp_path)
    out = tmp_path / "a"
    result = invoke(*check_args(out, protocol, tree, "A"))
    assert result.exit_code == 0, result.output  # the check ran; its verdict failed
    assert "failed (method A failed at step 100" in result.output
    (check,) = checks.load_checks(out)
    assert check.passed is False and check.first_failing_step == 100
    md = (out / "correctness.md").read_text()
    assert "**failed**: method A failed at step 100" in md
    assert "| 100 | yes |" in md and "**no** |" in md


@pytest.mark.slow  # runs a whole check: more than a few seconds
def test_curves_with_different_evaluation_steps_are_refused(tmp_path: Path, fakes):
    fakes()
    # a contender that evaluates every 40 steps where nanoGPT evaluates every 50
    wrong = ["--eval-interval", "40", "--eval-iters", "{eval_iters}"]
    tree, protocol = nanogpt_tree(tmp_path, changes={"correctness.eval_args": wrong})
    out = tmp_path / "a"
    result = invoke(*check_args(out, protocol, tree, "A", "--seeds", "1337,1338"))
    assert result.exit_code == 2, result.output
    assert "method A: contender seed 1337 has different evaluation steps" in result.output
    assert not (out / "checks.jsonl").exists()


@pytest.mark.slow  # runs a whole check: more than a few seconds
def test_one_seed_a_side_is_read_not_judged(tmp_path: Path, fakes):
    fakes()
    tree, protocol = nanogpt_tree(tmp_path)
    out = tmp_path / "a1"
    result = invoke(*check_args(out, protocol, tree, "A", "--seeds", "1337"))
    assert result.exit_code == 0, result.output
    assert "read, not judged" in result.output
    (check,) = checks.load_checks(out)
    assert check.passed is None and check.seeds_per_side == 1
    assert "amendment 7.1" in (out / "correctness.md").read_text()


@pytest.mark.slow  # runs a whole check: more than a few seconds
def test_resume_after_a_crash_runs_only_the_unfinished_run(tmp_path: Path, fakes):
    fakes(events={"mica#2": "crash"})  # the contender's second run dies halfway
    tree, protocol = nanogpt_tree(tmp_path)
    out = tmp_path / "a"
    result = invoke(*check_args(out, protocol, tree, "A", "--seeds", "1337-1339"))
    assert result.exit_code == 3, result.output
    assert "run 3 (contender seed 1338, 200 steps) failed" in result.output
    assert f"micakit correctness --resume {out}" in result.output
    assert [r["status"] for r in records(out)] == ["ok", "ok", "ok", "failed"]
    assert not (out / "checks.jsonl").exists()

    result = invoke("correctness", "--resume", out)
    assert result.exit_code == 0, result.output
    recs = records(out)
    ok = [r["run_id"] for r in recs if r["status"] == "ok"]
    assert sorted(ok) == list(range(6)) and len(ok) == len(set(ok))  # none ran twice
    assert sorted(p.name for p in (out / "runs" / "0003-contender.seed1338").iterdir()) == [
        "attempt-1",
        "attempt-2",
    ]  # the failed attempt stays beside the one that finished
    assert checks.load_checks(out)[-1].passed is True


@pytest.mark.slow  # runs a whole check: more than a few seconds
def test_a_run_killed_without_a_record_runs_again(tmp_path: Path, fakes):
    fakes()
    tree, protocol = nanogpt_tree(tmp_path)
    out = tmp_path / "a"
    assert invoke(*check_args(out, protocol, tree, "A", "--seeds", "1337,1338")).exit_code == 0
    # as after kill -9 during the last run: its record was never written
    lines = (out / "runs.jsonl").read_text().splitlines()
    (out / "runs.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:40])
    (out / "checks.jsonl").unlink()
    result = invoke("correctness", "--resume", out)
    assert result.exit_code == 0, result.output
    assert "4 runs planned, 3 already done" in result.output
    assert [r["run_id"] for r in records(out)] == [0, 1, 2, 3]


CHECK_MAIN = """
import sys
from kit.cli.group import KitGroup
from kit.cli.correctness import correctness
main = KitGroup("micakit")
main.add_command(correctness)
main(sys.argv[1:])
"""


@pytest.mark.slow
def test_resume_after_kill_9_of_the_whole_check(tmp_path: Path, fakes):
    cfg = fakes()
    cfg["step_ms"] = {"*": 3.0}  # a run of 200 steps lasts 0.6 s: the kill lands inside one
    tree, protocol = nanogpt_tree(tmp_path)
    out = tmp_path / "a"
    env = {**os.environ, "MICAKIT_FAKE": json.dumps(cfg)}
    args = [str(a) for a in check_args(out, protocol, tree, "A", "--seeds", "1337-1339")]
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHECK_MAIN, *args],
            cwd=ROOT,
            env=env,
            stdout=err,
            stderr=err,
            start_new_session=True,  # a signal for the check alone
        )
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if (out / "runs.jsonl").exists() and len(records(out)) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, log.read_text()
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGKILL)  # the check, its reader and its program, mid-run
        proc.wait()
    before = records(out)
    assert 2 <= len(before) < 6 and all(r["status"] == "ok" for r in before)
    result = invoke("correctness", "--resume", out)
    assert result.exit_code == 0, result.output
    recs = records(out)
    assert recs[: len(before)] == before  # finished runs kept, none ran again
    assert [r["run_id"] for r in recs] == list(range(6))
    assert checks.load_checks(out)[-1].passed is True


# -- method B ----------------------------------------------------------------------------------


def series_dir(tmp: Path, card: str, protocol: Path, products: bool = True, **series) -> Path:
    """A results directory as `micakit series` leaves it, as far as a check reads it."""
    root = tmp / f"series-{card.replace(' ', '_')}"
    (root / "work" / "products").mkdir(parents=True)
    if products:
        slug = "shakespeare-char.float32.contender.mica"
        (root / "work" / "products" / f"{slug}.products").write_text("gemm 0 chosen-on-card\n")
    sha = store.sha256_file(protocol)
    (root / store.PROTOCOL).write_bytes(protocol.read_bytes())  # a series keeps its protocol
    manifest = {"schema": store.SCHEMA, "kit_version": "0.1.0", "protocol_sha256": sha,
                "series": {"card": card, **series}}  # fmt: skip
    store.write_json(root / store.MANIFEST, manifest)
    # the program it measured (rule 4): a check gates only a series of its own program
    contender = {"program_sha256": store.sha256_file(CONTENDER)}
    store.write_json(root / store.VERSIONS, {"schema": store.SCHEMA, "contender": contender})
    return root


@pytest.mark.slow  # runs a whole check: more than a few seconds
def test_method_b_shared_start_passes(tmp_path: Path, fakes):
    fakes()
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    products = series_dir(tmp_path, "cpu", protocol)
    out = tmp_path / "b"
    result = invoke(*check_args(out, protocol, tree, "B", "--products", products))
    assert result.exit_code == 0, result.output
    assert "method B, shakespeare-char, float32, cpu: passed" in result.output
    shared = out / "shared_start"
    for name in ("ckpt.pt", "init.safetensors", "batch_order.npy", "request.json"):
        assert (shared / name).is_file()
    made, torch_run, contender_run = records(out)
    assert made["kind"] == "shared-start" and set(made["outputs"]) >= {
        "shared_start/ckpt.pt",
        "shared_start/init.safetensors",
        "shared_start/batch_order.npy",
    }
    argv = argv_of(out, torch_run)
    for flag in (
        "--init_from=resume",
        f"--batch_order={shared}/batch_order.npy",
        "--allow_tf32=False",
        "--dropout=0.0",
        "--dtype=float32",
        "--log_interval=1",
        "--max_iters=20",
        "--compile=False",
        "--eval_iters=1",
    ):
        assert flag in argv
    out_dir = next(a for a in argv if a.startswith("--out_dir=")).split("=", 1)[1]
    assert Path(out_dir).parent == out / "work" / "method_b"
    assert not Path(out_dir).exists()  # the fresh copy of ckpt.pt is gone after the run
    joined = " ".join(argv_of(out, contender_run))
    assert f"--init {shared}/init.safetensors --batches {shared}/batch_order.npy" in joined
    assert "--log-interval 1" in joined
    # amendment 4.3: the contender read its series' products record, copied into the check
    copy = out / "work" / "products" / "shakespeare-char.float32.contender.mica.products"
    assert copy.read_text() == "gemm 0 chosen-on-card\n"
    # every digit: nanoGPT's .4f could not judge step 0 within 1e-5
    assert re.search(r"^iter 0: loss \d\.\d{10}, ", "\n".join(stdout_of(out, torch_run)), re.M)
    (check,) = checks.load_checks(out)
    assert check.method == "B" and check.passed is True and check.window == (1, 20)
    assert check.precision == "float32" and check.beside_window is None
    md = (out / "correctness.md").read_text()
    assert "| verdict | **passed** (step 0 and steps 1 to 20) |" in md
    assert (out / "method_b.png").is_file() and (out / "tables" / "method_b.csv").is_file()


@pytest.mark.slow  # runs a whole check: more than a few seconds
def test_a_batch_its_series_halved_is_the_checks_batch(tmp_path: Path, fakes):
    fakes()
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    products = series_dir(tmp_path, "cpu", protocol)
    store.write_json(products / "adjustments.json", {"shakespeare-char": {"batch_size": 4}})
    out = tmp_path / "b"
    result = invoke(*check_args(out, protocol, tree, "B", "--products", products))
    assert result.exit_code == 0, result.output
    _, torch_run, contender_run = records(out)
    assert "--batch_size=4" in argv_of(out, torch_run)  # amendment 5.1, for both sides
    assert "--batch-size 4" in " ".join(argv_of(out, contender_run))
    assert np.load(out / "shared_start" / "batch_order.npy").shape[1] == 4
    assert checks.load_checks(out)[0].passed is True


@pytest.mark.slow  # runs a whole check: more than a few seconds
def test_method_b_contender_apart_fails_at_its_step(tmp_path: Path, fakes):
    fakes(offset={"mica": [7, 0.2]})
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    out = tmp_path / "b"
    result = invoke(*check_args(out, protocol, tree, "B"))
    assert result.exit_code == 0, result.output
    (check,) = checks.load_checks(out)
    assert check.passed is False and check.first_failing_step == 7
    assert "method B failed at step 7 (window 1 to 20)" in check.reason


def test_method_b_gpt2_medium_window_scaled_with_the_verdict_beside():
    p = load()
    spec = check_plan.CheckSpec(
        method="B",
        model="gpt2-medium",
        precision="float32",
        seeds=(1337,),
        card="cpu",
        device="cpu",
        smoke=True,
        contender_build="mica",
        pytorch_mode="eager",
        steps=20,
        eval_interval=50,
        eval_iters=5,
        from_step=100,
    )
    # amendment 6: steps 1 to 100 judge, §7 B's 200 steps stand beside; a smoke check scales both
    assert check_plan.method_b_windows(p, spec) == ((1, 10), (1, 20))
    full = dataclasses.replace(spec, steps=200, smoke=False)
    assert check_plan.method_b_windows(p, full) == ((1, 100), (1, 200))
    small = dataclasses.replace(full, model="gpt2-small")
    assert check_plan.method_b_windows(p, small) == ((1, 200), None)


@pytest.mark.slow  # runs a whole check: more than a few seconds
def test_init_weights_of_the_wrong_shape_are_refused(tmp_path: Path, fakes):
    from safetensors.numpy import save_file

    fakes(events={"mica#1": "crash"})  # stop after the shared start and nanoGPT's run
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    out = tmp_path / "b"
    assert invoke(*check_args(out, protocol, tree, "B")).exit_code == 3
    init = out / "shared_start" / "init.safetensors"
    from safetensors.numpy import load_file

    weights = load_file(str(init))
    weights["transformer.wpe.weight"] = np.zeros((32, 64), dtype=np.float32)
    save_file(weights, str(init))
    result = invoke("correctness", "--resume", out)
    assert result.exit_code == 2, result.output
    assert "tensor transformer.wpe.weight has shape (32, 64), expected (64, 64)" in result.output


@pytest.mark.slow  # runs a whole check: more than a few seconds
def test_a_shared_start_changed_after_it_was_made_is_refused(tmp_path: Path, fakes):
    fakes(events={"mica#1": "crash"})
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    out = tmp_path / "b"
    first = invoke(*check_args(out, protocol, tree, "B"))
    assert first.exit_code == 3, first.output
    order = np.load(out / "shared_start" / "batch_order.npy")
    np.save(out / "shared_start" / "batch_order.npy", order[::-1].copy())
    result = invoke("correctness", "--resume", out)
    assert result.exit_code == 2
    assert "batch_order.npy changed since run 0 made it" in result.output


# -- bad input ---------------------------------------------------------------------------------


def test_seeds_are_read_rising_and_once_each():
    assert parse_seeds("1337-1341") == tuple(SEEDS)
    assert parse_seeds("1337,1338") == (1337, 1338)
    assert parse_seeds("1337, 1339-1340") == (1337, 1339, 1340)
    for bad, what in [
        ("1338,1337", "seed 1337 comes after 1338"),
        ("1337,1337", "seed 1337 is given twice"),
        ("1337-1339,1339", "seed 1339 is given twice"),
        ("1341-1337", "runs backwards"),
        ("x", "'x' is not a seed or a range"),
    ]:
        with pytest.raises(UserError, match=what):
            parse_seeds(bad)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--seeds", "1338,1337"], "seed 1337 comes after 1338"),
        (["--seeds", "1337,1337"], "seed 1337 is given twice"),
    ],
)
def test_bad_seeds_are_refused_before_anything_runs(tmp_path: Path, extra, message):
    tree, protocol = nanogpt_tree(tmp_path)
    out = tmp_path / "a"
    result = invoke(*check_args(out, protocol, tree, "A", *extra))
    assert result.exit_code == 2
    assert message in result.output and "fix: give the seeds rising" in result.output
    assert not out.exists()


def test_products_of_another_card_are_refused(tmp_path: Path):
    tree, protocol = nanogpt_tree(tmp_path)
    other = series_dir(tmp_path, "NVIDIA L4", protocol)
    result = invoke(*check_args(tmp_path / "a", protocol, tree, "A", "--products", other))
    assert result.exit_code == 2
    assert "a series on 'NVIDIA L4', not on this card, 'cpu'" in result.output
    lacking = series_dir(tmp_path, "cpu", protocol, products=False)
    result = invoke(*check_args(tmp_path / "a", protocol, tree, "A", "--products", lacking))
    assert result.exit_code == 2
    assert "holds no products record for shakespeare-char/float32/contender/mica" in result.output


def test_a_contender_other_than_its_series_is_refused(tmp_path: Path):
    tree, protocol = nanogpt_tree(tmp_path)
    series = series_dir(tmp_path, "cpu", protocol)
    store.write_json(series / "versions.json", {"contender": {"program_sha256": "ab" * 32}})
    result = invoke(*check_args(tmp_path / "a", protocol, tree, "A", "--products", series))
    assert result.exit_code == 2
    assert "is not the program the series" in result.output and "abababababab" in result.output


def test_other_bad_input(tmp_path: Path):
    tree, protocol = nanogpt_tree(tmp_path)
    a = check_args(tmp_path / "x", protocol, tree, "B", "--precision", "bfloat16")
    assert "method B runs in float32" in invoke(*a).output
    a = check_args(tmp_path / "x", protocol, tree, "B", "--seeds", "1337")
    assert "method B takes no --seeds" in invoke(*a).output
    full = [x for x in check_args(tmp_path / "x", protocol, tree, "A") if x != "--smoke"]
    assert "a check needs --products DIR" in invoke(*full).output
    series = series_dir(tmp_path, "cpu", protocol)
    result = invoke("correctness", "--resume", series)
    assert result.exit_code == 2 and "not a correctness check's results directory" in result.output
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").touch()
    result = invoke(*check_args(tmp_path / "taken", protocol, tree, "A"))
    assert result.exit_code == 2 and "micakit correctness --resume" in result.output


def test_nanogpt_config_reads_defaults_config_file_and_overrides(tmp_path: Path):
    (tmp_path / "train.py").write_text(
        "import torch\nbatch_size = 12\ngradient_accumulation_steps = 5 * 8\nbias = False\n"
        "dtype = 'bfloat16' if torch.cuda.is_available() else 'float16'\n"
        "config_keys = [k for k in globals()]\nafter = 1\n"
    )
    (tmp_path / "cfg.py").write_text("batch_size = 64\nn_layer = 6\n")
    cfg = nanogpt_config.nanogpt_config(tmp_path, ["cfg.py", "--gradient_accumulation_steps=1"])
    assert cfg == {"batch_size": 64, "gradient_accumulation_steps": 1, "bias": False, "n_layer": 6}
    with pytest.raises(UserError, match="no setting 'after'"):
        nanogpt_config.nanogpt_config(tmp_path, ["--after=2"])
    with pytest.raises(UserError, match="nanoGPT's bias is a bool"):
        nanogpt_config.nanogpt_config(tmp_path, ["--bias=1"])


# -- the verdict gate ------------------------------------------------------------------------


@pytest.mark.slow  # runs a whole check: more than a few seconds
def test_checks_for_series_gives_a_verdict_only_where_both_methods_passed(tmp_path: Path, fakes):
    fakes()
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    a, b = tmp_path / "a", tmp_path / "b"
    assert invoke(*check_args(a, protocol, tree, "A")).exit_code == 0
    series = series_dir(
        tmp_path, "cpu", protocol, smoke=True, models=["shakespeare-char"], precisions=["float32"]
    )
    key = "shakespeare-char/float32/mica"  # rule 6 is per build (amendment 4.2)
    assert gate.checks_for_series(series, []) == {key: "correctness not checked"}
    assert gate.checks_for_series(series, [a]) == {key: "method B not run on cpu"}
    assert invoke(*check_args(b, protocol, tree, "B")).exit_code == 0
    assert gate.checks_for_series(series, [a, b]) == {key: "passed"}
    l4 = series_dir(
        tmp_path,
        "NVIDIA L4",
        protocol,
        smoke=True,
        models=["shakespeare-char"],
        precisions=["float32"],
    )
    # amendment 7.3: the families stand for every card; method B and one seed a side do not
    assert gate.checks_for_series(l4, [a, b]) == {
        key: "method A's one seed a side not run on NVIDIA L4; method B not run on NVIDIA L4"
    }
    full = series_dir(tmp_path / "f", "cpu", protocol, models=["shakespeare-char"])
    with pytest.raises(UserError, match="is a smoke check, and the series is not alike"):
        gate.checks_for_series(full, [a])
    other = write_protocol(tmp_path / "other.toml", runs=4)
    elsewhere = series_dir(tmp_path / "o", "cpu", other, smoke=True)
    with pytest.raises(UserError, match="ran under another protocol file"):
        gate.checks_for_series(elsewhere, [a])
    with pytest.raises(UserError, match="not a correctness check's results directory"):
        gate.checks_for_series(series, [series])


def smoke_series(tmp_path: Path, cli, tree: Path, protocol: Path, contender: Path = CONTENDER):
    """A CPU smoke series of a nanoGPT tree and a contender, with the fakes as the caller set
    them, in tmp_path/series: (its folder, click's result)."""
    out = tmp_path / "series"
    made = cli(
        "series", "--out", out, "--protocol", protocol, "--smoke", "--device", "cpu",
        "--executor", "local", "--nanogpt", tree, "--input", TEXT_INPUT, "--contender",
        contender, "--model", "shakespeare-char", "--precision", "float32",
    )  # fmt: skip
    return out, made


def smoke_series_of_both_sides(tmp_path: Path, cli):
    """A CPU smoke series of the stand-in nanoGPT and the fake contender, with the fakes as the
    caller set them: (its folder, the nanoGPT tree, the protocol, click's result)."""
    tree, protocol = nanogpt_tree(tmp_path, STAND_IN_MODEL)
    series, made = smoke_series(tmp_path, cli, tree, protocol)
    assert made.exit_code == 0, made.output
    return series, tree, protocol, made


@pytest.mark.slow
def test_report_gives_a_verdict_only_where_the_checks_passed(tmp_path: Path, fakes, cli):
    import pandas as pd

    fakes()
    series, tree, protocol, _ = smoke_series_of_both_sides(tmp_path, cli)
    a, b = tmp_path / "a", tmp_path / "b"
    for out, method in ((a, "A"), (b, "B")):
        result = cli(*check_args(out, protocol, tree, method, "--products", series))
        assert result.exit_code == 0, result.output

    def verdicts(*checks: Path) -> set[str]:
        args = [x for c in checks for x in ("--checks", c)]
        assert cli("publish", series, *args).exit_code == 0
        return set(pd.read_csv(series / "tables" / "comparison.csv")["verdict"])

    assert verdicts(a) == {"no verdict: method B not run on cpu"}
    gated = verdicts(a, b)
    assert len(gated) == 1 and not next(iter(gated)).startswith("no verdict")
    assert cli("verify", series).exit_code == 0


# -- the real nanoGPT ----------------------------------------------------------------------------

NANOGPT = os.environ.get("MICAKIT_NANOGPT")

# A second implementation for the contender's place: nanoGPT's model trained in plain PyTorch
# from the files §7 B hands a contender (safetensors weights, .npy batch order), with M1's
# settings (config/train_shakespeare_char.py: lr 1e-3, warm-up 100, beta2 0.99, clip 1.0) and
# the smoke model. Its losses must meet nanoGPT's own through its resume path.
REPLAY = """#!{python}
import math, sys, time
sys.path.insert(0, {tree!r})
import numpy as np, torch
from safetensors.torch import load_file
from model import GPT, GPTConfig
a = dict(zip(sys.argv, sys.argv[1:]))
t0 = time.monotonic()
torch.manual_seed(0)
model = GPT(GPTConfig(n_layer=2, n_head=2, n_embd=64, block_size=64, bias=False,
                      vocab_size=65, dropout=0.0))
model.load_state_dict(load_file(a["--init"]))
opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
order = np.load(a["--batches"])
data = np.memmap(a["--data"] + "/train.bin", dtype=np.uint16, mode="r")
def lr(it):
    if it < 100:
        return 1e-3 * (it + 1) / 101
    ratio = (it - 100) / (5000 - 100)
    return 1e-4 + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (1e-3 - 1e-4)
for step in range(int(a["--steps"]) + 1):
    ix = order[step]
    x = torch.stack([torch.from_numpy(data[i:i + 64].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 65].astype(np.int64)) for i in ix])
    for g in opt.param_groups:
        g["lr"] = lr(step)
    _, loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(f"step {{step}} loss {{loss.item()!r}} time_ms {{(time.monotonic() - t0) * 1e3:.3f}}",
          flush=True)
"""


@pytest.mark.nanogpt
@pytest.mark.slow
@pytest.mark.skipif(not NANOGPT, reason="MICAKIT_NANOGPT names no nanoGPT checkout")
@needs_real_input
def test_real_nanogpt_method_b_smoke(tmp_path: Path):
    replay = tmp_path / "replay.py"
    replay.write_text(REPLAY.format(python=sys.executable, tree=str(NANOGPT)))
    replay.chmod(0o755)
    out = tmp_path / "b"
    result = invoke(
        "correctness", "--method", "B", "--smoke", "--device", "cpu", "--executor", "local",
        "--contender", replay, "--nanogpt", NANOGPT, "--input", REAL_INPUT, "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (check,) = checks.load_checks(out)
    assert check.passed is True, check.reason
    rows = (out / "tables" / "method_b.csv").read_text().splitlines()
    step0 = rows[1].split(",")
    assert rows[0].startswith("schema_version,") and step0[0] == "1"
    assert float(step0[4]) <= 1e-5  # §7 B's step-0 rule, judged on every digit
    torch_run = records(out)[1]
    assert re.search(
        r"^iter 20: loss \d\.\d{10}, time ", "\n".join(stdout_of(out, torch_run)), re.M
    )
    # with the batch-order switch off, the patched train.py prints nanoGPT's own .4f
    run = subprocess.run(
        [
            sys.executable,
            "-u",
            "train.py",
            "config/train_shakespeare_char.py",
            "--device=cpu",
            "--compile=False",
            "--max_iters=1",
            "--eval_iters=1",
            "--log_interval=1",
            "--n_layer=1",
            "--n_head=2",
            "--n_embd=32",
            "--block_size=32",
            "--batch_size=2",
            f"--out_dir={tmp_path / 'scratch'}",
        ],
        cwd=out / "work" / "nanogpt" / "patched",
        capture_output=True,
        text=True,
        check=True,
    )
    assert re.search(r"^iter 1: loss \d\.\d{4}, time [\d.]+ms, mfu ", run.stdout, re.M)

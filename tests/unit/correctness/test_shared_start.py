"""§7 B's shared start: init weights -> ckpt.pt -> safetensors, shapes, and the batch order."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from safetensors.torch import load_file, save_file  # noqa: E402

from kit.correctness import shared_start  # noqa: E402
from kit.errors import UserError  # noqa: E402

STAND_IN = Path(__file__).resolve().parents[2] / "fixtures" / "correctness" / "nanogpt"
TINY = dict(n_layer=2, n_head=2, n_embd=16, block_size=32, bias=False, vocab_size=65, dropout=0.0)


@pytest.fixture
def ckpt(tmp_path: Path) -> Path:
    return shared_start.make_init_checkpoint(TINY, tmp_path / "out", nanogpt_dir=STAND_IN)


def test_checkpoint_holds_what_nanogpts_resume_path_reads(ckpt: Path):
    assert ckpt.name == "ckpt.pt"
    c = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert set(c) == {"model", "optimizer", "model_args", "iter_num", "best_val_loss", "config"}
    assert c["iter_num"] == 0 and c["best_val_loss"] == 1e9
    assert c["model_args"] == TINY
    groups = c["optimizer"]["param_groups"]
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    assert groups[0]["betas"] == (0.9, 0.95) and groups[0]["lr"] == 6e-4
    assert groups[0]["fused"] is True  # made for the card: torch restores the saved setting
    assert c["config"]["micakit_init_seed"] == 1337


def test_weights_are_nanogpts_initialization_under_the_seed(ckpt: Path, tmp_path: Path):
    module = shared_start.load_model_module(STAND_IN)
    torch.manual_seed(1337)
    direct = module.GPT(module.GPTConfig(**TINY)).state_dict()
    saved = shared_start.state_dict_of(ckpt)
    assert set(saved) == set(direct)
    assert all(torch.equal(saved[k], direct[k]) for k in direct)
    other = shared_start.make_init_checkpoint(
        TINY, tmp_path / "other", seed=1338, nanogpt_dir=STAND_IN
    )
    assert not torch.equal(
        shared_start.state_dict_of(other)["lm_head.weight"], saved["lm_head.weight"]
    )


def test_callers_random_state_is_untouched(tmp_path: Path):
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    shared_start.make_init_checkpoint(TINY, tmp_path, nanogpt_dir=STAND_IN)
    assert torch.equal(torch.rand(3), expected)


def test_model_prints_go_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    shared_start.make_init_checkpoint(TINY, tmp_path, nanogpt_dir=STAND_IN)
    out, err = capsys.readouterr()
    assert out == "" and "stand-in GPT" in err


def test_round_trip_ckpt_to_safetensors(ckpt: Path, tmp_path: Path):
    st = shared_start.export_safetensors(ckpt, tmp_path / "init.safetensors")
    tensors = load_file(st)
    saved = shared_start.state_dict_of(ckpt)
    assert set(tensors) == set(saved) == set(shared_start.expected_shapes(TINY))
    for name, t in saved.items():
        assert torch.equal(tensors[name], t), name
        assert tensors[name].dtype == torch.float32
    # the tied pair is written under both names, and the metadata says so
    assert torch.equal(tensors["lm_head.weight"], tensors["transformer.wte.weight"])
    from safetensors import safe_open

    with safe_open(str(st), framework="pt") as f:
        assert f.metadata()["tied"] == "lm_head.weight=transformer.wte.weight"
    shared_start.check_init_shapes(st, TINY)


def test_orig_mod_prefix_is_stripped(ckpt: Path, tmp_path: Path):
    c = torch.load(ckpt, map_location="cpu", weights_only=True)
    c["model"] = {f"_orig_mod.{k}": v for k, v in c["model"].items()}
    compiled = tmp_path / "compiled.pt"
    torch.save(c, compiled)
    tensors = load_file(shared_start.export_safetensors(compiled, tmp_path / "init.safetensors"))
    assert set(tensors) == set(shared_start.expected_shapes(TINY))


def test_expected_shapes_with_bias():
    shapes = shared_start.expected_shapes({**TINY, "bias": True})
    assert shapes["transformer.h.1.mlp.c_fc.bias"] == (64,)
    assert shapes["transformer.ln_f.bias"] == (16,)
    assert shapes["transformer.h.0.attn.c_attn.weight"] == (48, 16)
    assert "lm_head.bias" not in shapes


def test_init_weights_of_the_wrong_shape(ckpt: Path, tmp_path: Path):
    st = shared_start.export_safetensors(ckpt, tmp_path / "init.safetensors")
    wider = {**TINY, "n_embd": 32}
    with pytest.raises(
        UserError, match=r"tensor transformer.wte.weight has shape \(65, 16\), expected \(65, 32\)"
    ) as e:
        shared_start.check_init_shapes(st, wider)
    assert "make the init weights again" in str(e.value.fix)
    with pytest.raises(UserError, match=r"no tensor transformer.h.2.ln_1.weight \(shape \(16,\)\)"):
        shared_start.check_init_shapes(st, {**TINY, "n_layer": 3})
    tensors = load_file(st)
    tensors["transformer.h.1.mlp.c_proj.weight"] = torch.zeros(16, 48)
    save_file(tensors, str(tmp_path / "bad.safetensors"))
    with pytest.raises(
        UserError,
        match=r"tensor transformer.h.1.mlp.c_proj.weight has shape \(16, 48\), expected \(16, 64\)",
    ):
        shared_start.check_init_shapes(tmp_path / "bad.safetensors", TINY)


def test_init_weights_with_an_extra_tensor_or_dtype(ckpt: Path, tmp_path: Path):
    tensors = load_file(shared_start.export_safetensors(ckpt, tmp_path / "init.safetensors"))
    save_file({**tensors, "extra.weight": torch.zeros(2)}, str(tmp_path / "extra.safetensors"))
    with pytest.raises(UserError, match=r"unexpected tensor extra.weight \(2,\)"):
        shared_start.check_init_shapes(tmp_path / "extra.safetensors", TINY)
    save_file(
        {**tensors, "transformer.h.0.attn.bias": torch.ones(1, 1, 32, 32)},
        str(tmp_path / "mask.safetensors"),
    )
    shared_start.check_init_shapes(
        tmp_path / "mask.safetensors", TINY
    )  # nanoGPT's mask buffer is allowed
    half = {k: v.to(torch.bfloat16) for k, v in tensors.items()}
    save_file(half, str(tmp_path / "half.safetensors"))
    with pytest.raises(UserError, match="is BF16, expected F32"):
        shared_start.check_init_shapes(tmp_path / "half.safetensors", TINY)


def test_not_a_safetensors_file(tmp_path: Path):
    bad = tmp_path / "init.safetensors"
    bad.write_bytes(b"not a safetensors file")
    with pytest.raises(UserError, match="is not a safetensors file"):
        shared_start.check_init_shapes(bad, TINY)


def test_bad_checkpoint_and_source(tmp_path: Path):
    with pytest.raises(UserError, match="does not exist"):
        shared_start.export_safetensors(tmp_path / "ckpt.pt", tmp_path / "x.safetensors")
    (tmp_path / "ckpt.pt").write_bytes(b"junk")
    with pytest.raises(UserError, match="is not a nanoGPT checkpoint"):
        shared_start.export_safetensors(tmp_path / "ckpt.pt", tmp_path / "x.safetensors")
    with pytest.raises(UserError, match="holds no model.py"):
        shared_start.make_init_checkpoint(TINY, tmp_path, nanogpt_dir=tmp_path)
    with pytest.raises(UserError, match="the model arguments lack vocab_size"):
        shared_start.make_init_checkpoint(
            {k: v for k, v in TINY.items() if k != "vocab_size"}, tmp_path, nanogpt_dir=STAND_IN
        )


# -- the batch order ------------------------------------------------------------------------


def test_batch_order_shape_range_and_determinism():
    order = shared_start.make_batch_order(
        data_len=1000, block_size=32, batch_size=4, steps=202, seed=1337
    )
    assert order.shape == (202, 4) and order.dtype == np.int64
    assert order.min() >= 0 and order.max() < 1000 - 32
    again = shared_start.make_batch_order(1000, 32, 4, 202, 1337)
    assert np.array_equal(order, again)
    assert not np.array_equal(order, shared_start.make_batch_order(1000, 32, 4, 202, 1338))


def test_batch_order_is_drawn_like_get_batch():
    # row r is torch.randint(len(data) - block_size, (batch_size,)) from one seeded generator
    g = torch.Generator().manual_seed(5)
    rows = [torch.randint(968, (4,), generator=g).numpy() for _ in range(3)]
    assert np.array_equal(shared_start.make_batch_order(1000, 32, 4, 3, 5), np.stack(rows))


def test_rows_the_patched_train_py_needs():
    # train.patch asserts len(rows) > (max_iters + 1) * gradient_accumulation_steps
    assert shared_start.batch_rows_needed(200) == 202
    assert shared_start.batch_rows_needed(200, 2) == 403


def test_batch_order_round_trip(tmp_path: Path):
    order = shared_start.make_batch_order(1000, 32, 4, 10, 1337)
    path = shared_start.save_batch_order(tmp_path / "batches.npy", order)
    back = shared_start.load_batch_order(path, batch_size=4, data_len=1000, block_size=32)
    assert back.dtype == np.int64 and np.array_equal(back, order)
    assert np.load(path).dtype.str == "<i8"


def test_batch_order_bad_files(tmp_path: Path):
    p = tmp_path / "b.npy"
    np.save(p, np.zeros((10, 4), dtype=np.int32))
    with pytest.raises(UserError, match="batch offsets must be int64, not int32"):
        shared_start.load_batch_order(p)
    np.save(p, np.zeros(40, dtype=np.int64))
    with pytest.raises(UserError, match=r"two dimensions \(steps, batch_size\), not 1"):
        shared_start.load_batch_order(p)
    np.save(p, np.zeros((10, 4), dtype=np.int64))
    with pytest.raises(UserError, match="rows of 4 offsets, but the batch size is 8"):
        shared_start.load_batch_order(p, batch_size=8)
    np.save(p, np.full((10, 4), 990, dtype=np.int64))
    with pytest.raises(UserError, match="an offset 990 beyond the data's last context start 967"):
        shared_start.load_batch_order(p, data_len=1000, block_size=32)
    np.save(p, np.full((10, 4), -1, dtype=np.int64))
    with pytest.raises(UserError, match="a batch offset is negative"):
        shared_start.load_batch_order(p)
    (tmp_path / "junk.npy").write_bytes(b"junk")
    with pytest.raises(UserError, match="is not a NumPy .npy file"):
        shared_start.load_batch_order(tmp_path / "junk.npy")
    with pytest.raises(UserError, match="does not exist"):
        shared_start.load_batch_order(tmp_path / "absent.npy")
    with pytest.raises(UserError, match="must be int64"):
        shared_start.save_batch_order(p, np.zeros((2, 2), dtype=np.float64))


def test_batch_order_bad_arguments():
    with pytest.raises(UserError, match="no more than one context of 32"):
        shared_start.make_batch_order(32, 32, 4, 10, 1)
    with pytest.raises(UserError, match="batch_size must be at least 1"):
        shared_start.make_batch_order(1000, 32, 0, 10, 1)


# -- with the real nanoGPT ------------------------------------------------------------------

NANOGPT = os.environ.get("MICAKIT_NANOGPT")
needs_nanogpt = pytest.mark.skipif(not NANOGPT, reason="MICAKIT_NANOGPT names no nanoGPT checkout")


@pytest.mark.nanogpt
@needs_nanogpt
def test_real_model_matches_the_expected_shapes(tmp_path: Path):
    for args in (TINY, {**TINY, "bias": True}):
        ckpt = shared_start.make_init_checkpoint(
            args, tmp_path / str(args["bias"]), nanogpt_dir=Path(str(NANOGPT))
        )
        shapes = {k: tuple(v.shape) for k, v in shared_start.state_dict_of(ckpt).items()}
        assert shapes == shared_start.expected_shapes(args)


@pytest.mark.nanogpt
@pytest.mark.slow
@needs_nanogpt
def test_real_train_py_resumes_from_the_shared_start(tmp_path: Path):
    """The patched train.py reads ckpt.pt and the batch order; its step-0 loss is the forward
    pass of the safetensors weights on row 0 of the order."""
    from kit.sides import nanogpt, patch

    src = nanogpt.from_checkout(Path(str(NANOGPT)))
    run = tmp_path / "run"
    patch.apply_patch(src, nanogpt.PATCH_PATH, run)
    data = run / "data" / "tiny"
    data.mkdir(parents=True)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 65, 5000).astype(np.uint16)
    tokens.tofile(data / "train.bin")
    rng.integers(0, 65, 1000).astype(np.uint16).tofile(data / "val.bin")
    (data / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 65}))
    ckpt = shared_start.make_init_checkpoint(
        TINY, run / "out", nanogpt_dir=run, device_type="cpu", learning_rate=1e-3, betas=(0.9, 0.99)
    )
    order = shared_start.save_batch_order(
        run / "batches.npy",
        shared_start.make_batch_order(5000, 32, 4, shared_start.batch_rows_needed(3), 1337),
    )
    args = [
        "--dataset=tiny",
        "--out_dir=out",
        "--init_from=resume",
        "--device=cpu",
        "--compile=False",
        "--dtype=float32",
        "--n_layer=2",
        "--n_head=2",
        "--n_embd=16",
        "--block_size=32",
        "--batch_size=4",
        "--gradient_accumulation_steps=1",
        "--max_iters=3",
        "--log_interval=1",
        "--eval_iters=1",
        "--eval_interval=1000",
        "--dropout=0.0",
        "--allow_tf32=False",
        f"--batch_order={order.name}",
        "--learning_rate=1e-3",
        "--beta2=0.99",
    ]
    out = subprocess.run(
        [sys.executable, "-u", "train.py", *args],
        cwd=run,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    from kit.correctness import curves
    from kit.protocol.load import load

    p = load()
    curve = curves.parse_train_lines(out.splitlines(), p.pytorch.line_regex, p.pytorch.step_prefix)
    assert curve["step"].tolist() == [0, 1, 2, 3]

    sys.path.insert(0, str(run))
    try:
        module = shared_start.load_model_module(run)
    finally:
        sys.path.remove(str(run))
    model = module.GPT(module.GPTConfig(**TINY))
    model.load_state_dict(
        load_file(shared_start.export_safetensors(ckpt, tmp_path / "init.safetensors"))
    )
    rows = shared_start.load_batch_order(order, batch_size=4)
    x = torch.stack([torch.from_numpy(tokens[i : i + 32].astype(np.int64)) for i in rows[0]])
    y = torch.stack([torch.from_numpy(tokens[i + 1 : i + 33].astype(np.int64)) for i in rows[0]])
    _, loss = model(x, y)
    assert curve["loss"].iloc[0] == pytest.approx(loss.item(), abs=5e-5)  # printed to 4 decimals

"""§7 B's shared start: one set of initial weights and one batch order, read by both sides.

The weights are made once by nanoGPT's own initialization (its `model.py`, imported from the
pinned source) and saved twice: as `ckpt.pt`, the form nanoGPT's resume path reads
(`--init_from=resume` reads `<out_dir>/ckpt.pt`), and as one safetensors file whose tensor names
are nanoGPT's state-dict keys, which the contender reads (`--init`). The batch order is a NumPy
`.npy` file of int64 batch offsets, one row of `batch_size` per micro-batch, which the patched
train.py reads (`--batch_order`) and the contender too (`--batches`).

torch is needed here (the `train` extra); it is imported when a function needs it, so the rest
of the kit runs without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from kit.errors import UserError

CKPT = "ckpt.pt"  # the name nanoGPT's resume path reads in out_dir
ORIG_MOD_PREFIX = "_orig_mod."  # torch.compile's prefix, which nanoGPT strips on resume
SHAPE_KEYS = ("n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size")
SAFETENSORS_SCHEMA = "1"


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise UserError(
            "torch is needed to make the shared start of §7 B",
            "install the kit with its train extra: pip install 'micakit[train]'",
        ) from None
    return torch


@contextlib.contextmanager
def _atomic(path: Path) -> Iterator[Path]:
    """A temporary name in the target's folder, renamed onto it when the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        # readable by the contender's image, whatever user it runs as (mkstemp makes 0600)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


# -- initial weights -------------------------------------------------------------------------


def load_model_module(nanogpt_dir: Path) -> ModuleType:
    """nanoGPT's model.py from a source folder, as a module of its own (sys.path untouched)."""
    path = Path(nanogpt_dir) / "model.py"
    if not path.is_file():
        raise UserError(
            f"{nanogpt_dir} holds no model.py",
            "name the folder of nanoGPT's source at the pinned commit (--nanogpt PATH)",
        )
    name = "micakit_nanogpt_model_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    for attr in ("GPT", "GPTConfig"):
        if not hasattr(module, attr):
            raise UserError(f"{path} defines no {attr}", "name nanoGPT's source folder")
    return module


def _check_model_args(model_args: dict[str, Any]) -> dict[str, Any]:
    missing = [k for k in SHAPE_KEYS if k not in model_args]
    if missing:
        raise UserError(
            f"the model arguments lack {', '.join(missing)}",
            f"give all of {', '.join(SHAPE_KEYS)} (vocab_size too: 65 for shakespeare_char, "
            "50304 for GPT-2's vocabulary)",
        )
    return {**model_args, "dropout": float(model_args.get("dropout", 0.0))}


def make_init_checkpoint(
    model_args: dict[str, Any],
    out_dir: Path,
    seed: int = 1337,
    *,
    nanogpt_dir: Path,
    weight_decay: float = 0.1,
    learning_rate: float = 6e-4,
    betas: tuple[float, float] = (0.9, 0.95),
    device_type: str = "cuda",
    config: dict[str, Any] | None = None,
) -> Path:
    """§7 B: initial weights by nanoGPT's own initialization, saved as nanoGPT's `ckpt.pt`.

    The model is built as train.py builds it from scratch: `torch.manual_seed(seed)` (nanoGPT's
    1337), then `GPT(GPTConfig(**model_args))` on the CPU, with nothing drawn in between, so
    the weights are those a from-scratch run with that seed starts from. The caller's random
    state is left as it was.

    The checkpoint holds what train.py's resume path reads: `model`, `optimizer`, `model_args`,
    `iter_num` (0) and `best_val_loss` (1e9), and `config` as nanoGPT writes it. The optimizer
    state comes from `model.configure_optimizers(weight_decay, learning_rate, betas,
    device_type)`; torch's `load_state_dict` replaces the resumed optimizer's settings with the
    saved ones (`fused` included), so `weight_decay`, `betas` and `device_type` must be those of
    the runs that resume (device_type "cuda" keeps nanoGPT's fused AdamW on the card).
    """
    torch = _torch()
    model_args = _check_model_args(model_args)
    module = load_model_module(nanogpt_dir)
    # nanoGPT prints its parameter counts; stdout carries the kit's results, so they go to stderr
    with torch.random.fork_rng(devices=[]), contextlib.redirect_stdout(sys.stderr):
        torch.manual_seed(seed)
        model = module.GPT(module.GPTConfig(**model_args))
        optimizer = model.configure_optimizers(weight_decay, learning_rate, betas, device_type)
    checkpoint = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "model_args": model_args,
        "iter_num": 0,  # resume starts at step 0: step 0's loss is the shared start's
        "best_val_loss": 1e9,  # train.py's own starting value
        "config": {
            **(config or {}),
            "micakit_init_seed": seed,
            "weight_decay": weight_decay,
            "learning_rate": learning_rate,
            "beta1": betas[0],
            "beta2": betas[1],
        },
    }
    path = Path(out_dir) / CKPT
    with _atomic(path) as tmp:
        torch.save(checkpoint, tmp)
    return path


def _load_ckpt(ckpt_path: Path) -> dict[str, Any]:
    torch = _torch()
    try:
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise UserError(
            f"{ckpt_path} does not exist", "make it with make_init_checkpoint"
        ) from None
    except Exception as e:  # torch raises several types for a file that is not a checkpoint
        raise UserError(f"{ckpt_path} is not a nanoGPT checkpoint: {e}") from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("model"), dict):
        raise UserError(f"{ckpt_path} is not a nanoGPT checkpoint: it has no model state")
    return ckpt


def state_dict_of(ckpt_path: Path) -> dict[str, Any]:
    """The checkpoint's weights under nanoGPT's names (the `_orig_mod.` prefix stripped)."""
    state = _load_ckpt(ckpt_path)["model"]
    return {k.removeprefix(ORIG_MOD_PREFIX): v for k, v in state.items()}


def export_safetensors(ckpt_path: Path, out_path: Path) -> Path:
    """The checkpoint's weights as one safetensors file, named by nanoGPT's state-dict keys.

    Every key is written, each tensor its own copy: safetensors stores no shared tensors, and
    GPT-2 ties `lm_head.weight` to `transformer.wte.weight`, so both names hold the same
    values and the metadata entry `tied` names the pairs.
    """
    from safetensors.torch import save_file

    state = state_dict_of(ckpt_path)
    first_name: dict[tuple[int, int], str] = {}
    tied = []
    for name, t in state.items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset())
        if key in first_name:
            tied.append(f"{name}={first_name[key]}")
        else:
            first_name[key] = name
    tensors = {name: t.detach().clone().contiguous() for name, t in state.items()}
    metadata = {"format": "pt", "micakit_schema": SAFETENSORS_SCHEMA, "tied": ",".join(tied)}
    out_path = Path(out_path)
    with _atomic(out_path) as tmp:
        save_file(tensors, str(tmp), metadata=metadata)
    return out_path


# -- shapes, for an init-weights file handed to either side ------------------------------------


def expected_shapes(model_args: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """nanoGPT's state-dict keys and shapes for a GPT of these arguments (its model.py)."""
    a = _check_model_args(model_args)
    n, v, bs, bias = int(a["n_embd"]), int(a["vocab_size"]), int(a["block_size"]), a["bias"]
    shapes: dict[str, tuple[int, ...]] = {
        "transformer.wte.weight": (v, n),
        "transformer.wpe.weight": (bs, n),
    }
    linears = {"attn.c_attn": (3 * n, n), "attn.c_proj": (n, n)}
    linears |= {"mlp.c_fc": (4 * n, n), "mlp.c_proj": (n, 4 * n)}
    for i in range(int(a["n_layer"])):
        h = f"transformer.h.{i}"
        for norm in ("ln_1", "ln_2"):
            shapes[f"{h}.{norm}.weight"] = (n,)
            if bias:
                shapes[f"{h}.{norm}.bias"] = (n,)
        for name, (rows, cols) in linears.items():
            shapes[f"{h}.{name}.weight"] = (rows, cols)
            if bias:
                shapes[f"{h}.{name}.bias"] = (rows,)
    shapes["transformer.ln_f.weight"] = (n,)
    if bias:
        shapes["transformer.ln_f.bias"] = (n,)
    shapes["lm_head.weight"] = (v, n)
    return shapes


def check_init_shapes(safetensors_path: Path, model_args: dict[str, Any]) -> None:
    """Refuse an init-weights file whose tensors are not this model's: name, expected, found."""
    from safetensors import SafetensorError, safe_open

    expected = expected_shapes(model_args)
    bs = int(model_args["block_size"])
    try:
        with safe_open(str(safetensors_path), framework="numpy") as f:
            slices = {k: f.get_slice(k) for k in f.keys()}
            found = {k: (tuple(s.get_shape()), s.get_dtype()) for k, s in slices.items()}
    except (SafetensorError, OSError) as e:
        raise UserError(f"{safetensors_path} is not a safetensors file: {e}") from None
    fix = "make the init weights again for this model (same n_layer, n_head, n_embd, vocab_size)"
    for name, shape in expected.items():
        if name not in found:
            raise UserError(f"{safetensors_path}: no tensor {name} (shape {shape})", fix)
        got, dtype = found[name]
        if got != shape:
            raise UserError(
                f"{safetensors_path}: tensor {name} has shape {got}, expected {shape}", fix
            )
        if dtype != "F32":
            raise UserError(f"{safetensors_path}: tensor {name} is {dtype}, expected F32", fix)
    for name, (got, _) in found.items():
        # nanoGPT keeps a causal-mask buffer named like this only without PyTorch's flash path
        if name.endswith(".attn.bias") and got == (1, 1, bs, bs):
            continue
        if name not in expected:
            raise UserError(f"{safetensors_path}: unexpected tensor {name} {got}", fix)


# -- the batch order ---------------------------------------------------------------------------


def batch_rows_needed(max_iters: int, gradient_accumulation_steps: int = 1) -> int:
    """Rows the patched train.py needs: row r is micro-batch r, and it fetches one ahead."""
    return (max_iters + 1) * gradient_accumulation_steps + 1


def make_batch_order(
    data_len: int, block_size: int, batch_size: int, steps: int, seed: int
) -> np.ndarray:
    """Batch offsets drawn as nanoGPT's get_batch draws them, one row of batch_size a step.

    Each row is `torch.randint(data_len - block_size, (batch_size,))` from a generator of its
    own seeded with `seed`, so the caller's random state is untouched and the same arguments
    give the same order everywhere. `steps` is the number of rows: for nanoGPT give
    `batch_rows_needed(max_iters)`; step N (gradient accumulation 1) reads row N.
    """
    for name, value in (("block_size", block_size), ("batch_size", batch_size), ("steps", steps)):
        if value < 1:
            raise UserError(f"make_batch_order: {name} must be at least 1, not {value}")
    if data_len <= block_size:
        raise UserError(
            f"the training data holds {data_len} tokens, no more than one context of {block_size}"
        )
    torch = _torch()
    g = torch.Generator().manual_seed(seed)
    rows = [torch.randint(data_len - block_size, (batch_size,), generator=g) for _ in range(steps)]
    return torch.stack(rows).numpy().astype(np.int64)


def save_batch_order(path: Path, order: np.ndarray) -> Path:
    """The order as a .npy file of int64, one row per step (written whole or not at all)."""
    _check_order(np.asarray(order), Path(path))
    path = Path(path)
    with _atomic(path) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(order, dtype="<i8"), allow_pickle=False)
    return path


def load_batch_order(
    path: Path, batch_size: int | None = None, data_len: int | None = None, block_size: int = 0
) -> np.ndarray:
    """A batch order file, checked: int64, two dimensions, and in range when told the data."""
    path = Path(path)
    try:
        order = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UserError(f"the batch order {path} does not exist") from None
    except (ValueError, OSError) as e:
        raise UserError(f"{path} is not a NumPy .npy file of batch offsets: {e}") from None
    _check_order(order, path)
    if batch_size is not None and order.shape[1] != batch_size:
        raise UserError(
            f"{path} holds rows of {order.shape[1]} offsets, but the batch size is {batch_size}",
            "make the batch order for this model's batch size",
        )
    if data_len is not None and order.size and order.max() > data_len - block_size - 1:
        raise UserError(
            f"{path} has an offset {int(order.max())} beyond the data's last context start "
            f"{data_len - block_size - 1}",
            "make the batch order for this data and context length",
        )
    return order


def _check_order(order: np.ndarray, path: Path) -> None:
    if order.dtype != np.int64:
        raise UserError(
            f"{path}: batch offsets must be int64, not {order.dtype}",
            "save them with save_batch_order",
        )
    if order.ndim != 2:
        raise UserError(
            f"{path}: a batch order has two dimensions (steps, batch_size), not {order.ndim}"
            f" (shape {order.shape})",
            "save one row of batch_size offsets per step",
        )
    if order.size and order.min() < 0:
        raise UserError(f"{path}: a batch offset is negative ({int(order.min())})")

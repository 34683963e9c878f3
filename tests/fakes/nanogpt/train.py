"""A stand-in for nanoGPT's train.py in tests: prints nanoGPT's own log lines at a set pace.

It reads the same `--key=value` overrides the kit passes; see tests/fakes/fakelib.py. Like the
real file, only the patched tree knows §4's keys (seed, compile_mode, allow_tf32, batch_order);
`--init_from=resume` reads `<out_dir>/ckpt.pt`, and with a batch order the iter lines print the
loss with every digit, as the patch's §7 B switch makes nanoGPT do.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# the kit copies this file into a series' own tree; the fakes' folder is named by the tests
sys.path.insert(0, os.environ.get("MICAKIT_FAKES", str(Path(__file__).resolve().parents[1])))

import fakelib  # noqa: E402

PATCH_KEYS = ("compile_mode", "seed", "allow_tf32", "batch_order")

# nanoGPT's defaults, laid out as its train.py lays them out: the kit reads the literal
# assignments before `config_keys` for §7 B's shared start (kit.correctness.nanogpt_config).
# Unlike nanoGPT's, gradient accumulation is 1 here, as the fake config file sets nothing.
n_layer = 12
n_head = 12
n_embd = 768
dropout = 0.0
bias = False
block_size = 1024
batch_size = 12
gradient_accumulation_steps = 1
learning_rate = 6e-4
weight_decay = 1e-1
beta1 = 0.9
beta2 = 0.95
config_keys = [k for k, v in globals().items() if isinstance(v, (int, float, bool, str))]


def shared_start(opts: dict[str, str], steps: int):
    """Method B's inputs as the patched train.py reads them: what they add to each step's loss."""
    extra = 0.0
    if opts.get("init_from") == "resume":
        import torch

        ckpt_path = Path(opts.get("out_dir", "out")) / "ckpt.pt"
        print(f"Resuming training from {ckpt_path.parent}", flush=True)
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        state = {k.removeprefix("_orig_mod."): v for k, v in ckpt["model"].items()}
        extra = fakelib.init_term(state["lm_head.weight"].numpy())
    order = None
    if opts.get("batch_order"):
        import numpy as np

        order = np.load(opts["batch_order"])
        # the patch's assert: (max_iters + 1) * gradient_accumulation_steps + 1 rows at least
        assert len(order) > steps + 1, "batch_order needs (max_iters+1)*1+1 rows"

    def extra_loss(step: int) -> float:
        return extra + (fakelib.batch_term(order, step) if order is not None else 0.0)

    return extra_loss, order is not None


def main(argv: list[str]) -> int:
    opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    patched = bool(globals().get("PATCHED"))
    unknown = [k for k in PATCH_KEYS if k in opts and not patched]
    if unknown:
        raise ValueError(f"Unknown config key: {unknown[0]}")  # as nanoGPT's configurator says
    mode = opts.get("compile_mode") or ("eager" if opts.get("compile") == "False" else "default")
    steps = int(opts.get("max_iters", "400"))
    print(f"tree: {'patched' if patched else 'shipped'}", flush=True)
    extra_loss, full_digits = shared_start(opts, steps)
    return fakelib.train(
        mode,
        steps,
        lambda step, loss, _, step_ms: (
            f"iter {step}: loss {loss}, time {step_ms:.2f}ms, mfu -100.00%"
        ),
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB",
        log_every=int(opts.get("log_interval", "10")),
        loss_format=".10f" if full_digits else ".4f",
        extra_loss=extra_loss,
        eval_every=int(opts.get("eval_interval", "2000")),
        eval_line=lambda step, t, v: f"step {step}: train loss {t:.4f}, val loss {v:.4f}",
        seed=int(opts.get("seed", "1337")),
        batch=int(opts.get("batch_size", "64")),
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

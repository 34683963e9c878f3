"""§7 B's shared start, made where the PyTorch side runs (its torch, its model.py).

Run as `python -m kit.correctness.make_start REQUEST.json` with only this file, shared_start.py
and errors.py on the path: a measured image holds torch and numpy and nothing of the kit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from kit.correctness import shared_start
from kit.errors import UserError


def make(request: dict) -> tuple[int, int]:
    """Write ckpt.pt, init.safetensors (where safetensors is installed) and batch_order.npy."""
    out, a = Path(request["out"]), request["model_args"]
    ckpt = shared_start.make_init_checkpoint(
        a,
        out,
        request["seed"],
        nanogpt_dir=Path(request["nanogpt"]),
        weight_decay=request["weight_decay"],
        learning_rate=request["learning_rate"],
        betas=tuple(request["betas"]),
        device_type=request["device_type"],
        config=request["config"],
    )
    try:
        shared_start.export_safetensors(ckpt, out / "init.safetensors")
    except ModuleNotFoundError as e:  # a measured image holds torch and numpy, nothing more
        if e.name != "safetensors":
            raise
        print("safetensors export left to the kit's own environment", flush=True)
    n = len(np.memmap(request["train_bin"], dtype=np.uint16, mode="r"))
    rows = shared_start.batch_rows_needed(request["steps"], request["gradient_accumulation_steps"])
    order = shared_start.make_batch_order(
        n, a["block_size"], request["batch_size"], rows, request["seed"]
    )
    shared_start.save_batch_order(out / "batch_order.npy", order)
    return len(a), rows


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    request = json.loads(Path(args[0]).read_text())
    try:
        n_args, rows = make(request)
    except UserError as e:
        print(f"micakit: error: {e}", file=sys.stderr, flush=True)
        return 2
    except ModuleNotFoundError as e:
        print(
            f"micakit: error: {e.name} is not installed where the PyTorch side runs",
            file=sys.stderr,
            flush=True,
        )
        return 2
    print(f"shared start made: {n_args} model arguments, {rows} batch rows", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

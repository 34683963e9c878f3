#!/usr/bin/env python3
"""A stand-in contender that keeps the contract of D4, for tests (see fakelib for behaviours).

Command line as the protocol's template: PROGRAM +mica stdout=line products=FILE -mica
--model M --precision P --seed S --steps N --data DIR [build args], and for §7's checks
[--eval-interval N --eval-iters M] (evaluations in nanoGPT's grammar), [--init FILE --batches FILE]
(method B's shared start: safetensors weights and a .npy batch order) and [--log-interval N].
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fakelib  # noqa: E402


def main(argv: list[str]) -> int:
    if argv[:3] == ["+mica", "info", "-mica"]:
        # the protocol's version_args: what the program says of itself (rule 4)
        time.sleep(float(fakelib.settings().get("info_s", 0)))
        print(f"fake contender 1.0.0, commit 0000000, {os.environ.get('FAKE_BUILD', 'release')}")
        return 0
    opts = {a: b for a, b in zip(argv, argv[1:]) if a.startswith("--")}
    plus = [a for a in argv if a.startswith("products=")]
    steps = int(opts.get("--steps", "400"))
    half = "fp_half_intermediates" in argv
    # the protocol's command names no build: tell them apart by their flag and precision
    if half:
        variant = "mica-half-intermediates"
    else:
        variant = "mica" if opts.get("--precision", "float32") == "float32" else "mica-strict"
    if "--variant" in opts:
        variant = opts["--variant"]
    if plus:
        # amendment 4.3: the first run writes the products record, later runs read it
        record = Path(plus[0].split("=", 1)[1])
        if not record.exists():
            record.parent.mkdir(parents=True, exist_ok=True)
            record.write_text("gemm 0 cublasLt-default\n")
    extra_loss, full_digits = shared_start(opts)
    return fakelib.train(
        variant,
        steps,
        lambda step, loss, own_ms, _: f"step {step} loss {loss} time_ms {own_ms:.3f}",
        "mica: cuMemAlloc failed: out of memory",
        log_every=int(opts.get("--log-interval", "10")),
        loss_format=".10f" if full_digits else ".4f",
        extra_loss=extra_loss,
        eval_every=int(opts.get("--eval-interval", "0")),
        eval_line=lambda step, t, v: f"step {step}: train loss {t:.4f}, val loss {v:.4f}",
        seed=int(opts.get("--seed", "1337")),
        seed_shift=1,  # the contender's jitter is its next seed's (see fakelib)
        batch=int(opts.get("--batch-size", "64")),
    )


def shared_start(opts: dict[str, str]):
    """§7 B's inputs read through files: the safetensors weights and the batch order."""
    if not opts.get("--init") and not opts.get("--batches"):
        return None, False
    import numpy as np
    from safetensors.numpy import load_file

    weights = load_file(opts["--init"])
    extra = fakelib.init_term(weights["lm_head.weight"])
    order = np.load(opts["--batches"])

    def extra_loss(step: int) -> float:
        return extra + fakelib.batch_term(order, step)

    return extra_loss, True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

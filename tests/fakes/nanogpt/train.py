"""A stand-in for nanoGPT's train.py in tests: prints nanoGPT's own log lines at a set pace.

It reads the same `--key=value` overrides the kit passes; see tests/fakes/fakelib.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# the kit copies this file into a series' own tree; the fakes' folder is named by the tests
sys.path.insert(0, os.environ.get("MICAKIT_FAKES", str(Path(__file__).resolve().parents[1])))

import fakelib  # noqa: E402


def main(argv: list[str]) -> int:
    opts = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    mode = opts.get("compile_mode") or ("eager" if opts.get("compile") == "False" else "default")
    steps = int(opts.get("max_iters", "400"))
    print(f"tree: {'patched' if globals().get('PATCHED') else 'shipped'}", flush=True)
    print("step 0: train loss 4.2000, val loss 4.2000", flush=True)
    return fakelib.train(
        mode,
        steps,
        lambda step, loss, _, step_ms: (
            f"iter {step}: loss {loss:.4f}, time {step_ms:.2f}ms, mfu -100.00%"
        ),
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB",
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

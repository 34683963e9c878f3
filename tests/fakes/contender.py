#!/usr/bin/env python3
"""A stand-in contender that keeps the contract of D4, for tests (see fakelib for behaviours).

Command line as the protocol's template: PROGRAM +mica stdout=line products=FILE -mica
--model M --precision P --seed S --steps N --data DIR [build args].
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fakelib  # noqa: E402


def main(argv: list[str]) -> int:
    if argv[:3] == ["+mica", "info", "-mica"]:
        # the protocol's version_args: what the program says of itself (rule 4)
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
    return fakelib.train(
        variant,
        steps,
        lambda step, loss, own_ms, _: f"step {step} loss {loss:.4f} time_ms {own_ms:.3f}",
        "mica: cuMemAlloc failed: out of memory",
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

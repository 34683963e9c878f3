"""§6: the attention backends PyTorch allows, read where the PyTorch side's runs run.

Run there as `python -m kit.telemetry.sdpa_probe` (kit.executors.programs ships it): it imports
nothing of the kit, and prints one marked JSON line that `kernels.parse_sdpa_probe` reads.
Attributes that a torch version lacks are reported as null rather than failing.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MARKER = "MICAKIT_SDPA_BACKENDS"
# torch.backends.cuda's functions, in the order torch added them; an older torch lacks the last
FUNCTIONS = (
    "flash_sdp_enabled",
    "mem_efficient_sdp_enabled",
    "math_sdp_enabled",
    "cudnn_sdp_enabled",
    "is_flash_attention_available",
)


def report(torch: Any) -> dict[str, Any]:
    """What `torch` allows; null where a function is missing or fails."""
    cuda = torch.backends.cuda
    out = {"torch_version": torch.__version__, "cuda_available": torch.cuda.is_available()}
    for name in FUNCTIONS:
        fn = getattr(cuda, name, None)
        try:
            out[name] = bool(fn()) if callable(fn) else None
        except Exception:
            out[name] = None
    return out


def main() -> int:
    # torch is imported here, not at the top: the versions probe imports this module, and
    # reports a missing torch itself before this fails with the traceback the kit shows
    import torch

    print(f"{MARKER} " + json.dumps(report(torch), sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Rule 4, §6: the versions of the PyTorch side, read where its runs run.

Run there as `python -m kit.sides.versions_probe` (kit.executors.programs ships it with
kit.telemetry.sdpa_probe): it imports nothing else of the kit. It prints one marked JSON line of
versions, then the SDPA probe's line; a missing torch is reported in the first and fails the
second, so the kit says where torch is missing.
"""

from __future__ import annotations

import json
import platform
import sys
from typing import Any

from kit.telemetry import sdpa_probe

MARKER = "MICAKIT_VERSIONS"


def versions() -> dict[str, Any]:
    """Python, torch (its CUDA runtime and cuDNN), triton and numpy; None where one is absent."""
    out: dict[str, Any] = {"python": platform.python_version()}
    try:
        import torch

        out["torch"] = torch.__version__
        out["cuda_runtime"] = torch.version.cuda
        cudnn = torch.backends.cudnn
        out["cudnn"] = cudnn.version() if cudnn.is_available() else None
    except Exception as e:
        out["torch"] = f"unavailable: {e}"
    for name in ("triton", "numpy"):
        try:
            out[name] = __import__(name).__version__
        except Exception:
            out[name] = None
    return out


def main() -> int:
    print(f"{MARKER} " + json.dumps(versions()), flush=True)
    return sdpa_probe.main()


if __name__ == "__main__":
    sys.exit(main())

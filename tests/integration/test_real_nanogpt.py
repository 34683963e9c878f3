"""With a real nanoGPT checkout (MICAKIT_NANOGPT=PATH, at the pinned commit): the kit's trees
and command lines train 20 CPU steps in each of PyTorch's four modes, and a smoke series runs.

Skipped, saying why, where no checkout is named.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kit.executors.local import LocalExecutor
from kit.measure.stamped import read_stamped
from kit.protocol.load import load
from kit.results.planned import Config
from kit.results.run_options import SideInputs
from kit.sides import workspace
from kit.sides.side import PyTorchSide, RunContext
from tests.conftest import REAL_INPUT, needs_real_input

NANOGPT = os.environ.get("MICAKIT_NANOGPT")
pytestmark = [
    pytest.mark.nanogpt,
    pytest.mark.slow,
    pytest.mark.skipif(not NANOGPT, reason="MICAKIT_NANOGPT names no nanoGPT checkout"),
    needs_real_input,
]


@pytest.mark.parametrize("mode", ["eager", "default", "reduce-overhead", "max-autotune"])
def test_twenty_cpu_steps_in_each_mode(tmp_path: Path, mode: str):
    p = load()
    inputs = SideInputs(
        sides=("pytorch",),
        models=("shakespeare-char",),
        data_dir=str(tmp_path / "data"),
        nanogpt=NANOGPT,
        input=str(REAL_INPUT),
    )
    ws = workspace.prepare(p, inputs, tmp_path / "nanogpt")
    ex = LocalExecutor()
    ctx = RunContext(p, ex, "cpu", None, tmp_path / "work", smoke=True)
    side = PyTorchSide(ws, python=os.environ.get("PYTHON", "python3"))
    config = Config("cpu", "shakespeare-char", "float32", "pytorch", mode)
    flags = {"max_iters": "20", "log_interval": "10"}
    spec = side.spec(config, f"20 steps {mode}", ctx, flags=flags)
    outcome = ex.run(spec, tmp_path / "run")
    out = [x.text for x in read_stamped(outcome.stdout_log)]
    err = [x.text for x in read_stamped(outcome.stderr_log)]
    assert outcome.exit_code == 0, "\n".join(err[-20:])
    assert any(line.startswith("iter 20: loss ") for line in out), out[-5:]
    # §3 rule 2: eager and default run train.py as shipped; the others the patched tree
    assert spec.workdir.endswith("shipped" if mode in ("eager", "default") else "patched")

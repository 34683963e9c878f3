"""scripts/device-check.sh with --device cpu: it runs here, says what it skipped, and needs no
Docker SDK."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import FAKE_NANOGPT, ROOT, TEXT_INPUT, fake_nanogpt_protocol, records


def test_device_check_runs_on_the_cpu_and_names_what_it_skipped(tmp_path, fake_env):
    fake_env(step_ms={"*": 1.0})
    protocol = fake_nanogpt_protocol(tmp_path / "p.toml")
    out = tmp_path / "captures"
    # the local executor never needs the Docker SDK: here it cannot be imported at all
    blocked = tmp_path / "no-docker" / "docker"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('the Docker SDK is not installed')\n")
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(out)}
    env["MICAKIT_SITE"] = str(blocked.parent)
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "device-check.sh"), "--device", "cpu",
         "--nanogpt", str(FAKE_NANOGPT), "--input", str(TEXT_INPUT), "--protocol", str(protocol)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = dict(
        line[len("step ") :].split(": ", 1)
        for line in proc.stdout.splitlines()
        if line.startswith("step ")
    )
    assert steps["series"].startswith("ok")
    assert steps["verify"] == "ok"
    for name in ("card", "float16", "out-of-memory"):
        assert steps[name].startswith("skipped: --device cpu"), steps[name]
    assert steps["captures"].startswith("ok")
    # one timed round after the discarded run, every number labelled by the kit as usual
    runs = records(out / "series")
    timed = [r for r in runs if r.get("kind", "timed") == "timed" and r.get("round", 0) >= 1]
    assert timed and all(r["round"] == 1 for r in timed)
    summary = (out / "summary.md").read_text()
    assert "- verify: ok" in summary and "## " in summary
    # no copy of nanoGPT's code or the datasets stays among the captures
    assert not (out / "series" / "work").exists()

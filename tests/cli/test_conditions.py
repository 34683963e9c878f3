"""§5 Conditions through a whole series, with a scripted card in NVML's place (no GPU here)."""

from __future__ import annotations

import pandas as pd
import pytest

from kit.errors import ExitCode
from kit.telemetry import nvml
from kit.telemetry.nvml import CardInfo, GpuProcess, Sample
from tests.conftest import contender_args

INFO = CardInfo(
    "NVIDIA L4",
    "GPU-00000000-1111-2222-3333-444444444444",
    (8, 9),
    "550.54.15",
    "12.4",
    24 * 2**30,
    0,
)
THERMAL = 0x020  # sw_thermal_slowdown


class ScriptedCard:
    """Counts runs by the idle checks before them; the 4th run throttles, memory rises per run."""

    def __init__(self, foreign: bool = False) -> None:
        self.checks = 0
        self.foreign = foreign

    def info(self) -> CardInfo:
        return INFO

    def processes(self) -> list[GpuProcess]:
        self.checks += 1
        return [GpuProcess(4242, "python3", 2 * 2**30)] if self.foreign else []

    def memory_used_bytes(self) -> int:
        return (1 + self.checks) * 2**30

    def sample(self) -> Sample:
        throttled = self.checks == 4
        return Sample(
            sm_clock_mhz=1500 if throttled else 2040,
            mem_clock_mhz=6250,
            temperature_c=87 if throttled else 60,
            power_w=72.0,
            memory_used_bytes=self.memory_used_bytes(),
            utilization_gpu_pct=99,
            utilization_mem_pct=40,
            clock_event_reasons=THERMAL if throttled else 0,
        )

    def close(self) -> None:
        pass


def args(out, protocol, *extra):
    return contender_args(out, protocol, "--precision", "float32", *extra, device="cuda")


@pytest.mark.slow
def test_samples_give_peak_memory_and_flags(tmp_path, fast_protocol, fake_env, cli, monkeypatch):
    card = ScriptedCard()
    monkeypatch.setattr(nvml, "open_card", lambda *a: card)
    fake_env(step_ms={"*": 15.0})  # a window of 1.2 s: the 1 s sampler lands inside it
    out = tmp_path / "r"
    res = cli(*args(out, fast_protocol))
    assert res.exit_code == 0, res.output
    runs = pd.read_csv(out / "tables" / "runs.csv", keep_default_na=False)
    timed = runs[runs["kind"] == "timed"]
    assert (timed["peak_memory_bytes"].astype(float) > 0).all()
    flagged = timed[timed["flagged"].astype(str) == "True"]
    assert list(flagged["run_id"]) == [3]  # the 4th run of the series throttled
    assert "thermal clock event" in flagged["flag_reasons"].iloc[0]
    conf = (out / "tables" / "configurations.csv").read_text()
    assert "run 3 flagged" in conf
    # every run's raw samples are kept, and the tables come back from them alone
    assert (out / runs["log_dir"].iloc[1] / "samples.jsonl").exists()
    versions = (out / "versions.json").read_text()
    assert "GPU-00000000-1111-2222-3333-444444444444" in versions
    assert cli("verify", out).exit_code == 0


def test_a_busy_card_is_refused_naming_the_program(
    tmp_path, fast_protocol, fake_env, cli, monkeypatch
):
    monkeypatch.setattr(nvml, "open_card", lambda *a: ScriptedCard(foreign=True))
    fake_env(step_ms={"*": 2.0})
    res = cli(*args(tmp_path / "r", fast_protocol, "--refuse-busy"))
    assert res.exit_code == ExitCode.USER_ERROR
    assert "4242" in res.output and "python3" in res.output

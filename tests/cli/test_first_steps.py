"""A newcomer's first commands: the CPU smoke series named wherever a card is missing, the full
models on a CPU only on purpose, a refused start that leaves nothing behind, the shell's
completion of the protocol's models and precisions."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kit.cli.main import main
from kit.errors import ExitCode, UserError
from kit.telemetry import nvml
from tests.conftest import CONTENDER, STEADY_STEP_MS, TEXT_INPUT


def test_the_hint_for_a_machine_without_a_card_names_the_smoke_series(monkeypatch):
    pynvml = pytest.importorskip("pynvml")

    def no_card() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", no_card)
    with pytest.raises(UserError) as caught:
        nvml.open_card()
    assert "--smoke --device cpu" in (caught.value.fix or "")


def test_device_cpu_without_smoke_is_refused_with_its_fix_and_makes_no_folder(tmp_path, cli):
    out = tmp_path / "r"
    res = cli("series", "--out", out, "--device", "cpu", "--no-pytorch",
              "--contender", CONTENDER, "--executor", "local")  # fmt: skip
    assert res.exit_code == ExitCode.USER_ERROR, res.output
    assert "full-size models" in res.output
    assert "fix: add --smoke" in res.output and "--full-cpu" in res.output
    assert not out.exists()


def test_full_cpu_is_said_in_the_help(cli):
    said = " ".join(cli("series", "--help").output.split())
    assert "--full-cpu" in said and "With --device cpu and no --smoke" in said


def test_full_cpu_runs_the_full_models_and_its_rerun_script_says_so(
    tmp_path, fast_protocol, fake_env, cli
):
    fake_env(step_ms=STEADY_STEP_MS)
    out = tmp_path / "r"
    res = cli("series", "--out", out, "--protocol", fast_protocol, "--device", "cpu",
              "--full-cpu", "--no-pytorch", "--contender", CONTENDER, "--executor", "local",
              "--model", "shakespeare-char", "--precision", "float32",
              "--input", TEXT_INPUT)  # fmt: skip
    assert res.exit_code == 0, res.output
    options = json.loads((out / "manifest.json").read_text())["options"]
    assert options["full_cpu"] is True and options["smoke"] is False
    assert "--device cpu --full-cpu" in (out / "rerun.sh").read_text()


@pytest.mark.parametrize(
    "wrong, said",
    [
        (("--model", "bogus"), "unknown model 'bogus'"),
        (("--precision", "float8"), "unknown precision 'float8'"),
        # refused after the folder was made: the nanoGPT checkout named is not there
        (("--nanogpt", "/nonexistent/nanoGPT"), "nanoGPT"),
    ],
)
def test_a_start_refused_before_its_first_run_leaves_nothing_behind(
    tmp_path, fast_protocol, fake_env, cli, wrong, said
):
    fake_env(step_ms=STEADY_STEP_MS)
    out = tmp_path / "r"
    res = cli("series", "--out", out, "--protocol", fast_protocol, "--smoke", "--device", "cpu",
              "--contender", CONTENDER, "--executor", "local", "--input", TEXT_INPUT,
              *wrong)  # fmt: skip
    assert res.exit_code == ExitCode.USER_ERROR, res.output
    assert said in res.output
    assert not out.exists(), sorted(p.name for p in out.iterdir())


def _completed(*words: str) -> list[str]:
    env = {"_MICAKIT_COMPLETE": "bash_complete", "COMP_WORDS": " ".join(["micakit", *words]),
           "COMP_CWORD": str(len(words))}  # fmt: skip
    res = CliRunner().invoke(main, [], prog_name="micakit", env=env)
    # bash_complete answers "plain,VALUE" a line
    return [line.split(",", 1)[1] for line in res.output.splitlines() if "," in line]


def test_the_shell_completes_the_protocols_models_and_precisions():
    assert _completed("series", "--model", "") == ["shakespeare-char", "gpt2-small", "gpt2-medium"]
    assert _completed("series", "--model", "gpt2-s") == ["gpt2-small"]
    assert _completed("series", "--precision", "") == ["float32", "bfloat16", "float16"]
    assert _completed("correctness", "--model", "sh") == ["shakespeare-char"]
    assert _completed("correctness", "--precision", "b") == ["bfloat16"]


def test_version_names_the_commit_and_the_protocols_hash_and_ends_as_rerun_sh_expects(cli):
    import hashlib

    from kit import __version__, kit_commit
    from kit.protocol.load import DEFAULT_PATH

    said = cli("--version").output.splitlines()
    shipped = hashlib.sha256(DEFAULT_PATH.read_bytes()).hexdigest()
    assert said == [
        f"micakit, version {__version__}",
        f"commit {kit_commit()}",
        f"protocol sha256 {shipped}",
    ]

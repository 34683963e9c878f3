"""kit.telemetry.kernels: nsys kernel tables, the families file, PyTorch's attention and SDPA backends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from kit.errors import UserError
from kit.executors import programs
from kit.telemetry.kernels import (
    KERNEL_TIME_LABEL,
    KernelTableError,
    SdpaProbeError,
    attention_kind,
    classify,
    group_families,
    load_families,
    nsys_commands,
    parse_nsys_kernsum,
    parse_sdpa_probe,
)

ROOT = Path(__file__).parents[3]
NSYS = ROOT / "tests" / "fixtures" / "nsys"
FAMILIES = ROOT / "benchmarks" / "NanoGpt" / "families.tsv"


def _table(name: str) -> pd.DataFrame:
    return parse_nsys_kernsum((NSYS / name).read_text())


# -- parse_nsys_kernsum ---------------------------------------------------------------------------


def test_noise_before_the_header_and_names_with_commas_and_quotes() -> None:
    table = _table("kernsum_eager_float32.txt")
    assert table.columns.tolist() == ["name", "total_time_ns", "instances"]
    assert len(table) == 15
    assert table.iloc[0].tolist() == ["ampere_sgemm_128x64_tn", 2415803127, 28800]
    adam = table.iloc[4]["name"]
    assert adam.startswith("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<")
    assert "FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, bool" in adam
    assert str(table["total_time_ns"].dtype) == "int64"


def test_unquoted_header_with_quoted_names() -> None:
    table = _table("kernsum_default_bfloat16.txt")
    assert len(table) == 11
    flash = table[table["name"].str.contains("flash_fwd_kernel")].iloc[0]
    assert flash["instances"] == 4800 and flash["total_time_ns"] == 974819231
    assert flash["name"].endswith("(pytorch_flash::Flash_fwd_params)")


def test_csv_escaped_quotes_inside_a_name() -> None:
    text = (
        "Processing [r.sqlite] with [cuda_gpu_kern_sum.py]... \n\n"
        '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)",'
        '"StdDev (ns)","Name"\n'
        '"100.0","1,234","2","617.0","617.0","600","634","24.0",'
        '"void k<""quoted"", 2>(float, int)"\n'
    )
    table = parse_nsys_kernsum(text)
    assert table.iloc[0].tolist() == ['void k<"quoted", 2>(float, int)', 1234, 2]


def test_the_older_gpukernsum_report() -> None:
    table = _table("gpukernsum_2021.txt")
    assert table["instances"].tolist() == [19200, 2400]
    assert table["total_time_ns"].sum() == 1204330112 + 735112113


def test_other_time_units_become_nanoseconds() -> None:
    text = '"Time (%)","Total Time (us)","Instances","Name"\n"100","2.5","3","k"\n'
    assert parse_nsys_kernsum(text)["total_time_ns"].tolist() == [2500]


def test_the_table_ends_at_the_first_blank_line() -> None:
    api_table = (
        '"Time (%)","Total Time (ns)","Num Calls","Name"\n"100","9","1","cudaLaunchKernel"\n'
    )
    text = (NSYS / "kernsum_cudnn.txt").read_text() + "\n\n" + api_table
    assert len(parse_nsys_kernsum(text)) == 3


def test_a_malformed_table_is_a_kernel_table_error() -> None:
    with pytest.raises(KernelTableError, match="row 2 has 5 fields where its header has 9"):
        _table("kernsum_truncated.txt")
    with pytest.raises(KernelTableError, match="no CUDA kernel.*does not contain CUDA kernel"):
        _table("kernsum_skipped.txt")
    with pytest.raises(KernelTableError, match="no kernel table.*nsys: command not found"):
        parse_nsys_kernsum("bash: nsys: command not found\n")
    with pytest.raises(KernelTableError, match="Instances is 'many'"):
        parse_nsys_kernsum('"Time (%)","Total Time (ns)","Instances","Name"\n"1","2","many","k"\n')
    assert not issubclass(KernelTableError, UserError)


def test_a_header_without_rows_is_an_empty_table() -> None:
    table = parse_nsys_kernsum('"Time (%)","Total Time (ns)","Instances","Name"\n')
    assert table.empty and table.columns.tolist() == ["name", "total_time_ns", "instances"]


# -- nsys_commands --------------------------------------------------------------------------------


def test_nsys_commands() -> None:
    profile, stats = nsys_commands(["python", "-u", "train.py", "--compile=False"], "out/prof")
    assert profile[:4] == ["nsys", "profile", "--output", "out/prof"]
    assert profile[-4:] == ["python", "-u", "train.py", "--compile=False"]
    assert ["--force-overwrite", "true"] == profile[4:6] and "--trace" in profile
    assert profile[profile.index("--trace") + 1] == "cuda"
    assert profile[profile.index("--cuda-graph-trace") + 1] == "node"
    assert stats[:6] == ["nsys", "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv"]
    assert stats[-1] == "out/prof.nsys-rep"
    old = nsys_commands(["./mica"], Path("r.nsys-rep"), nsys="/opt/nsys", report="gpukernsum")
    assert old[0][0] == old[1][0] == "/opt/nsys"
    assert old[0][3] == "r" and old[1][-1] == "r.nsys-rep" and "gpukernsum" in old[1]


# -- families -------------------------------------------------------------------------------------


def test_the_shipped_families_file_groups_both_sides() -> None:
    families = load_families(FAMILIES)
    assert len(families) > 10
    eager = _table("kernsum_eager_float32.txt")
    labels = dict(zip(eager["name"].str[:24], classify(eager["name"], families), strict=True))
    assert labels["ampere_sgemm_128x64_tn"] == "matmul"
    assert labels["fmha_cutlassB_f32_aligne"] == "attention"  # not matmul, though "cutlass"
    assert "other" not in labels.values()
    compiled = group_families(_table("kernsum_default_bfloat16.txt"), families)
    shares = dict(zip(compiled["family"], compiled["share"], strict=True))
    assert compiled["family"].iloc[0] == "matmul"
    assert shares["loss"] == pytest.approx(0.039, abs=1e-3)  # the log-softmax is the loss's
    assert set(shares) >= {"attention", "layernorm", "elementwise", "optimizer", "embedding"}
    contender = classify(_table("kernsum_contender.txt")["name"], families)
    assert contender.tolist() == [
        "matmul",
        "attention",
        "optimizer",
        "layernorm",
        "loss",
        "elementwise",
    ]


def test_first_match_wins_and_unmatched_is_other(tmp_path: Path) -> None:
    path = tmp_path / "families.tsv"
    path.write_text(
        "# a comment\n\n"
        "fmha\tattention\n"
        "cutlass|gemm\tmatmul\n"
        "  # an indented comment\n"
        "SOFTMAX\tsoftmax\n"
    )
    families = load_families(path)
    table = pd.DataFrame(
        {
            "name": ["fmha_cutlassF_x", "cutlass_gemm", "softmax_warp_forward", "mystery", "gemm"],
            "total_time_ns": [50, 30, 10, 10, 100],
            "instances": [1, 2, 3, 4, 5],
        }
    )
    grouped = group_families(table, families)
    assert grouped.to_dict("list") == {
        "family": ["matmul", "attention", "other", "softmax"],  # ties by name
        "total_time_ns": [130, 50, 10, 10],
        "instances": [7, 1, 4, 3],
        "kernels": [2, 1, 1, 1],
        "share": [0.65, 0.25, 0.05, 0.05],
    }
    assert grouped.attrs["label"] == KERNEL_TIME_LABEL == "profiled run's kernel time"


def test_a_bad_pattern_is_a_user_error_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "families.tsv"
    path.write_text("# rules\ngemm\tmatmul\nflash_(fwd\tattention\n")
    with pytest.raises(UserError) as caught:
        load_families(path)
    assert f"{path}:3" in caught.value.message and "flash_(fwd" in caught.value.message
    assert caught.value.fix
    path.write_text("gemm matmul\n")
    with pytest.raises(UserError, match=":1: expected 'pattern<TAB>family'"):
        load_families(path)
    with pytest.raises(UserError, match="cannot read the families file"):
        load_families(tmp_path / "missing.tsv")


# -- attention ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "kind"),
    [
        ("kernsum_eager_float32.txt", "memory-efficient"),
        ("gpukernsum_2021.txt", "memory-efficient"),
        ("kernsum_default_bfloat16.txt", "flash"),
        ("kernsum_cudnn.txt", "cudnn"),
        ("kernsum_math_path.txt", "math"),
        ("kernsum_contender.txt", "unknown"),
    ],
)
def test_attention_kind(fixture: str, kind: str) -> None:
    assert attention_kind(_table(fixture)) == kind


def test_attention_kind_edge_cases() -> None:
    def kind(*names: str) -> str:
        return attention_kind(pd.DataFrame({"name": list(names)}))

    # The loss's log-softmax beside products is not the math path.
    assert kind("ampere_sgemm_128x64_tn", "cunn_SoftMaxForward<LogSoftMaxForwardEpilogue>") == (
        "unknown"
    )
    assert kind("triton_per_fused__softmax_1", "triton_tem_fused_bmm_0") == "math"
    assert kind("softmax_warp_forward") == "unknown"  # no product beside it
    assert kind("pytorch_flash::flash_fwd_kernel", "fmha_cutlassB_f32") == "flash+memory-efficient"


# -- SDPA backends --------------------------------------------------------------------------------


def test_sdpa_probe_runs_here_and_parses(tmp_path) -> None:
    pytest.importorskip("torch")
    # as in a measured image: the probe and nothing else of the kit on the path
    programs.ship(["telemetry/sdpa_probe.py"], tmp_path)
    run = subprocess.run(
        [sys.executable, "-m", "kit.telemetry.sdpa_probe"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={**os.environ, **programs.env(str(tmp_path))},
    )
    backends = parse_sdpa_probe("some warning\n" + run.stdout)
    assert backends.torch_version
    assert backends.math is True  # torch's default; nothing here turned it off
    assert set(backends.to_dict()) >= {"flash", "mem_efficient", "math", "cudnn"}


def test_sdpa_probe_output_from_an_old_torch() -> None:
    out = (
        'MICAKIT_SDPA_BACKENDS {"cuda_available": true, "cudnn_sdp_enabled": null, '
        '"flash_sdp_enabled": true, "is_flash_attention_available": null, '
        '"math_sdp_enabled": true, "mem_efficient_sdp_enabled": false, "torch_version": "2.1.2"}\n'
    )
    backends = parse_sdpa_probe(out)
    assert backends.cudnn is None and backends.mem_efficient is False and backends.flash is True


def test_sdpa_probe_failures() -> None:
    with pytest.raises(SdpaProbeError, match="ModuleNotFoundError"):
        parse_sdpa_probe("Traceback ...\nModuleNotFoundError: No module named 'torch'\n")
    with pytest.raises(SdpaProbeError, match="unreadable"):
        parse_sdpa_probe("MICAKIT_SDPA_BACKENDS {not json\n")

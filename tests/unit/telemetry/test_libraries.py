"""The library-open table of amendment 2, from glibc's own `LD_DEBUG=libs` files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kit.telemetry import libraries
from kit.telemetry.libraries import (
    is_nvidia,
    parse_ld_debug,
    read_library_dir,
    tables_by_configuration,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ld_debug"


def test_python_ctypes_opens_libz_and_a_library_by_full_path() -> None:
    # recorded in micakit-base:bookworm: ctypes.CDLL("libz.so.1"), a CDLL by full path, and a
    # search for libnvrtc.so.12 that fails
    table = read_library_dir(FIXTURES / "python_ctypes")
    paths = {lib.path for lib in table.opened}
    assert "/lib/x86_64-linux-gnu/libz.so.1" in paths
    assert "/usr/lib/x86_64-linux-gnu/libbz2.so.1.0" in paths  # opened by path: no search line
    assert table.processes == 1
    assert table.searched == ("libnvrtc.so.12",)  # searched, never opened
    assert not table.nvrtc_opened
    assert table.nvidia == ()


def test_mica_program_that_compiles_through_nvrtc() -> None:
    table = read_library_dir(FIXTURES / "mica_nvrtc")
    names = {lib.name for lib in table.nvidia}
    assert names == {
        "libcublas.so.12",
        "libcublasLt.so.12",
        "libcuda.so.1",
        "libnvidia-ptxjitcompiler.so.1",
        "libnvrtc.so.12",
        "libnvrtc-builtins.so.12.8",
    }
    assert table.nvrtc_opened
    assert table.searched == ()
    cuda = next(lib for lib in table.opened if lib.name == "libcuda.so.1")
    assert cuda.path == "/usr/lib/x86_64-linux-gnu/libcuda.so.1"  # the host driver's, §8


def test_precompiled_program_and_a_helper_process() -> None:
    table = read_library_dir(FIXTURES / "mica_precompiled")
    assert table.processes == 2
    assert not table.nvrtc_opened
    libc = next(lib for lib in table.opened if lib.name == "libc.so.6")
    assert libc.processes == 2  # counted once per process
    assert "libnvidia-ml.so.1" in {lib.name for lib in table.nvidia}


def test_a_vendored_nvrtc_counts() -> None:
    text = "        12:\tcalling init: /opt/venv/lib/torch/lib/libnvrtc-b51b459d.so.12\n"
    assert parse_ld_debug(text).nvrtc_opened


def test_one_file_parsed_from_text_is_one_process() -> None:
    text = (FIXTURES / "python_ctypes" / "ld.1").read_text()
    table = parse_ld_debug(text)
    assert table.processes == 1
    assert table.opened == read_library_dir(FIXTURES / "python_ctypes").opened


def test_an_empty_folder_is_a_table_of_nothing(tmp_path: Path) -> None:
    table = read_library_dir(tmp_path)
    assert table.processes == 0 and table.opened == () and not table.nvrtc_opened


def test_a_torn_last_line_is_ignored() -> None:
    text = "         7:\tcalling init: /lib/x86_64-linux-gnu/libz.so.1\n         7:\tcalli"
    assert [lib.name for lib in parse_ld_debug(text).opened] == ["libz.so.1"]


@pytest.mark.parametrize(
    ("name", "nvidia"),
    [
        ("libcuda.so.1", True),
        ("libcuda.so", True),
        ("libcudart.so.12", True),
        ("libcublasLt.so.12", True),
        ("libcudnn.so.9", True),
        ("libcudnn_ops.so.9", True),
        ("libnvrtc.so.12", True),
        ("libnvrtc-builtins.so.12.8", True),
        ("libnvrtc-builtins-7237cb5d.so.13.0", True),  # auditwheel's name for a vendored copy
        ("libcudart-9335f6a2.so.12", True),
        ("libnvidia-ml.so.1", True),
        ("libnvidia-ptxjitcompiler.so.565.57.01", True),
        ("libnccl.so.2", True),
        ("libnvJitLink.so.12", True),
        ("libcusparseLt.so.0", True),
        ("libcufft.so.11", True),
        ("libnvToolsExt.so.1", True),
        ("/usr/lib/x86_64-linux-gnu/libcurand.so.10", True),
        ("libz.so.1", False),
        ("libcudaextra.so.1", False),
        ("libc.so.6", False),
        ("libgomp.so.1", False),
    ],
)
def test_nvidia_names(name: str, nvidia: bool) -> None:
    assert is_nvidia(name) is nvidia


def test_tables_by_configuration_and_their_lines() -> None:
    tables = tables_by_configuration(
        {"mica-float32": FIXTURES / "mica_precompiled", "mica-bfloat16": FIXTURES / "mica_nvrtc"}
    )
    summary = libraries.summary_lines(tables)
    assert summary[2].startswith("| mica-float32 | libcublas.so.12, libcublasLt.so.12, libcuda")
    assert summary[2].endswith("| no |")
    assert summary[3].endswith("| yes |")
    tsv = libraries.tsv_lines(tables)
    assert tsv[0] == "configuration\tlibrary\tpath\tnvidia\tprocesses"
    assert "mica-bfloat16\tlibnvrtc.so.12\t/opt/mica/lib/libnvrtc.so.12\tyes\t1" in tsv
    record = tables["mica-bfloat16"].to_record()
    assert json.loads(json.dumps(record)) == record
    assert record["schema_version"] == libraries.SCHEMA_VERSION and record["nvrtc_opened"]

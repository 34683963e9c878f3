"""§8 told whole, from a small recorded footprint: what each measured image holds beyond its
side's minimum, with sizes, the ratio of the two measured sizes, and the ratio without them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from kit.executors.docker import footprint
from kit.report.footprint_report import footprint_lines, measured

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "footprint"


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "footprint")
    return tmp_path


def files(side: str, base: bool = False) -> pd.DataFrame:
    folder = FIXTURE / side / ("base" if base else "")
    return pd.read_csv(folder / "files.tsv", sep="\t", keep_default_na=False)


def size(side: str) -> int:
    return json.loads((FIXTURE / side / "footprint.json").read_text())["size_bytes"]


def added(side: str, minimum: str) -> pd.DataFrame:
    """The image's entries beyond its base and its minimum folder, by bytes grown (pandas)."""
    both = files(side).merge(
        files(side, True)[["path", "size_bytes"]], on="path", how="left", suffixes=("", "_base")
    )
    both["grown"] = both["size_bytes"] - both["size_bytes_base"].fillna(0)
    new = both["size_bytes_base"].isna() | (both["grown"] > 0)
    keep = new & (both["type"] != "dir") & ~both["path"].str.startswith(minimum + "/")
    return both[keep & (both["path"] != minimum)]


def test_pytorch_image_beyond_pip_torch_numpy_is_the_compiler_and_nanogpt():
    extra = {
        a.what: a
        for a in footprint.beyond_minimum(
            "pytorch",
            footprint.read_files(FIXTURE / "pytorch" / "files.tsv"),
            footprint.read_files(FIXTURE / "pytorch" / "base" / "files.tsv"),
        )
    }
    expected = added("pytorch", "/opt/venv")
    nanogpt = expected[expected["path"].str.startswith("/opt/nanogpt/")]
    rest = expected[~expected["path"].str.startswith("/opt/nanogpt/")]
    assert set(extra) == {"nanoGPT's files and the kit's patch (§4)", "Debian packages"}
    assert extra["nanoGPT's files and the kit's patch (§4)"].size_bytes == nanogpt["grown"].sum()
    assert extra["nanoGPT's files and the kit's patch (§4)"].files == len(nanogpt)
    debian = extra["Debian packages"]
    assert debian.size_bytes == rest["grown"].sum() and debian.files == len(rest)
    # the compiler torch.compile needs, named by the packages' own lists in the image
    assert {"g++", "g++-12", "libc6-dev"} <= set(debian.packages)
    assert "libc6" not in debian.packages  # the base's own package is the minimum
    # nothing pip brought, nothing of the base unchanged
    assert not any(p.startswith("/opt/venv") for p in rest["path"])


def test_the_contender_image_holds_nothing_beyond_its_minimum():
    assert (
        footprint.beyond_minimum(
            "contender",
            footprint.read_files(FIXTURE / "contender" / "files.tsv"),
            footprint.read_files(FIXTURE / "contender" / "base" / "files.tsv"),
        )
        == []
    )


def test_the_report_tells_both_ratios_labelled(recorded):
    text = "\n".join(footprint_lines(recorded))
    p, m = size("pytorch"), size("contender")
    extra_p = added("pytorch", "/opt/venv")["grown"].sum()
    assert "## Footprint (§8)" in text
    assert f"Footprint ratio (§8, the two measured sizes): PyTorch's {p / 2**20:,.1f} MiB" in text
    assert f"= {p / m:.2f}" in text
    without = (p - extra_p) / m
    assert f"(not §8's ratio; shown so that the additions can be weighed): {without:.2f}" in text
    assert without < p / m
    assert "g++" in text and "libc6-dev" in text and "nanoGPT's files" in text
    assert "libcuda comes from the host's NVIDIA driver in both images" in text
    for m_ in measured(recorded):
        assert m_.image in text


def test_without_the_bases_file_list_the_additions_are_not_told(recorded):
    shutil.rmtree(recorded / "footprint" / "pytorch" / "base")
    text = "\n".join(footprint_lines(recorded))
    assert "not told: its base's file list was not recorded" in text
    assert "Footprint ratio (§8" in text and "not §8's ratio" not in text


def test_a_series_without_images_says_nothing_of_footprint(tmp_path):
    assert footprint_lines(tmp_path) == []

"""kit.report.merge: several real series (the fake contender, D4's contract) merged into one release."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from kit.cli.main import main
from kit.errors import UserError
from kit.report import merge, tables
from kit.results.store import ResultsDir
from tests.conftest import contender_args, fake_series, write_protocol

pytestmark = pytest.mark.slow  # the module's four series take seconds to make


def _series(root: Path, name: str, protocol: Path, precision: str, **fake) -> Path:
    out = fake_series(root, name, contender_args("OUT", protocol, "--precision", precision), **fake)
    # rule 6: no correctness check ran, so the times are shown only in a preview
    res = CliRunner().invoke(main, ["publish", str(out), "--preview"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Series made once for the module: three under protocol A, one under B, one out of memory."""
    root = tmp_path_factory.mktemp("series")
    a = write_protocol(root / "a.toml", runs=2)
    b = write_protocol(root / "b.toml", runs=3)  # another protocol file: another hash
    return {
        "f32": _series(root, "f32", a, "float32"),
        "f16": _series(root, "f16", a, "float16", step_ms={"*": 2.0, "mica-strict": 3.0}),
        # the same configuration as f32, slower: a second machine of a fleet
        "f32slow": _series(root, "f32slow", a, "float32", step_ms={"*": 3.0}),
        "other": _series(root, "other", b, "float32"),
        # the half build runs out of memory in its first timed run (amendment 8)
        "oom16": _series(root, "oom16", a, "float16", events={"mica-half-intermediates#2": "oom"}),
    }


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _hash(d: Path) -> str:
    return json.loads((d / "manifest.json").read_text())["protocol_sha256"]


def test_release_holds_every_rows_recomputed_in_order_with_its_source(made, tmp_path):
    out = tmp_path / "release"
    # named float16 first: the release orders by card, model, then the protocol's precisions
    written = merge.merge([made["f16"], made["f32"]], out)
    assert written == [out / "release.csv", out / "release.md"]
    table = pd.read_csv(out / "release.csv", keep_default_na=False, na_values=[""])
    assert list(table.columns[:5]) == ["schema_version", "source", "card", "model", "precision"]
    assert list(zip(table["precision"], table["contender_build"], table["source"])) == [
        ("float32", "mica", str(made["f32"])),
        ("float16", "mica-half-intermediates", str(made["f16"])),
        ("float16", "mica-strict", str(made["f16"])),
    ]
    # every number is the recomputation from the raw logs, to the last digit
    for d in (made["f32"], made["f16"]):
        fresh = tables.tables(ResultsDir.open(d)).comparison
        mine = table[table["source"] == str(d)].drop(columns="source").reset_index(drop=True)
        for col in (
            "contender_runs",
            "contender_median_step_s",
            "contender_min_step_s",
            "contender_max_step_s",
            "verdict",
        ):
            assert list(mine[col]) == list(fresh[col]), col
    md = (out / "release.md").read_text()
    assert f"sha256 {_hash(made['f32'])}" in md
    assert str(made["f16"]) in md and str(made["f32"]) in md
    assert "a 10.7-million-parameter model" in md  # §9: M1's numbers travel with its size
    assert "mica-strict (secondary)" in md
    assert "card cpu" in md and "(all in versions.json)" in md  # rule 4: every version


def test_published_tables_are_never_trusted(made, tmp_path):
    d = _copy(made["f32"], tmp_path / "f32")
    published = d / "tables" / "comparison.csv"
    doctored = pd.read_csv(published)
    doctored["contender_median_step_s"] = 0.000001
    doctored["verdict"] = "faster"
    doctored.to_csv(published, index=False)
    merge.merge([d], tmp_path / "release")
    table = pd.read_csv(tmp_path / "release" / "release.csv")
    fresh = tables.tables(ResultsDir.open(made["f32"])).comparison
    assert table["contender_median_step_s"][0] == fresh["contender_median_step_s"][0]
    assert table["verdict"][0] == fresh["verdict"][0] != "faster"


def test_different_protocols_are_refused_naming_both_hashes(made, tmp_path):
    out = tmp_path / "release"
    with pytest.raises(UserError, match="different protocol files") as e:
        merge.merge([made["f32"], made["other"]], out)
    message = str(e.value)
    assert _hash(made["f32"]) != _hash(made["other"])
    for d in ("f32", "other"):
        assert f"{made[d]} has protocol_sha256 {_hash(made[d])[:12]}" in message
    assert "§3 rule 1" in e.value.fix
    assert not out.exists()


def test_different_kit_versions_are_refused_naming_each(made, tmp_path):
    d = _copy(made["f16"], tmp_path / "f16")
    _edit_json(d / "manifest.json", lambda m: m.update(kit_version="9.9.9"))
    with pytest.raises(UserError, match="different kit versions") as e:
        merge.merge([made["f32"], d], tmp_path / "release")
    assert f"{made['f32']} has kit_version 0.1.0" in str(e.value)
    assert f"{d} has kit_version 9.9.9" in str(e.value)


def test_two_series_of_one_card_model_precision_are_refused(made, tmp_path):
    again = _copy(made["f32"], tmp_path / "again")
    with pytest.raises(UserError) as e:
        merge.merge([made["f32"], again], tmp_path / "release")
    assert str(e.value).startswith(
        f"{made['f32']} and {again} both measured cpu shakespeare-char float32"
    )
    assert "leave one" in e.value.fix


def test_an_unfinished_series_is_refused(made, tmp_path):
    d = _copy(made["f32"], tmp_path / "f32")
    lines = (d / "runs.jsonl").read_text().splitlines(keepends=True)
    (d / "runs.jsonl").write_text("".join(lines[:-1]))
    # stopped before its last run: neither its record nor its folder (one left, finished, with
    # no record, is a dropped record: kit.results.audit)
    shutil.rmtree(d / json.loads(lines[-1])["log_dir"])
    planned = len(json.loads((d / "plan.json").read_text())["order"])
    with pytest.raises(UserError, match=f"has not finished: 1 of its {planned} planned runs") as e:
        merge.merge([d], tmp_path / "release")
    assert f"micakit series --resume {d}" in e.value.fix


def test_a_configuration_out_of_memory_is_finished_and_published_as_a_deficit(made, tmp_path):
    merge.merge([made["f32"], made["oom16"]], tmp_path / "release")
    table = pd.read_csv(tmp_path / "release" / "release.csv", keep_default_na=False)
    half = table[table["contender_build"] == "mica-half-intermediates"]
    assert list(half["verdict"]) == ["no verdict: out of memory"]  # its row stays (rule 5)
    assert len(table) == 3


def test_rows_are_ordered_by_card(made, tmp_path):
    def relabel(src: Path, card: str) -> Path:
        d = _copy(src, tmp_path / card.replace(" ", "-"))
        for c in json.loads((d / "plan.json").read_text())["configurations"]:
            assert c["card"] == "cpu"
        _edit_json(d / "plan.json", lambda p: [c.update(card=card) for c in p["configurations"]])
        _edit_json(d / "manifest.json", lambda m: m["series"].update(card=card))
        return d

    l4 = relabel(made["f32"], "NVIDIA L4")
    rtx = relabel(made["f16"], "NVIDIA GeForce RTX 4090")
    merge.merge([l4, rtx], tmp_path / "release")
    table = pd.read_csv(tmp_path / "release" / "release.csv")
    assert list(table["card"]) == ["NVIDIA GeForce RTX 4090"] * 2 + ["NVIDIA L4"]
    md = (tmp_path / "release" / "release.md").read_text()
    assert md.startswith("# TR-2 release: 2 series (NVIDIA L4, NVIDIA GeForce RTX 4090)")


def test_the_release_never_overwrites_and_names_each_directory_once(made, tmp_path):
    out = tmp_path / "release"
    out.mkdir()
    (out / "keep").write_text("x")
    with pytest.raises(UserError, match="already exists"):
        merge.merge([made["f32"]], out)
    assert (out / "keep").read_text() == "x" and len(list(out.iterdir())) == 1
    with pytest.raises(UserError, match="named twice"):
        merge.merge([made["f32"], made["f32"]], tmp_path / "new")
    with pytest.raises(UserError, match="no results directory"):
        merge.merge([], tmp_path / "new")
    with pytest.raises(UserError, match="is not a results directory"):
        merge.merge([tmp_path], tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_a_development_build_is_labelled_preparation_in_the_release(made, tmp_path):
    d = _copy(made["f32"], tmp_path / "dev")
    _edit_json(d / "versions.json", lambda v: v["contender"].update(build_kind="development"))
    merge.merge([d], tmp_path / "release")
    md = (tmp_path / "release" / "release.md").read_text()
    assert f"- {d}: preparation (a development build, rule 9)" in md  # rule 9
    # step times keep their three decimals in Markdown: median, then range
    assert re.search(r"\| \d+\.\d{3} +\| \d+\.\d{3}–\d+\.\d{3} ", md), md


def _machine(src: Path, dest: Path, uuid: str) -> Path:
    """`src` as if measured on an L4 of its own: the card's name and its identity (NVML)."""
    d = _copy(src, dest)
    _edit_json(d / "plan.json", lambda p: [c.update(card="NVIDIA L4") for c in p["configurations"]])
    _edit_json(d / "manifest.json", lambda m: m["series"].update(card="NVIDIA L4"))
    card = {"name": "NVIDIA L4", "uuid": uuid, "serial": f"SN-{uuid}", "vbios_version": "95.04"}
    _edit_json(d / "versions.json", lambda v: v.update(card={**card, "driver_version": "570.1"}))
    return d


def test_machines_of_one_card_name_merge_a_row_each_with_the_spread_between_and_within(
    made, tmp_path
):
    fleet = tmp_path / "fleet"
    one = _machine(made["f32"], fleet / "machine-1", "GPU-1111")
    two = _machine(made["f32slow"], fleet / "machine-2", "GPU-2222")
    machines = [
        {
            "directory": "machine-1",
            "zone": "us-central1-a",
            "instance_type": "g2-standard-8",
            "usd": 1.5,
        },
        {
            "directory": "machine-2",
            "zone": "europe-west4-b",
            "instance_type": "g2-standard-8",
            "usd": 2.25,
        },
    ]
    (fleet / "fleet.json").write_text(json.dumps({"schema_version": 1, "machines": machines}))
    merge.merge([one, two], tmp_path / "release")
    table = pd.read_csv(tmp_path / "release" / "release.csv", keep_default_na=False)
    assert list(table.columns[:3]) == ["schema_version", "source", "machine"]
    assert list(zip(table["machine"], table["source"])) == [
        ("GPU-1111", str(one)),
        ("GPU-2222", str(two)),
    ]
    md = (tmp_path / "release" / "release.md").read_text()
    assert "## Machines" in md
    comparison = md.split("## Comparison (D1)")[1]
    assert "| card " in comparison and "| machine " in comparison and "| GPU-2222 " in comparison
    assert "- machines: 2; rented through SkyPilot for $3.75 in all (fleet.json)" in md
    row = next(line for line in md.splitlines() if "europe-west4-b" in line)  # the machines' table
    for cell in (
        str(two),
        "GPU-2222",
        "SN-GPU-2222",
        "95.04",
        "570.1",
        "g2-standard-8",
        "europe-west4-b",
        "$2.25",
    ):
        assert cell in row
    spread = next(
        line for line in md.splitlines() if line.startswith("| NVIDIA L4 ") and "| 2 " in line
    )
    cells = [c.strip() for c in spread.strip("|").split("|")]
    between, within = float(cells[5]), float(cells[6])  # the contender's, in percent
    m1 = table["contender_median_step_s"]
    assert between == pytest.approx(
        round(abs(m1[1] - m1[0]) / ((m1[0] + m1[1]) / 2) * 100, 2), abs=0.01
    )
    assert 0 <= within and between > 10  # 2.0 against 3.0 ms a step


def test_the_same_card_twice_is_still_refused(made, tmp_path):
    one = _machine(made["f32"], tmp_path / "one", "GPU-1111")
    again = _machine(made["f32slow"], tmp_path / "again", "GPU-1111")
    with pytest.raises(UserError, match="on one card") as e:
        merge.merge([one, again], tmp_path / "release")
    assert "leave one" in e.value.fix

"""Only what the protocol allows is published: a configuration's state, rule 6 and the preview,
the cards the protocol names, and §9's wording, on series made with the fakes (D4's contract)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from kit.cli.main import main
from kit.errors import ExitCode, UserError
from kit.protocol.load import FILES
from kit.report import html_sections, merge, overview, states, tables
from kit.results.documents import Plan
from kit.results.planned import PlannedRun
from kit.results.store import ResultsDir
from tests.cli.test_html_report import parse
from tests.conftest import (
    CONTENDER,
    contender_args,
    fake_nanogpt_protocol,
    fake_series,
    pytorch_args,
    records,
    write_protocol,
)

pytestmark = pytest.mark.slow  # the module's series take half a minute to make

M1_SIZE = "a 10.7-million-parameter model with a 256-character context"
KERNELS = (
    "Mica writes every kernel in its intermediate language; Dragon’s NVIDIA provider renders it "
    "as CUDA C, and NVIDIA’s NVRTC compiles it to the card’s machine code; matrix products run "
    "in cuBLAS."
)
VERDICT_WORD = re.compile(r"\b(faster|level|slower)\b", re.I)


def invoke(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Series made once for the module, each with the fault it is named after."""
    root = tmp_path_factory.mktemp("publication")
    beside = root / "protocol"
    beside.mkdir()
    for name in ("families.tsv", "train.patch", "gpt2-shakespeare.py"):
        shutil.copyfile(FILES / name, beside / name)  # as benchmarks/NanoGpt/ holds them
    # a wide cross-check tolerance: these series test states, and two busy cores skew clocks
    three = write_protocol(beside / "protocol.toml", runs=3, tolerance=0.5)
    fake_torch = fake_nanogpt_protocol(root / "torch.toml", runs=3)
    drift = write_protocol(root / "drift.toml", runs=3, tolerance=0.10)
    contender = contender_args(
        Path("OUT"), three, "--precision", "float32", "--precision", "float16"
    )
    contender = ["OUT" if str(a) == "OUT" else a for a in contender]

    def only(protocol: Path) -> list:
        args = contender_args(Path("OUT"), protocol, "--precision", "float32")
        return ["OUT" if str(a) == "OUT" else a for a in args]

    both = ["OUT" if str(a) == "OUT" else a for a in pytorch_args(Path("OUT"), fake_torch)]
    return {
        # mica-strict out of memory at its 3rd start: after one timed run (amendment 8)
        "oom": fake_series(root, "oom", contender, events={"mica-strict#3": "oom"}),
        # max-autotune, the fastest by its times, out of memory after one timed run
        "torch": fake_series(
            root,
            "torch",
            [*both, "--contender", CONTENDER],
            step_ms={
                "eager": 4.0,
                "default": 3.0,
                "reduce-overhead": 2.5,
                "max-autotune": 1.5,
                "mica": 2.0,
            },
            events={"max-autotune#3": "oom"},
        ),
        # 2 ok and one void (its own clock 25% off): no time, and merge refuses it (§5)
        "void": fake_series(
            root, "void", only(drift), step_ms={"*": 5.0}, events={"mica#3": "drift"}
        ),
        # a crash ends the series (amendment 8.4): failed, the rest incomplete
        "failed": fake_series(root, "failed", contender, code=3, events={"mica-strict#2": "crash"}),
    }


def comparison(d: Path) -> pd.DataFrame:
    return pd.read_csv(d / "tables" / "comparison.csv", keep_default_na=False)


def configurations(d: Path) -> pd.DataFrame:
    return pd.read_csv(d / "tables" / "configurations.csv", keep_default_na=False)


def copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def gate(d: Path, statuses: dict[str, str]) -> None:
    """The statuses `micakit report --checks` would save, written as it saves them."""
    ResultsDir.open(d).write_json(tables.GATING, {"check_dirs": [], "statuses": statuses})


# -- a configuration's state -------------------------------------------------------------------


def test_out_of_memory_after_a_timed_run_has_no_time_and_no_verdict(made, tmp_path):
    d = copy(made["oom"], tmp_path / "d")
    assert invoke("publish", d, "--preview").exit_code == 0
    conf = configurations(d).set_index("variant")
    assert conf.loc["mica-strict", "state"] == "out of memory"
    assert conf.loc["mica-strict", "runs"] == 1 and conf.loc["mica-strict", "planned_runs"] == 3
    assert conf.loc["mica-strict", "median_step_s"] == ""  # even in a preview
    assert conf.loc["mica", "state"] == "complete" and conf.loc["mica", "median_step_s"] != ""
    row = comparison(d).set_index("contender_build").loc["mica-strict"]
    assert row["verdict"] == "no verdict: out of memory" and row["times_alone_say"] == ""
    assert row["contender_median_step_s"] == "" and row["ratio"] == ""
    md = (d / "report.md").read_text()
    strict = [line for line in md.splitlines() if line.startswith("| mica-strict")]
    assert strict and all("out of memory in run" in line for line in strict)
    assert not any(re.search(r"\| \d+\.\d{3} ", line) for line in strict), strict


def test_pytorchs_fastest_mode_is_chosen_among_complete_modes(made):
    out = made["torch"]
    assert invoke("publish", out, "--preview").exit_code == 0
    row = comparison(out).iloc[0]
    # max-autotune's one timed run was the fastest; it is out of memory and has no time
    assert row["pytorch_fastest_mode"] == "reduce-overhead"
    assert "max-autotune: out of memory in run" in row["pytorch_modes_without_time"]
    conf = configurations(out).set_index("variant")
    assert float(row["pytorch_median_step_s"]) == pytest.approx(
        float(conf.loc["reduce-overhead", "median_step_s"])
    )
    assert row["ratio"] == pytest.approx(
        float(conf.loc["reduce-overhead", "median_step_s"])
        / float(conf.loc["mica", "median_step_s"])
    )
    assert conf.loc["max-autotune", "state"] == "out of memory"
    assert conf.loc["max-autotune", "median_step_s"] == ""


def test_a_void_run_leaves_no_time_and_merge_refuses_the_directory(made, tmp_path):
    d = copy(made["void"], tmp_path / "d")
    assert invoke("publish", d, "--preview").exit_code == 0
    conf = configurations(d).iloc[0]
    assert conf["state"] == "void" and conf["runs"] == 2 and conf["median_step_s"] == ""
    assert "apart, more than 10%" in conf["state_reason"]
    row = comparison(d).iloc[0]
    assert row["verdict"] == "no verdict: void" and row["times_alone_say"] == ""
    assert "void: 1 void (run" in (d / "report.md").read_text()
    with pytest.raises(UserError, match="void run.*found before anything is published"):
        merge.merge([d], tmp_path / "release")


def test_a_failed_run_and_the_runs_it_stopped_are_named(made, tmp_path):
    d = copy(made["failed"], tmp_path / "d")
    assert invoke("publish", d, "--preview").exit_code == 0
    conf = configurations(d).set_index("variant")
    assert conf.loc["mica-strict", "state"] == "failed"
    assert "exit code 139" in conf.loc["mica-strict", "state_reason"]
    # round 1 runs mica-half-intermediates, then mica-strict, which crashes
    for build, done in (("mica", 0), ("mica-half-intermediates", 1)):
        assert conf.loc[build, "state"] == "incomplete"
        assert conf.loc[build, "state_reason"] == f"{done} of 3 timed runs"
        assert conf.loc[build, "median_step_s"] == ""
    verdicts = set(comparison(d)["verdict"])
    assert verdicts == {"no verdict: failed", "no verdict: incomplete"}


def test_states_are_computed_from_the_judged_runs():
    kinds = ["discarded", "timed", "timed"]
    plan = Plan(tuple(PlannedRun(i, "c", i, k) for i, k in enumerate(kinds)))

    def runs(*statuses: str) -> pd.DataFrame:
        kinds = ["discarded", "timed", "timed"][: len(statuses)]
        return pd.DataFrame(
            {
                "run_id": range(len(statuses)),
                "config": "c",
                "kind": kinds,
                "status": list(statuses),
                "step_s": [0.002] * len(statuses),
                "reason": ["why"] * len(statuses),
            }
        )

    assert states.config_state("c", runs("ok", "ok", "ok"), plan).step_s == (0.002, 0.002)
    assert states.config_state("c", runs("out of memory"), plan).shown == (
        "out of memory in run 0 (discarded)"
    )
    assert states.config_state("c", runs("ok", "void", "ok"), plan).state is states.State.VOID
    assert states.config_state("c", runs("ok", "ok"), plan).shown == "incomplete: 1 of 2 timed runs"
    failed = states.config_state("c", runs("ok", "ok", "failed"), plan)
    assert failed.state is states.State.FAILED and not failed.has_time and failed.step_s == ()


# -- the summary: a time only beside a verdict ----------------------------------------------------


def summary_rows(md: str) -> list[dict[str, str]]:
    """The summary table of report.md, each row by its headers."""
    block = md.split(f"## {overview.SUMMARY}\n", 1)[1].split(overview.DETAILS_OPEN, 1)[0]
    lines = [x for x in block.splitlines() if x.startswith("|")]
    heads = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(heads, (c.strip() for c in x.strip("|").split("|")))) for x in lines[2:]]


NUMBER = re.compile(r"\d+\.\d{3}")
TIMES = ("contender median (ms)", "PyTorch median (ms)", "ratio P/M")


def assert_no_time(row: dict[str, str], state: str) -> None:
    assert row["verdict"].startswith(f"no verdict: {state}"), row
    assert all(row[k] == "—" for k in TIMES), row
    assert not NUMBER.search(" ".join(row.values())), row


def test_the_summary_comes_first_and_shows_a_time_only_beside_a_verdict(made, tmp_path):
    # withheld by rule 6 (no check passed): its state, no number, and the reason said once
    d = copy(made["torch"], tmp_path / "withheld")
    assert invoke("publish", d).exit_code == 0
    md = (d / "report.md").read_text()
    assert md.split("\n## ")[1].startswith(overview.SUMMARY)  # the first section
    (row,) = summary_rows(md)
    assert_no_time(row, states.WITHHELD_NOT_CHECKED)
    costs = md.split(f"## {overview.COMPILE_COSTS}")[1].split("\n## ")[0]
    assert not NUMBER.search(costs)
    assert costs.count(states.WITHHELD_NOT_CHECKED) == 1, costs
    # previewed: no verdict, and the times labelled as preparation (the numbers a reader
    # came for, on the first screen)
    previewed = copy(made["torch"], tmp_path / "previewed")
    gate(previewed, {"shakespeare-char/float32/mica": "passed"})
    assert invoke("publish", previewed, "--preview").exit_code == 0
    (row,) = summary_rows((previewed / "report.md").read_text())
    # in the comparison table's own words (the title says it is preparation)
    table = pd.read_csv(previewed / "tables" / "comparison.csv")
    assert row["verdict"] == table["verdict"].iloc[0]
    assert all(NUMBER.fullmatch(row[k]) for k in TIMES), row
    # out of memory, incomplete and failed, void: the state, never a time or a verdict
    oom = copy(made["oom"], tmp_path / "oom")
    gate(oom, {"shakespeare-char/float32/mica-strict": "passed"})
    assert invoke("publish", oom).exit_code == 0
    rows = {r["contender build"]: r for r in summary_rows((oom / "report.md").read_text())}
    assert_no_time(rows["mica-strict (secondary)"], "out of memory in run")
    for name, state in (("void", "void"), ("failed", "failed")):
        bad = copy(made[name], tmp_path / name)
        assert invoke("publish", bad, "--preview").exit_code == 0
        rows = {r["contender build"]: r for r in summary_rows((bad / "report.md").read_text())}
        assert any(r["verdict"].startswith(f"no verdict: {state}") for r in rows.values())
        for r in rows.values():
            assert_no_time(r, "")
    # a passed check, not a preview: the verdict with both medians and their ratio
    checked = copy(made["torch"], tmp_path / "checked")
    gate(checked, {"shakespeare-char/float32/mica": "passed"})
    assert invoke("publish", checked).exit_code == 0
    (row,) = summary_rows((checked / "report.md").read_text())
    compared = comparison(checked).iloc[0]
    assert row["verdict"] == compared["verdict"] and row["verdict"] in ("faster", "level", "slower")
    assert row["contender median (ms)"] == f"{compared['contender_median_step_s'] * 1e3:.3f}"
    assert row["PyTorch median (ms)"] == f"{compared['pytorch_median_step_s'] * 1e3:.3f}"
    assert row["ratio P/M"] == f"{compared['ratio']:.3f}"
    assert "reduce-overhead mode" in row["against"]
    page = (checked / "report.html").read_text()
    assert '<h2 id="summary">' in page and '<div class="table summary">' in page
    assert page.index('id="summary"') < page.index("<details") < page.index("Comparison (D1)")
    # every number matches; the gating, written here without a check, derives from none
    verified = invoke("verify", checked)
    assert verified.exit_code == ExitCode.VERIFY_MISMATCH
    assert verified.stdout.splitlines()[:2] == [
        "gating.json contender_sha256: saved None, derived "
        f"{ResultsDir.open(checked).versions().side('contender')['program_sha256']!r}",
        "gating.json statuses shakespeare-char/float32/mica: saved 'passed', derived "
        "'correctness not checked'",
    ]


# -- rule 6 by default, and the preview ---------------------------------------------------------


def test_rule_6_withholds_every_unchecked_speed_by_default(made, tmp_path):
    d = copy(made["torch"], tmp_path / "d")
    res = invoke("publish", d)
    assert res.exit_code == 0
    row = comparison(d).iloc[0]
    assert row["publication"] == states.WITHHELD_NOT_CHECKED
    assert row["contender_median_step_s"] == "" and row["pytorch_median_step_s"] == ""
    assert row["ratio"] == "" and row["times_alone_say"] == ""
    assert row["verdict"] == "no verdict: correctness not checked"
    md = (d / "report.md").read_text()
    assert states.WITHHELD_NOT_CHECKED in md
    assert "would read" not in md and not re.search(r"\| \d+\.\d{3} ", md), md
    assert states.PREVIEW not in md
    page = (d / "report.html").read_text()
    assert states.PREVIEW not in page
    # no step time to draw: the reason is said once, not once per configuration's row
    steps = page.split("<h3>Step times</h3>")[1].split("<h3>")[0]
    assert "<figure" not in steps and "no step time to draw" in steps
    assert steps.count(states.WITHHELD_NOT_CHECKED) == 1, steps
    assert invoke("verify", d).exit_code == 0


def test_a_failed_check_reads_withheld_correctness_failed(made, tmp_path):
    d = copy(made["torch"], tmp_path / "d")
    gate(d, {"shakespeare-char/float32/mica": "method B failed at step 12"})
    assert invoke("publish", d).exit_code == 0
    row = comparison(d).iloc[0]
    assert row["publication"] == states.WITHHELD_FAILED
    assert row["verdict"] == "no verdict: method B failed at step 12"
    assert states.WITHHELD_FAILED in (d / "report.md").read_text()


def test_a_passed_check_publishes_that_build_alone(made, tmp_path):
    d = copy(made["oom"], tmp_path / "d")
    # amendment 4.2: the half build's check does not stand for mica-strict
    gate(
        d,
        {
            "shakespeare-char/float16/mica-half-intermediates": "passed",
            "shakespeare-char/float32/mica": "passed",
        },
    )
    assert invoke("publish", d).exit_code == 0
    conf = configurations(d).set_index("variant")
    assert conf.loc["mica-half-intermediates", "publication"] == states.PUBLISHED
    assert conf.loc["mica-half-intermediates", "median_step_s"] != ""
    md = (d / "report.md").read_text()
    half = [
        x
        for x in md.splitlines()
        if re.match(r"\| shakespeare-char +\| float16 +\| contender +\| mica-half", x)
    ]
    assert len(half) == 1 and re.search(r"\| \d+\.\d{3} ", half[0]), half
    # without a check of its own, a secondary build is withheld
    assert conf.loc["mica-strict", "publication"] == states.WITHHELD_NOT_CHECKED
    row = comparison(d).set_index("contender_build").loc["mica-half-intermediates"]
    assert row["verdict"] == "no verdict: no PyTorch mode is complete"  # a contender series


def preview_labelled(series: Path, to: Path, label: str) -> tuple[Path, str]:
    """A copy of `series` published as a preview, whose report.md carries `label` in its title
    and every table's caption: the copy and report.md."""
    d = copy(series, to)
    assert invoke("publish", d, "--preview").exit_code == 0
    md = (d / "report.md").read_text()
    assert label in md.splitlines()[0]
    assert_every_table_captioned(md, label)
    return d, md


def test_the_preview_labels_the_title_every_table_caption_and_every_plot(made, tmp_path):
    d, md = preview_labelled(made["torch"], tmp_path / "d", states.PREVIEW)
    assert re.search(r"\| \d+\.\d{3} ", md)  # the times are shown
    page = parse(d / "report.html")
    assert states.PREVIEW in (d / "report.html").read_text().split("</title>")[0]
    assert page.captions and all(states.PREVIEW in c for c in page.captions)
    rd = ResultsDir.open(d)
    for section in html_sections.sections(html_sections.context(rd, tables.tables(rd))):
        assert all(states.PREVIEW in plot.alt for plot in section.plots)
    assert invoke("verify", d).exit_code == 0


def test_a_smoke_series_is_always_a_preview(tmp_path, cli, fake_env):
    protocol = fake_nanogpt_protocol(tmp_path / "p.toml")
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    assert cli(*pytorch_args(out, protocol, "--smoke", "--contender", CONTENDER)).exit_code == 0
    assert cli("publish", out).exit_code == 0  # without --preview
    assert states.PREVIEW in (out / "report.md").read_text().splitlines()[0]
    assert comparison(out).iloc[0]["publication"] == states.PREVIEW


def assert_every_table_captioned(md: str, words: str) -> None:
    """Every Markdown table is preceded by an italic caption line that holds `words`."""
    lines = md.splitlines()
    starts = [
        i for i, x in enumerate(lines) if x.startswith("|") and not lines[i - 1].startswith("|")
    ]
    assert starts
    for i in starts:
        caption = lines[i - 2] if not lines[i - 1].strip() else lines[i - 1]
        assert caption.startswith("*") and words in caption, (caption, lines[i])


# -- the cards the protocol names (D3) -----------------------------------------------------------


def relabel(src: Path, dest: Path, card: str) -> Path:
    d = copy(src, dest)
    for name, edit in (
        ("plan.json", lambda p: [c.update(card=card) for c in p["configurations"]]),
        ("manifest.json", lambda m: m["series"].update(card=card)),
    ):
        data = json.loads((d / name).read_text())
        edit(data)
        (d / name).write_text(json.dumps(data))
    return d


def test_a_card_the_protocol_does_not_name_says_so_wherever_its_numbers_appear(made, tmp_path):
    d, md = preview_labelled(made["oom"], tmp_path / "cpu", states.NOT_NAMED)
    assert all(states.NOT_NAMED in c for c in parse(d / "report.html").captions)
    assert set(comparison(d)["card_named"].astype(str)) == {"False"}
    merge.merge([d], tmp_path / "release")
    release = (tmp_path / "release" / "release.md").read_text()
    rows = [x for x in release.splitlines() if x.startswith("| cpu")]
    assert rows and all(states.NOT_NAMED in x for x in rows)
    named = relabel(made["oom"], tmp_path / "l4", "NVIDIA L4")
    assert invoke("publish", named, "--preview").exit_code == 0
    assert states.NOT_NAMED not in (named / "report.md").read_text()
    assert set(comparison(named)["card_named"].astype(str)) == {"True"}


# -- §9's wording, one rule a test, on report.md and report.html ---------------------------------


@pytest.fixture(scope="module")
def previewed(made, tmp_path_factory) -> Path:
    d = copy(made["torch"], tmp_path_factory.mktemp("previewed") / "d")
    gate(d, {"shakespeare-char/float32/mica": "passed"})
    assert invoke("publish", d, "--preview").exit_code == 0
    return d


def test_9_the_kernels_sentence_word_for_word(previewed):
    assert KERNELS in (previewed / "report.md").read_text()
    assert KERNELS in (previewed / "report.html").read_text().replace("&rsquo;", "’")


def test_9_pytorch_named_in_every_table_that_shows_a_pytorch_number(previewed):
    torch = json.loads((previewed / "versions.json").read_text())["pytorch"]["torch"]
    for text in ((previewed / "report.md").read_text(),):
        tables = re.split(r"\n\n", text)
        for block in tables:
            rows = [x for x in block.splitlines() if x.startswith("|")]
            mentioning = [x for x in rows[2:] if "pytorch" in x.lower()]
            for row in mentioning:
                assert f"PyTorch {torch} " in row and "attention: " in row, row
    page = (previewed / "report.html").read_text()
    for table in re.findall(r"<table>.*?</table>", page, re.S):
        for tr in re.findall(r"<tr>.*?</tr>", table, re.S)[1:]:
            cells = re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
            if any(c.strip() == "pytorch" for c in cells):
                assert f"PyTorch {torch} " in tr and "attention: " in tr, tr


def test_9_verdict_words_only_as_d1_defines_them(previewed):
    md = (previewed / "report.md").read_text()
    amendments = md.split("## Amendments in force")[1]
    body = md.split("## Amendments in force")[0]
    for line in body.splitlines():
        if not VERDICT_WORD.search(line):
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            heads = [c.strip() for c in _head_of(body, line).strip("|").split("|")]
            verdict = cells[heads.index("verdict")]
            for i, cell in enumerate(cells):
                if VERDICT_WORD.search(cell):
                    assert heads[i] == "verdict" and cell in ("faster", "level", "slower"), line
            assert verdict in ("faster", "level", "slower") or verdict.startswith("no verdict")
        else:
            raise AssertionError(f"a verdict word outside D1's verdict column: {line}")
    assert "Amendment 1" in amendments  # the amendment that restates the verdicts is quoted
    assert not VERDICT_WORD.search(" ".join(parse(previewed / "report.html").captions))


def _head_of(md: str, row: str) -> str:
    lines = md.splitlines()
    i = lines.index(row)
    while i > 0 and lines[i - 1].startswith("|"):
        i -= 1
    return lines[i]


def test_9_m1s_size_sentence_beside_every_m1_number(previewed):
    md = (previewed / "report.md").read_text()
    lines = md.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and not lines[i - 1].startswith("|"):
            body = "\n".join(lines[i : lines.index("", i)])
            if "M1" not in body and "shakespeare-char" not in body:
                continue  # a table that holds no model's number (the software versions)
            caption = lines[i - 2] if not lines[i - 1].strip() else lines[i - 1]
            assert M1_SIZE in caption or M1_SIZE in _section_head(lines, i), (caption, line)
    page = parse(previewed / "report.html")
    assert page.captions and all(M1_SIZE in c for c in page.captions)


def _section_head(lines: list[str], i: int) -> str:
    while i > 0 and not lines[i].startswith("#"):
        i -= 1
    return lines[i]


def test_9_the_domain_and_the_link_to_the_results_directory(previewed):
    md = (previewed / "report.md").read_text()
    assert "mica-dev.com" in md and "[this directory](./)" in md
    page = parse(previewed / "report.html")
    assert "mica-dev.com" in (previewed / "report.html").read_text()
    assert any(t == "a" and a.get("href") == "./" for t, a in page.tags)


def test_9_in_merge_m1s_sentence_travels_in_each_row(made, tmp_path):
    d = copy(made["oom"], tmp_path / "d")
    merge.merge([d], tmp_path / "release")
    release = (tmp_path / "release" / "release.md").read_text()
    rows = [x for x in release.splitlines() if x.startswith("| cpu")]
    assert rows and all(M1_SIZE in x for x in rows)
    assert "## Models" not in release  # no footer: the sentence is in every row
    assert KERNELS in release and "mica-dev.com" in release
    # the recomputation names every state: out of memory stays in its row (rule 5)
    assert any("out of memory" in x for x in rows)


# -- every file a series reads is hashed into its manifest ---------------------------------------


def test_the_manifest_hashes_every_file_beside_the_protocol(made):
    manifest = json.loads((made["oom"] / "manifest.json").read_text())
    hashed = manifest["inputs_sha256"]
    assert set(hashed) >= {"families.tsv", "train.patch", "gpt2-shakespeare.py"}
    assert (
        hashed["families.tsv"]
        == hashlib.sha256((made["oom"] / "families.tsv").read_bytes()).hexdigest()
    )
    assert records(made["oom"])  # the series ran


def test_a_publication_cell_is_read_back_as_its_kind():
    from kit.correctness.checks import ANOTHER_PROGRAM

    P = states.Publication
    unbound = f"method A: {ANOTHER_PROGRAM} (sha256 0123456789ab…)"
    cells = {
        states.publication("passed", preview=False): P.PUBLISHED,
        states.publication("passed", preview=True): P.PREVIEW,
        states.publication("method B failed at step 7", preview=False): P.WITHHELD,
        states.publication(states.NOT_CHECKED, preview=False): P.WITHHELD,
        states.publication(unbound, preview=False): P.WITHHELD,
    }
    assert list(cells) == [
        "published",
        "preparation: not a protocol result",
        "withheld: correctness failed",
        "withheld: correctness not checked (rule 6)",
        f"withheld: {unbound}",
    ]  # the text the tables have always written
    assert {cell: P.of(cell) for cell in cells} == cells
    for nothing in ("", None, float("nan"), "withheld"):  # a configuration no table lists
        assert P.of(nothing) is None
    outcome = states.CheckOutcome
    said = ("passed", "method A failed: loss", unbound, "method B not run on L4")
    assert [outcome.of(s) for s in said] == list(outcome)


def test_no_report_module_reads_a_publication_or_a_check_by_its_words():
    """Publication states are read by their kind (`states.Publication`), never by a word in
    their text; a check's status only by `states.CheckOutcome`."""
    kit = Path(states.__file__).parents[1]
    by_words = "withheld|prep|publ|passed|failed"
    words = re.compile(rf"""startswith\(["']({by_words})|["']({by_words})["']\s+in\b""")
    found = [
        f"{path.relative_to(kit)}:{number}: {line.strip()}"
        for folder in ("report", "correctness", "cli")
        for path in sorted((kit / folder).rglob("*.py"))
        if path.name != "states.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if words.search(line)
    ]
    assert found == []

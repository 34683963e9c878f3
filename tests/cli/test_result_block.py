"""What a user sees at the end: the result on the terminal in hyperfine's manner, and rule 6's
way out named wherever a verdict is withheld (the terminal, report.md, report.html, compare),
each command run as printed."""

from __future__ import annotations

import os
import pty
import select
import shlex
import subprocess
import sys

import pandas as pd
import pytest

from kit.cli import shown
from kit.report import next_steps
from tests.cli.test_correctness_cmd import smoke_series_of_both_sides
from tests.conftest import ROOT, STEADY_STEP_MS, contender_args, write_protocol


def smoke_series(tmp_path, cli, fake_env):
    """A CPU smoke series of both sides (the fake nanoGPT and the fake contender)."""
    fake_env(step_ms=STEADY_STEP_MS)
    series, _, _, made = smoke_series_of_both_sides(tmp_path, cli)
    return series, made


def commands(text: str, name: str) -> list[list[str]]:
    """The `micakit NAME ...` lines of a block of text, as argv without `micakit`, with "$R"
    as the block's `R=...` line sets it (as a shell would expand it)."""
    out = []
    folder = next(
        (shlex.split(x.strip()[2:])[0] for x in text.splitlines() if x.strip().startswith("R=")),
        None,
    )
    for line in text.replace(" \\\n", " ").splitlines():  # a command continued: one line
        line = line.replace('"$R"', shlex.quote(folder)) if folder else line
        words = shlex.split(line.strip()) if line.strip().startswith("micakit ") else []
        if words[1:2] == [name]:
            out.append(words[1:])
    return out


@pytest.mark.slow  # a series and two checks
def test_a_smoke_series_ends_with_the_result_and_its_commands_lead_to_a_verdict(
    tmp_path, cli, fake_env
):
    series, made = smoke_series(tmp_path, cli, fake_env)
    block = made.stdout
    # the result, per model and precision: each side's median and range, the ratio, the verdict
    assert "M1, scaled down (shakespeare-char) · float32 · cpu" in block
    assert "[preparation: not a protocol result" in block  # a smoke series is a preview
    compared = pd.read_csv(series / "tables" / "comparison.csv").iloc[0]
    m, p = compared["contender_median_step_s"], compared["pytorch_median_step_s"]
    assert f"median {m * 1e3:8.3f} ms/step" in block, block
    assert f"median {p * 1e3:8.3f} ms/step" in block, block
    low, high = compared["contender_min_step_s"], compared["contender_max_step_s"]
    assert f"range {low * 1e3:.3f} … {high * 1e3:.3f} ms" in block
    assert f"ratio P/M {compared['ratio']:.3f}" in block
    assert "no verdict: correctness not checked" in block
    # one sentence per comparison, in the ratio's direction; two runs a side carry no interval
    ratio = compared["ratio"]
    said = "faster" if ratio >= 1 else "slower"
    times = f"{ratio:.2f}×" if ratio >= 1 else f"{1 / ratio:.2f}×"
    assert f"contender mica ran {times} {said} than PyTorch " in block
    assert "(2 runs a side: no interval)" in block or "(P/M " in block
    # then the commands that apply, short: the results folder set once, as the shell sees it
    assert f"  R={shlex.quote(str(series))}\n" in block and '  micakit verify "$R"\n' in block
    # short: lines of 100 characters at most, the test's own folder (absolute here) aside
    shown = [x.replace(str(tmp_path), "T") for x in block.splitlines()]
    said = [x for x in shown if x.strip().startswith(("micakit ", "--"))]
    assert said and all(len(x) <= 100 for x in said), block
    assert "waits for method A, five seeds a side; method B on cpu" in block
    checks = commands(block, "correctness")
    assert [c[c.index("--method") + 1] for c in checks] == ["A", "B"]
    assert all(c[c.index("--products") + 1] == str(series) for c in checks)
    (publish,) = commands(block, "publish")
    assert block.rstrip().split("\n  micakit ")[-1].startswith('publish "$R" --checks')
    # report.md names them too, DIR standing for the directory
    md = (series / "report.md").read_text()
    # a smoke report's title: one disclaimer; its amendments named, not each in full
    title = md.splitlines()[0]
    # (the tests' protocol is not the shipped one, which the title says after it)
    assert "CPU smoke series — preparation: not a protocol result (scaled-down models)" in title, (
        title
    )
    amendments = md.split("## Amendments in force")[1]
    assert amendments.strip().startswith("Amendments 1, ") and "- Amendment " not in amendments
    assert f"## {next_steps.WAY_OUT}" in md
    # a smoke series is a preview: its times come first, the way out after their tables
    assert md.index("## Configurations") < md.index(f"## {next_steps.WAY_OUT}")
    assert "    micakit publish DIR --checks DIR-check-shakespeare-char-float32-A" in md
    # each command as printed: the checks, then publish gates the verdict
    for argv in checks:
        res = cli(*argv)
        assert res.exit_code == 0, res.output
    assert cli(*publish).exit_code == 0
    verdict = pd.read_csv(series / "tables" / "comparison.csv").iloc[0]["verdict"]
    assert verdict in ("faster", "level", "slower"), verdict
    # the way out is gone once nothing waits; the directory verifies clean
    assert next_steps.WAY_OUT not in (series / "report.md").read_text()
    assert cli("verify", series).exit_code == 0
    # `micakit report` off a terminal prints report.md alone (`> report.md` works)
    assert cli("report", series).output == (series / "report.md").read_text()


@pytest.mark.slow  # two series
def test_compare_of_a_smoke_series_shows_its_times_as_preparation(tmp_path, cli, fake_env):
    series, _ = smoke_series(tmp_path, cli, fake_env)
    res = cli("compare", series, series)
    assert res.exit_code == 0, res.output
    first = res.output.splitlines()[0]
    assert first.endswith("— preparation: not a protocol result")
    row = next(line for line in res.output.splitlines() if "| contender | mica |" in line)
    assert " ms (" in row and "withheld" not in row  # its times, as `report` shows them
    # a protocol series (not smoke, no check passed): withheld, and the way out is named
    fake_env(step_ms={"*": 2.0})
    full = tmp_path / "full"
    protocol = write_protocol(tmp_path / "p.toml", runs=2)
    assert cli(*contender_args(full, protocol, "--precision", "float32")).exit_code == 0
    res = cli("compare", full, full)
    assert "withheld: correctness not checked (rule 6)" in res.output
    assert f"`micakit compare {full} {full} --preview`" in res.output
    assert commands(res.output, "correctness") and commands(res.output, "publish")
    assert cli("compare", full, full, "--json").exit_code == 0
    # its report says what rule 6 waits for right after the summary, on the first screen
    md = (full / "report.md").read_text()
    assert md.index("## Summary") < md.index(f"## {next_steps.WAY_OUT}") < md.index("<details>")


def test_paths_under_the_runner_image_are_the_hosts(tmp_path, monkeypatch):
    monkeypatch.setenv("MICAKIT_RUNNER", "1")
    monkeypatch.setattr(shown, "MOUNTED", tmp_path)
    monkeypatch.delenv(shown.HOST_RESULTS_ENV, raising=False)
    # the executor read its container's mounts
    assert shown.shown(tmp_path / "L4", lambda p: f"/home/u/r/{p.name}") == "/home/u/r/L4"
    # README's line names the host folder
    monkeypatch.setenv(shown.HOST_RESULTS_ENV, "/home/u/results")
    assert shown.shown(tmp_path / "L4" / "report.md") == "/home/u/results/L4/report.md"
    # else relative to the mounted results folder, as README's `-v "$PWD/results:/results"`
    monkeypatch.delenv(shown.HOST_RESULTS_ENV)
    assert shown.shown(tmp_path / "L4") == "results/L4"
    monkeypatch.delenv("MICAKIT_RUNNER")
    assert shown.shown(tmp_path / "L4") == str(tmp_path / "L4")  # the host's own path


def on_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    """What a command prints on a terminal (a pseudo-terminal), stdout and stderr together."""
    main, child = pty.openpty()
    proc = subprocess.Popen(argv, stdin=child, stdout=child, stderr=child, env=env, cwd=ROOT)
    os.close(child)
    chunks = []
    while True:
        ready, _, _ = select.select([main], [], [], 600)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(main, 65536)
        except OSError:  # the terminal closed: the program ended
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(main)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow  # a series on a pseudo-terminal
def test_on_a_terminal_each_run_shows_its_step_time_and_report_ends_with_the_result(
    tmp_path, fake_env
):
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "live"
    protocol = write_protocol(tmp_path / "p.toml", runs=2)
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm"}
    run = [sys.executable, str(ROOT / "run.py")]
    said = on_a_terminal([*run, *map(str, contender_args(out, protocol))], env)
    records = pd.read_csv(out / "tables" / "runs.csv")
    timed = records[records["kind"] == "timed"]
    for _, r in timed.iterrows():  # each finished run's own line above the bar
        assert f"run {r['run_id']}: {r['step_s'] * 1e3:.3f} ms/step" in said, said[-3000:]
    # a profiled run without nsys says so once, on the bar and in its record
    assert "not profiled: nsys" in said and "not profiled: not profiled" not in said
    profiled = records[records["kind"] == "profile"]
    assert len(profiled) and not profiled["reason"].str.startswith("not profiled").any()
    assert "Next:" in said and f"R={out}" in said and 'micakit verify "$R"' in said
    # `micakit report` on a terminal: the report, then the same block
    printed = on_a_terminal([*run, "report", str(out)], env)
    assert "## Summary" in printed and 'micakit verify "$R"' in printed
    assert printed[printed.rindex("micakit ") :].startswith('micakit publish "$R"')

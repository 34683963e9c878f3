"""report.html in headless Chromium, Debian's `chromium`: it renders offline, writes nothing to
the console, a screenshot shows the comparison table, and at 1280×800 the summary is seen
whole before any scrolling.

Needs /usr/bin/chromium (`apt-get install -y chromium`) or MICAKIT_CHROMIUM=PATH; skipped with
that reason elsewhere. The screenshots are kept as the test's artifacts: under
$MICAKIT_TEST_ARTIFACTS when it is set, else tests/artifacts/ (ignored by git), one folder a
test.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kit.cli.main import main
from tests.cli.test_html_report import BOTH_SIDES_MS, both_sides_args
from tests.conftest import copied, series_once

# Debian's package; MICAKIT_CHROMIUM names another build (e.g. a runner's google-chrome)
CHROMIUM = Path(os.environ.get("MICAKIT_CHROMIUM") or "/usr/bin/chromium")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason=f"needs Chromium at {CHROMIUM}: apt-get install -y --no-install-recommends "
        "chromium (Debian), or MICAKIT_CHROMIUM=PATH",
    ),
]
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--hide-scrollbars",
    # offline: no name resolves, so anything the page tried to fetch would fail and log
    "--host-resolver-rules=MAP * ~NOTFOUND",
]
TABLE_BORDER = 204  # the report's table borders are #ccc; no other line on the page is
# the summary's own colours (kit.report.html's style): its header and its frame
SUMMARY_HEADER = (0xDB, 0xE8, 0xF5)
SUMMARY_FRAME = (0x1F, 0x5F, 0x99)


@pytest.fixture(scope="module")
def previewed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """test_html_report's series of both sides, published as a preview: made once for the
    module, each test reads (or publishes) a copy of its own."""
    root = tmp_path_factory.mktemp("chromium")
    out = series_once(root, both_sides_args(root), step_ms=BOTH_SIDES_MS)
    published = CliRunner().invoke(main, ["publish", str(out), "--preview"])
    assert published.exit_code == 0, published.output
    return out


def artifacts(name: str) -> Path:
    """The folder that keeps a test's screenshots after it ends."""
    root = os.environ.get("MICAKIT_TEST_ARTIFACTS")
    base = Path(root) if root else Path(__file__).resolve().parents[1] / "artifacts"
    path = base / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def chromium(
    page: Path, profile: Path, *args: str, size: str = "1280,1400"
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            str(CHROMIUM),
            *FLAGS,
            f"--window-size={size}",
            f"--user-data-dir={profile}",
            *args,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


def console(stderr: str) -> list[str]:
    """What the page wrote to the console: errors, CSP refusals, failed loads (any at all)."""
    words = (":CONSOLE", "Uncaught", "Refused to", "violates the following Content Security")
    return [line for line in stderr.splitlines() if any(w in line for w in words)]


def table_lines(png: Path) -> int:
    """Rows of the screenshot crossed by a long line of the tables' border colour."""
    from PIL import Image

    grey = np.asarray(Image.open(png).convert("L"), dtype=int)
    border = np.abs(grey - TABLE_BORDER) <= 6
    count = 0
    for row in border:
        runs = np.diff(np.flatnonzero(np.diff(np.r_[0, row.astype(int), 0])))[::2]
        count += bool(len(runs) and runs.max() >= 400)
    return count


def test_the_console_check_sees_an_error(tmp_path):
    """The check below is only worth its silence if it hears a page that fails."""
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><p>x</p><script>no_such_function();</script>")
    run = chromium(page, tmp_path / "profile", "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    assert any("no_such_function" in line for line in console(run.stderr))


def test_report_html_renders_offline_and_shows_the_table(tmp_path, previewed, cli):
    out = copied(previewed, tmp_path)
    page = out / "report.html"
    dom = chromium(page, tmp_path / "profile-dom", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console(dom.stderr) == []
    assert "<table>" in dom.stdout and "contender build" in dom.stdout
    assert "a 10.7-million-parameter model" in dom.stdout
    shot = tmp_path / "report.png"
    run = chromium(page, tmp_path / "profile-shot", f"--screenshot={shot}")
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    assert console(run.stderr) == []
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("L"), dtype=float)
    assert pixels.shape[:2] == (1400, 1280)
    assert pixels.std() > 20  # not blank: text, tables and a plot on white
    # the comparison and configurations tables are drawn: their rules cross the shot
    assert table_lines(shot) >= 6
    shutil.copy(shot, artifacts("report_html") / "report-1280x1400.png")


def colour_rows(png: Path, colour: tuple[int, int, int], min_run: int = 300) -> list[int]:
    """The rows of a screenshot crossed by a long run of one colour (a table's rule or fill)."""
    from PIL import Image

    with Image.open(png) as image:
        rgb = np.asarray(image.convert("RGB"), dtype=int)
    hit = (np.abs(rgb - np.array(colour)) <= 3).all(axis=2)
    rows = []
    for y, row in enumerate(hit):
        edges = np.diff(np.flatnonzero(np.diff(np.r_[0, row.astype(int), 0])))[::2]
        if len(edges) and edges.max() >= min_run:
            rows.append(y)
    return rows


def test_the_summary_is_seen_whole_without_scrolling(tmp_path, previewed, cli):
    """At 1280×800 the first screen holds the summary's header and both of its frame's rules.

    The check can fail: a page that opens with anything long before the summary (the old
    metadata list, say) pushes the summary below row 800; such a page is checked too, and
    fails it.
    """
    out = copied(previewed, tmp_path)
    page = out / "report.html"
    shot = tmp_path / "first-screen.png"
    run = chromium(page, tmp_path / "profile", f"--screenshot={shot}", size="1280,800")
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    assert console(run.stderr) == []
    shutil.copy(shot, artifacts("summary_first_screen") / "report-1280x800.png")
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (1280, 800)
    # the header's fill runs between the cells' rules; the frame's rules run the table's width
    header = colour_rows(shot, SUMMARY_HEADER, min_run=60)
    frame = colour_rows(shot, SUMMARY_FRAME, min_run=600)
    assert header, "the summary's header is not on the first screen"
    # the frame's top rule above the header, its bottom rule below it: the table ends on screen
    assert frame and min(frame) < min(header) and max(frame) > max(header) + 20, (frame, header)
    # the same check on the page with a screenful of text before its summary fails
    pushed = tmp_path / "pushed.html"
    text = page.read_text("utf-8")
    filler = '<div style="height: 760px">the old metadata list</div>\n<h2 id="summary">'
    pushed.write_text(text.replace('<h2 id="summary">', filler, 1), "utf-8")
    shot2 = tmp_path / "pushed.png"
    run = chromium(pushed, tmp_path / "profile-pushed", f"--screenshot={shot2}", size="1280,800")
    assert run.returncode == 0 and shot2.exists(), run.stderr[-2000:]
    assert colour_rows(shot2, SUMMARY_HEADER, min_run=60) == []


MARK = (0xFF, 0x00, 0xFF)  # a colour the page never uses, painted on the cells looked for


def marked(page: Path, out: Path, pattern: str, tag: str) -> Path:
    """A copy of the page whose elements `tag` holding `pattern` are painted MARK, so that a
    screenshot shows where they lie."""
    import re

    text = page.read_text("utf-8")
    found = re.compile(
        rf"<{tag}(?: [^>]*)?>((?:(?!</{tag}>).)*?{pattern}(?:(?!</{tag}>).)*)</{tag}>", re.S
    )
    painted, n = found.subn(rf'<{tag} style="background: #ff00ff">\1</{tag}>', text)
    assert n, f"no <{tag}> holds {pattern!r}"
    out.write_text(painted, "utf-8")
    return out


def first_screen_rows(page: Path, profile: Path, name: str) -> list[int]:
    """The rows of the first 1280×800 screen crossed by a run of MARK."""
    shot = profile.parent / f"{name}.png"
    run = chromium(page, profile, f"--screenshot={shot}", size="1280,800")
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    assert console(run.stderr) == []
    shutil.copy(shot, artifacts("first_screen") / f"{name}-1280x800.png")
    return colour_rows(shot, MARK, min_run=30)


def test_the_first_screen_holds_the_numbers_or_what_rule_6_waits_for(tmp_path, previewed, cli):
    """A preview's first screen shows its medians (the summary's cells that hold a number);
    a series rule 6 withholds shows, on its first screen, the commands that make its checks.
    Each check fails on a page that pushes them below the fold."""
    out = copied(previewed, tmp_path)  # published as a preview
    numbers = marked(out / "report.html", tmp_path / "numbers.html", r"\d+\.\d{3}", "td")
    assert first_screen_rows(numbers, tmp_path / "p1", "preview"), "no number on the first screen"
    pushed = tmp_path / "numbers-pushed.html"
    filler = '<div style="height: 900px">a long preamble</div>\n<h2 id="summary">'
    pushed.write_text(numbers.read_text("utf-8").replace('<h2 id="summary">', filler, 1))
    assert first_screen_rows(pushed, tmp_path / "p2", "preview-pushed") == []
    # rule 6: no check passed, no preview: what is missing and how to get it
    assert cli("publish", out).exit_code == 0
    way_out = marked(out / "report.html", tmp_path / "rule6.html", "micakit correctness", "pre")
    assert first_screen_rows(way_out, tmp_path / "p3", "rule6"), "the way out is below the fold"


def test_runs_on_a_busy_machine_are_said_on_the_first_screen(tmp_path, cli, fake_env, monkeypatch):
    """A series whose every timed run was measured on a busy machine: the flag stands under
    the summary, on report.html's first screen, in summary.json's `conditions` at the top,
    in the terminal's result block, and `compare` reads it ambiguous; a page that pushes it
    below the fold fails the check."""
    from tests.cli.test_machine_conditions import busy_machine as spinners
    from tests.conftest import contender_args, steady_series, write_protocol

    reference = {"conditions.cpu_busy_share": 0.25, "conditions.cpu_look_s": 0.5}
    protocol = write_protocol(tmp_path / "p.toml", runs=2, changes=reference)
    fake_env(step_ms={"*": 2.0})  # long enough steps to stay valid beside the spinners
    out = tmp_path / "r"
    args = contender_args(out, protocol, "--precision", "float32", "--idle-timeout", "1")
    results = []

    def make():
        with contextlib.contextmanager(spinners.__wrapped__)():
            results.append(cli(*args))
        assert results[-1].exit_code == 0, results[-1].output
        return out

    # made again where the spinners and a loaded runner voided or stalled a timed run (CI's,
    # once: no step time left to draw)
    steady_series(make)
    made = results[-1]
    # where it is not said, how each run found the machine (its idle.json) says why
    looks = [json.loads(f.read_text()) for f in sorted(out.glob("runs/*/*/idle.json"))]
    assert "waiting up to 1 s: others use" in made.stderr, [
        {k: look.get(k) for k in ("waited_s", "polls", "busy", "others_cpu_share", "busiest")}
        for look in looks
    ]
    assert "Conditions: 2 of 2 timed runs flagged: measured on a busy machine" in made.stdout
    data = json.loads((out / "summary.json").read_text())
    assert list(data).index("conditions") < list(data).index("configurations")
    flagged = data["conditions"]["flagged_runs"]
    assert len(flagged) == 2 and all(f["reason"].startswith("measured on a busy") for f in flagged)
    # the step-time plot's own title names them
    from kit.report import figures, html_sections, tables
    from kit.results.store import ResultsDir

    titles: list[str] = []  # the step-time plots' titles, as drawn
    drawn = figures.step_times_png
    monkeypatch.setattr(
        figures, "step_times_png", lambda r, t, e=False: titles.append(t) or drawn(r, t, e)
    )
    lossed = figures.loss_curves_png
    monkeypatch.setattr(figures, "loss_curves_png", lambda c, t: titles.append(t) or lossed(c, t))
    rd = ResultsDir.open(out)
    ctx = html_sections.context(rd, tables.tables(rd, preview=True))
    for plot in html_sections.loss_section(ctx).plots:  # the loss plot says which run it shows
        plot.draw()  # drawn where its bytes are wanted
    assert titles and "first timed run that counted" in titles.pop()
    for plot in html_sections.step_time_section(ctx).plots:
        plot.draw()
    assert titles and all(
        "2 of 2 timed runs flagged: measured on a busy machine" in t for t in titles
    )
    md = (out / "report.md").read_text()
    assert md.index("**Conditions: 2 of 2 timed runs flagged") < md.index("## Comparison (D1)")
    page = marked(out / "report.html", tmp_path / "busy.html", "Conditions: 2 of 2", "p")
    assert first_screen_rows(page, tmp_path / "b1", "busy"), "the flag is below the fold"
    pushed = tmp_path / "busy-pushed.html"
    filler = '<div style="height: 900px">a long preamble</div>\n<h2 id="summary">'
    pushed.write_text(page.read_text("utf-8").replace('<h2 id="summary">', filler, 1))
    assert first_screen_rows(pushed, tmp_path / "b2", "busy-pushed") == []
    # compare: a flagged side makes the class ambiguous, and the gate says it cannot decide
    res = cli("compare", out, out, "--preview", "--json", "--fail-slower", "1")
    assert res.exit_code == 0, res.output
    (e,) = json.loads(res.stdout)["both"]
    assert e["verdict"] == "ambiguous", e
    assert e["flagged_a"].startswith("2 of 2 timed runs flagged")
    assert "the gate could not decide" in res.stderr
    assert (
        cli("compare", out, out, "--preview", "--fail-slower", "1", "--fail-ambiguous").exit_code
        == 7
    )

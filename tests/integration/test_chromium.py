"""report.html in headless Chromium, Debian's `chromium` (issue 7): it renders offline, writes
nothing to the console, and a screenshot shows the comparison table.

Needs /usr/bin/chromium (`apt-get install -y chromium`) or MICAKIT_CHROMIUM=PATH; skipped with
that reason elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.cli.test_html_report import both_sides

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
    "--window-size=1280,1400",
    # offline: no name resolves, so anything the page tried to fetch would fail and log
    "--host-resolver-rules=MAP * ~NOTFOUND",
]
TABLE_BORDER = 204  # the report's table borders are #ccc; no other line on the page is


def chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
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


def test_report_html_renders_offline_and_shows_the_table(tmp_path, cli, fake_env):
    out = both_sides(tmp_path, cli, fake_env)
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
    keep = os.environ.get("MICAKIT_KEEP_SCREENSHOT")
    if keep:  # to look at it: MICAKIT_KEEP_SCREENSHOT=/tmp/report.png pytest ...
        shutil.copy(shot, keep)

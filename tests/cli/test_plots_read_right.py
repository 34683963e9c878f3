"""Each plot says its labels in its own title (a plot pasted elsewhere keeps them), report.md
links the plots, and report.html links rerun.sh rather than holding pages of shell."""

from __future__ import annotations

import re

import pytest

from kit.report import figures
from kit.results import fanout
from tests.conftest import CONTENDER, contender_args, fake_nanogpt_protocol, pytorch_args

DRAWN = ("step_times_png", "loss_curves_png", "compile_costs_png", "kernel_families_png")


@pytest.fixture
def titles(monkeypatch):
    """Every plot's title as the report draws it: drawn in this process, where it is recorded
    (the kit draws in another where it may fork: kit.report.drawer, html.Drawing)."""
    monkeypatch.setattr(fanout, "_forkable", lambda size, least=None: False)
    said: list[str] = []
    for name in DRAWN:
        draw = getattr(figures, name)

        def recorded(data, title, *rest, _draw=draw):
            said.append(title)
            return _draw(data, title, *rest)

        monkeypatch.setattr(figures, name, recorded)
    return said


@pytest.mark.slow  # runs a whole series: more than a few seconds
def test_each_plot_names_its_labels_and_the_reports_link_plots_and_rerun(
    tmp_path, fast_protocol, fake_env, cli, titles
):
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    assert cli(*contender_args(out, fast_protocol, "--precision", "float32")).exit_code == 0
    # rule 6 withholds the time (no check), and the card "cpu" is not the protocol's (D3)
    assert titles and all(" · card not named" in t for t in titles), titles
    assert all("withheld" in t for t in titles if t.startswith("Training loss"))
    del titles[:]
    assert cli("publish", out, "--preview").exit_code == 0
    assert any(t.startswith("Step times") for t in titles)
    assert all(" · preparation" in t and "withheld" not in t for t in titles), titles

    md = (out / "report.md").read_text()
    plots = sorted(p.relative_to(out).as_posix() for p in (out / "plots").glob("*.png"))
    assert plots and "## Plots" in md
    for rel in plots:
        assert f"]({rel})" in md, rel
    page = (out / "report.html").read_text()
    assert 'href="rerun.sh"' in page
    script = (out / "rerun.sh").read_text()
    body = [line for line in script.splitlines() if len(line) > 30 and not line.startswith("#")]
    assert not any(line in page for line in body[:5])
    assert not re.search(r"<pre><code>[^<]*micakit series", page)
    assert cli("verify", out).exit_code == 0


@pytest.mark.slow  # runs a whole series: more than a few seconds
def test_a_smoke_series_describes_its_scaled_down_model_once(tmp_path, fake_env, cli):
    protocol = fake_nanogpt_protocol(tmp_path / "p.toml")
    fake_env(step_ms={"*": 2.0})
    out = tmp_path / "r"
    assert cli(*pytorch_args(out, protocol, "--smoke", "--contender", CONTENDER)).exit_code == 0
    md = (out / "report.md").read_text()
    assert md.count("scaled down for the CPU smoke series") == 1
    assert md.count("M1, scaled down") >= 3
    assert cli("verify", out).exit_code == 0

"""kit.telemetry.graphbreaks: the counts of a log written under TORCH_LOGS=graph_breaks,recompiles."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kit.telemetry.graphbreaks import GRAPH_BREAK_ENV, GraphBreakCounts, parse_graph_break_log

LOGS = Path(__file__).parents[2] / "fixtures" / "torchlogs"


def _counts(name: str) -> GraphBreakCounts:
    return parse_graph_break_log((LOGS / name).read_text())


def test_breaks_sites_and_recompiles_of_torch_2_13() -> None:
    counts = _counts("breaks_and_recompiles.log")
    assert (counts.graph_breaks, counts.break_sites, counts.recompiles) == (5, 2, 7)
    assert counts.breaks_per_site == {"/tmp/tl/gb.py:4": 3, "/tmp/tl/gb.py:11": 2}
    assert [b.repeated for b in counts.breaks] == [False, True, False, True, True]
    assert counts.breaks[0].reason.endswith("Failed to trace builtin operator")
    assert "Tensor.item()" in counts.breaks[2].reason
    assert counts.recompiles_per_function["g at /tmp/tl/gb.py:14"] == 2
    assert counts.recompile_limit_hits == 0


def test_recompile_limit_is_counted_apart() -> None:
    counts = _counts("recompile_limit.log")
    assert (counts.graph_breaks, counts.recompiles, counts.recompile_limit_hits) == (0, 2, 1)


def test_a_clean_run_counts_nothing() -> None:
    counts = _counts("clean.log")
    assert counts.to_dict() == {
        "graph_breaks": 0,
        "break_sites": 0,
        "recompiles": 0,
        "recompile_limit_hits": 0,
        "breaks_per_site": {},
        "recompiles_per_function": {},
        "breaks": [],
    }
    assert parse_graph_break_log("").graph_breaks == 0


def test_torch_2_1_format_takes_the_innermost_user_frame() -> None:
    counts = _counts("torch21_style.log")
    assert counts.breaks_per_site == {
        "/work/nanoGPT/model.py:104": 1,
        "/work/nanoGPT/model.py:190": 1,
    }
    assert counts.breaks[0].reason.startswith("call_function BuiltinVariable(print)")
    assert counts.recompiles == 1


def test_torch_2_3_format_stops_at_the_exception_traceback() -> None:
    counts = _counts("torch23_style.log")
    assert counts.breaks_per_site == {"/work/nanoGPT/model.py:104": 1}
    assert counts.recompiles == 2  # one behind a [rank0]: prefix
    assert counts.recompiles_per_function == {"forward at /work/nanoGPT/model.py:170": 2}


def test_lines_stamped_by_the_kit_count_the_same() -> None:
    text = (LOGS / "breaks_and_recompiles.log").read_text()
    stamped = "".join(f"{1_000_000_000 + i} {line}\n" for i, line in enumerate(text.splitlines()))
    assert parse_graph_break_log(stamped) == parse_graph_break_log(text)
    old = (LOGS / "torch21_style.log").read_text().splitlines()
    stamped_old = "".join(f"{2_000_000_000 + i} {line}\n" for i, line in enumerate(old))
    assert (
        parse_graph_break_log(stamped_old).breaks_per_site
        == _counts("torch21_style.log").breaks_per_site
    )


def test_counts_serialise_to_json() -> None:
    data = json.loads(json.dumps(_counts("breaks_and_recompiles.log").to_dict()))
    assert data["graph_breaks"] == 5 and len(data["breaks"]) == 5


@pytest.mark.slow
def test_the_installed_torch_still_logs_what_the_parser_reads(tmp_path: Path) -> None:
    """Run a small program under GRAPH_BREAK_ENV with the torch installed here, so that a change
    of torch's log format shows up as a failure here rather than as zero counts in a series."""
    pytest.importorskip("torch")
    script = tmp_path / "breaks.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch

            @torch.compile(backend="eager", dynamic=False)
            def f(x):
                x = x * 2
                print("break")
                return x + 1

            for n in (3, 3, 4):
                f(torch.ones(n))
            """
        )
    )
    run = subprocess.run(
        [sys.executable, "-u", str(script)],
        env={**os.environ, **GRAPH_BREAK_ENV},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    counts = parse_graph_break_log(run.stdout + run.stderr)
    assert counts.break_sites == 1 and counts.graph_breaks >= 2
    assert counts.recompiles >= 1
    assert next(iter(counts.breaks_per_site)).endswith("breaks.py:7")

"""The raw files a run leaves in its folder beside its stamped logs, and their readers: the
card's samples, the machine's, the check before the run, `nsys stats`' kernel table and the
graph-break log (§5 "Conditions", §6).

The engine writes them under these names and the report reads them back through these readers,
so the report reads the results directory's format, never the runner's code.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kit.measure.stamped import read_stamped
from kit.results import run_conditions
from kit.results.run_conditions import IDLE, MACHINE, SAMPLES  # noqa: F401 (their names here too)
from kit.telemetry import graphbreaks, kernels

STATS_DIR = "nsys-stats"  # the stamped output of `nsys stats`: the raw kernel table


def run_summary(log_dir: Path, start_ns: int | None, end_ns: int | None) -> dict:
    """Peak memory and the window's clocks of one run, from its samples; {} without samples."""
    read = run_conditions.from_folder(log_dir)
    return run_conditions.card_summary(read, str(log_dir), start_ns, end_ns) or {}


def machine_summary(log_dir: Path, start_ns: int | None, end_ns: int | None) -> dict:
    """A CPU run's machine: the check before it (idle.json) and its samples over the window
    (machine.jsonl); {} for a run without them (a card's run, a run from an older kit)."""
    read = run_conditions.from_folder(log_dir)
    return run_conditions.machine_summary(read, str(log_dir), start_ns, end_ns) or {}


def kernel_table(log_dir: Path) -> pd.DataFrame:
    """The kernel table of a profiled run, parsed from the raw output of `nsys stats`."""
    text = "\n".join(x.text for x in read_stamped(log_dir / STATS_DIR / "stdout.log"))
    return kernels.parse_nsys_kernsum(text)


def graph_break_counts(log_dir: Path) -> dict:
    """The counts of a graph-break run, from its raw stamped stderr (and stdout)."""
    text = "\n".join(
        x.text for name in ("stderr.log", "stdout.log") for x in read_stamped(log_dir / name)
    )
    return graphbreaks.parse_graph_break_log(text).to_dict()

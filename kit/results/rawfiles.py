"""The raw files a run leaves in its folder beside its stamped logs, and their readers: the
card's samples, the machine's, the check before the run, `nsys stats`' kernel table and the
graph-break log (§5 "Conditions", §6).

The engine writes them under these names and the report reads them back through these readers,
so the report reads the results directory's format, never the runner's code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from kit.measure.stamped import read_stamped
from kit.telemetry import graphbreaks, kernels, machine, samples

SAMPLES = "samples.jsonl"
IDLE = "idle.json"
MACHINE = "machine.jsonl"  # a CPU series' samples of the machine
STATS_DIR = "nsys-stats"  # the stamped output of `nsys stats`: the raw kernel table


def run_summary(log_dir: Path, start_ns: int | None, end_ns: int | None) -> dict:
    """Peak memory and the window's clocks of one run, from its samples; {} without samples."""
    path = log_dir / SAMPLES
    if not path.exists():
        return {}
    return samples.summarize_samples(path, start_ns, end_ns).to_dict()


def machine_summary(log_dir: Path, start_ns: int | None, end_ns: int | None) -> dict:
    """A CPU run's machine: the check before it (idle.json) and its samples over the window
    (machine.jsonl); {} for a run without them (a card's run, a run from an older kit)."""
    path = log_dir / MACHINE
    if not path.exists():
        return {}
    during = machine.summarize_machine(path, start_ns, end_ns)
    before = json.loads((log_dir / IDLE).read_text("utf-8")) if (log_dir / IDLE).exists() else {}
    return {
        "busy_before": bool(before.get("busy", False)),
        "waited_s": before.get("waited_s"),
        "load_1m_before": before.get("load_1m"),
        "others_cpu_share_before": before.get("others_cpu_share"),
        "busiest_before": "; ".join(before.get("busiest") or ()),
        "busy_share": before.get("busy_share"),
        "others_cpu_share": during.others_cpu_share,
        "load_1m_max": during.load_1m_max,
        "cpu_mhz_median": during.cpu_mhz_median,
        "machine_sample_count": during.sample_count,
    }


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

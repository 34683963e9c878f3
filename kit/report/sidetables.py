"""The tables beside the step times (§5 "Conditions", §6, amendment 2), from raw files alone.

- conditions: per run, peak memory and the window's clocks from its samples, and the flags; on
  a CPU, the machine's load, others' share of its CPUs and its clock, and the busy mark;
- libraries: per configuration, what its discarded run's processes opened (LD_DEBUG output);
- kernels: per profiled run, its kernel table (nsys stats output) and the families;
- graph breaks: per compiled mode, the counts from its TORCH_LOGS run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from kit.protocol.load import FAMILIES, Protocol
from kit.results import rawfiles, run_conditions
from kit.results.documents import Plan
from kit.results.planned import GRAPH_BREAKS, PROFILE
from kit.results.run_conditions import Conditions
from kit.results.store import RECORDS, ResultsDir
from kit.status import RunStatus
from kit.telemetry import kernels, libraries
from kit.telemetry.samples import flag_runs

SEPARATE = (PROFILE, GRAPH_BREAKS)
# NVML's clock-event reasons counted one by one, each a column `<name>_samples`
REASONS = (
    "sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown", "sync_boost",
)  # fmt: skip


def conditions_columns(
    rd: ResultsDir,
    runs: pd.DataFrame,
    listing: Mapping[str, frozenset[str]],
    kept: Mapping[int, Conditions] | None = None,
) -> pd.DataFrame:
    """Per run: peak memory (whole run) and the window's clocks and clock events; on a CPU, the
    machine's. `kept`: each run's conditions as its record keeps them, or as `verify` worked
    them out again from the bytes it hashed (kit.results.run_conditions), by run id; a run
    without (a record from an older kit) has them worked out here from its raw files.
    `listing`: what each run folder holds (`ResultsDir.listing`)."""
    kept = kept or {}
    rows, machine = [], []
    starts, ends = runs["window_start_ns"].tolist(), runs["window_end_ns"].tolist()
    empty = conditions_row(0, {})  # the row of a run without samples, made once
    for run_id, log_dir, lo, hi in zip(runs["run_id"], runs["log_dir"], starts, ends):
        found = kept.get(run_id)
        if found is None:
            held = listing.get(log_dir, frozenset())
            read = run_conditions.from_folder(rd.root / log_dir, held, f"{log_dir}/")
            found = run_conditions.summarize(read, str(rd.root / log_dir), _int(lo), _int(hi))
        # a run without samples (a CPU series, a skipped profile) has an empty row
        card = found.get(run_conditions.CARD)
        rows.append(conditions_row(run_id, card) if card else {**empty, "run_id": run_id})
        # a card's run, or one from a kit that did not sample the CPUs, has no machine
        machine.append({"run_id": run_id, **(found.get(run_conditions.CPU) or {})})
    table = pd.DataFrame(rows, columns=[
        "run_id", "peak_memory_bytes", "sm_clock_median_mhz", "temperature_max_c",
        "power_median_w", "thermal_event_samples", "power_event_samples",
        "hw_slowdown_event_samples", "sample_count", "mem_clock_median_mhz",
        "throttled_samples",
        *(f"{name}_samples" for name in REASONS),
    ])  # fmt: skip
    return table.merge(pd.DataFrame(machine, columns=MACHINE_COLUMNS), on="run_id", how="left")


def conditions_row(run_id: int, summary: Mapping[str, Any]) -> dict[str, Any]:
    """A run's row of the conditions from its samples' summary (`SampleSummary.to_dict()`, or
    {} for a run without samples)."""
    events = summary.get("clock_events") or {}
    return {
        "run_id": run_id,
        "peak_memory_bytes": summary.get("peak_memory_bytes"),
        "sm_clock_median_mhz": summary.get("sm_clock_median_mhz"),
        "temperature_max_c": summary.get("temperature_max_c"),
        "power_median_w": summary.get("power_median_w"),
        "thermal_event_samples": summary.get("thermal_event_samples", 0),
        "power_event_samples": summary.get("power_event_samples", 0),
        "hw_slowdown_event_samples": summary.get("hw_slowdown_event_samples", 0),
        "sample_count": summary.get("sample_count", 0),
        "mem_clock_median_mhz": summary.get("mem_clock_median_mhz"),
        "throttled_samples": summary.get("throttled_samples", 0),
        # the clock-event reasons one by one (the kit's clock diagnostics)
        **{f"{name}_samples": events.get(name, 0) for name in REASONS},
    }


# a CPU run's machine (§5 Conditions on a CPU): the check before it, and its timed window
MACHINE_COLUMNS = [
    "run_id", "busy_before", "waited_s", "load_1m_before", "others_cpu_share_before",
    "busiest_before", "busy_share", "others_cpu_share", "load_1m_max", "cpu_mhz_median",
    "machine_sample_count",
]  # fmt: skip
BUSY = "measured on a busy machine"


def flags(runs: pd.DataFrame) -> pd.DataFrame:
    """§5's flags on the timed runs that have samples: run_id, flagged, flag_reasons. A card's
    come from its samples (kit.telemetry.samples.flag_runs), a CPU run's from `busy_reason`."""
    timed = runs[(runs["kind"] == "timed") & (runs["sample_count"] > 0)]
    parts = []
    if not timed.empty:
        flagged = flag_runs(timed.rename(columns={"config": "configuration"}))
        parts.append(flagged[["run_id", "flagged", "flag_reasons"]])
    cpu = runs[(runs["kind"] == "timed") & runs["busy_share"].notna()]
    if not cpu.empty:
        # only a run busy before or during its window has a reason to word (`busy_reason`'s
        # two tests, on whole columns); its row as a plain dict
        during = pd.to_numeric(cpu["others_cpu_share"], errors="coerce")
        busy = cpu["busy_before"].astype(bool) | (during > cpu["busy_share"].astype(float))
        rows = iter(cpu.loc[busy, BUSY_COLUMNS].to_dict("records"))
        reasons = [busy_reason(next(rows)) if b else "" for b in busy.tolist()]
        parts.append(
            pd.DataFrame(
                {"run_id": cpu["run_id"], "flagged": [bool(x) for x in reasons],
                 "flag_reasons": reasons}
            )
        )  # fmt: skip
    if not parts:
        return pd.DataFrame(columns=["run_id", "flagged", "flag_reasons"])
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


BUSY_COLUMNS = [
    "busy_share",
    "busy_before",
    "waited_s",
    "others_cpu_share_before",
    "others_cpu_share",
]


def busy_reason(r: Mapping[str, Any] | pd.Series) -> str:
    """Why a CPU run is marked measured on a busy machine, "" where it is not: other processes
    used more than the protocol's share of the CPUs before it (after the check's wait) or over
    its timed window."""
    limit = float(r["busy_share"])
    said = []
    if bool(r["busy_before"]) is True:
        waited = f" (after a wait of {float(r['waited_s']):.0f} s)" if r["waited_s"] else ""
        said.append(
            f"others used {float(r['others_cpu_share_before']):.0%} of the CPUs before it{waited}"
        )
    during = r["others_cpu_share"]
    if not pd.isna(during) and float(during) > limit:
        who = "" if said else "others used "
        what = "" if said else " of the CPUs"
        said.append(f"{who}{float(during):.0%}{what} during its timed steps")
    if not said:
        return ""
    return f"{BUSY}: {' and '.join(said)} (above {limit:.0%})"


def _int(x: float | None) -> int | None:
    return None if x is None or pd.isna(x) else int(x)


def libraries_table(rd: ResultsDir, runs: pd.DataFrame) -> pd.DataFrame:
    """Amendment 2: per configuration, the libraries its discarded run opened."""
    dirs = {}
    for _, r in runs[runs["kind"] == "discarded"].iterrows():
        path = rd.root / r["log_dir"] / "ld_debug"
        if path.is_dir():
            dirs[r["config"]] = path
    rows = []
    for config, table in libraries.tables_by_configuration(dirs).items():
        for lib in table.opened:
            rows.append(
                {
                    "config": config,
                    "library": lib.name,
                    "path": lib.path,
                    "nvidia": lib.nvidia,
                    "processes": lib.processes,
                    "nvrtc_opened_by_config": table.nvrtc_opened,
                }
            )
    return pd.DataFrame(
        rows,
        columns=["config", "library", "path", "nvidia", "processes", "nvrtc_opened_by_config"],
    )


def kernel_tables(
    rd: ResultsDir, runs: pd.DataFrame, protocol: Protocol
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str], list[str]]:
    """§6: every profiled run's kernel table, its families, PyTorch's attention by config, and
    each profiled run whose table cannot be read, with why (listed, never dropped silently).

    Labelled everywhere as the profiled run's kernel time: it explains a step time, never
    stands in for one.
    """
    families_path = protocol.beside(FAMILIES)
    families = kernels.load_families(families_path) if families_path.exists() else []
    tables, grouped, attention, unreadable = [], [], {}, []
    for _, r in runs[(runs["kind"] == "profile") & (runs["status"] == RunStatus.OK)].iterrows():
        try:
            t = rawfiles.kernel_table(rd.root / r["log_dir"])
        except kernels.KernelTableError as e:
            where = f"{r['log_dir']}/{rawfiles.STATS_DIR}"
            unreadable.append(
                f"{r['config']} has no kernel table: nsys stats' output in {where} "
                f"cannot be read ({e})"
            )
            continue
        except FileNotFoundError:
            unreadable.append(
                f"{r['config']} has no kernel table: {r['log_dir']} holds no output of nsys stats"
            )
            continue
        tables.append(t.assign(config=r["config"]))
        grouped.append(kernels.group_families(t, families).assign(config=r["config"]))
        if r["side"] == "pytorch":
            attention[r["config"]] = kernels.attention_kind(t)
    label = kernels.KERNEL_TIME_LABEL
    kernel = (
        pd.concat(tables, ignore_index=True)
        if tables
        else pd.DataFrame(columns=["name", "total_time_ns", "instances", "config"])
    )
    fams = (
        pd.concat(grouped, ignore_index=True)
        if grouped
        else pd.DataFrame(
            columns=["family", "total_time_ns", "instances", "kernels", "share", "config"]
        )
    )
    kernel["label"] = label
    fams["label"] = label
    return kernel, fams, attention, unreadable


def graph_breaks_table(rd: ResultsDir, runs: pd.DataFrame) -> pd.DataFrame:
    """§6: per compiled mode, graph breaks, distinct break sites and recompiles."""
    rows = []
    for _, r in runs[runs["kind"] == "graph-breaks"].iterrows():
        if r["status"] != RunStatus.OK:
            rows.append(
                {
                    "config": r["config"],
                    "status": r["status"],
                    "graph_breaks": None,
                    "break_sites": None,
                    "recompiles": None,
                }
            )
            continue
        counts = rawfiles.graph_break_counts(rd.root / r["log_dir"])
        rows.append(
            {
                "config": r["config"],
                "status": r["status"],
                "graph_breaks": counts["graph_breaks"],
                "break_sites": counts["break_sites"],
                "recompiles": counts["recompiles"],
            }
        )
    return pd.DataFrame(
        rows, columns=["config", "status", "graph_breaks", "break_sites", "recompiles"]
    )


def missing_records(runs: pd.DataFrame) -> list[str]:
    """Amendment 8.3: the configurations whose kernel table or break counts the series lacks.

    Configurations that lack one for the same reason (no nsys on the machine, say) share one
    line, so the reason is said once.
    """
    by_why: dict[tuple[str, str], list[str]] = {}
    for _, r in runs[runs["kind"].isin(["profile", "graph-breaks"])].iterrows():
        if r["status"] == RunStatus.OK:
            continue
        what = "kernel table" if r["kind"] == "profile" else "graph-break counts"
        why = (
            r["reason"]
            if str(r["reason"]).startswith(r["status"])
            else (f"{r['status']} ({r['reason']})" if r["reason"] else r["status"])
        )
        by_why.setdefault((what, why), []).append(r["config"])
    out = []
    for (what, why), configs in by_why.items():
        who = configs[0] if len(configs) == 1 else ", ".join(configs[:-1]) + " and " + configs[-1]
        out.append(f"{who} {'has' if len(configs) == 1 else 'have'} no {what}: {why}")
    return out


def unrecorded(plan: Plan, runs: pd.DataFrame) -> list[str]:
    """§6's separate records the plan holds and no record does: the configuration ran out of
    memory and ran no further (amendment 8.1), or its run has no record (the series has not
    run it, or stopped before it)."""
    recorded = set(runs["run_id"])
    oom = runs[(runs["status"] == RunStatus.OUT_OF_MEMORY) & ~runs["kind"].isin(SEPARATE)]
    stopped = dict(zip(oom["config"][::-1], oom["run_id"][::-1]))  # each one's first
    out = []
    for r in plan.order:
        if r.kind not in SEPARATE or r.run_id in recorded:
            continue
        what = "kernel table" if r.kind == PROFILE else "graph-break counts"
        why = (
            f"out of memory in run {stopped[r.config]}, so it ran no further (amendment 8.1)"
            if r.config in stopped
            else f"run {r.run_id} has no record in {RECORDS}"
        )
        out.append(f"{r.config} has no {what}: {why}")
    return out


def library_lines(table: pd.DataFrame, names: dict[str, str] | None = None) -> list[str]:
    """Markdown: per configuration, the NVIDIA libraries opened and whether libnvrtc was.

    `names` gives each configuration as §9 names it (PyTorch with version, mode, precision
    and attention kernels), in a column beside its id.
    """
    if table.empty:
        return ["No library-open log was recorded in this series."]
    rows = []
    names = names or {}
    for config, g in table.groupby("config", sort=False):
        nvidia = sorted(set(g[g["nvidia"]]["library"])) or ["none"]
        rows.append(
            {
                "configuration": config,
                "named (§9)": names.get(config, config),
                "NVIDIA libraries opened": ", ".join(nvidia),
                "libnvrtc opened": "yes" if g["nvrtc_opened_by_config"].any() else "no",
                "libraries in all": len(g),
            }
        )
    return [pd.DataFrame(rows).to_markdown(index=False)]

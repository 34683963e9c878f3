"""§5 Conditions after a run: its samples file read back, summarised over the window, and the
flags its samples raise.

- `summarize_samples`: every summary is recomputed from the raw samples file that
  `kit.telemetry.sampler.Sampler` wrote;
- `flag_runs`: a timed run whose clocks sagged or that saw a thermal or power clock event is
  flagged, not voided: the clocks are not locked, and the samples show what the card did.
"""

from __future__ import annotations

import functools
import io
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kit.errors import UserError
from kit.telemetry.nvml import CLOCK_EVENT_BITS, HW_SLOWDOWN_EVENTS, POWER_EVENTS, THERMAL_EVENTS
from kit.telemetry.sampler import SAMPLES_SCHEMA, SAMPLES_VERSION


@dataclass(frozen=True)
class SampleSummary:
    """A run's samples summarised; always recomputed from the samples file.

    Clock, temperature, power and clock-event figures cover the window given to
    `summarize_samples` (the measured steps); the peak memory covers the whole run.
    """

    sample_count: int
    memory_read_count: int
    peak_memory_bytes: int | None
    sm_clock_median_mhz: float | None
    sm_clock_min_mhz: float | None
    sm_clock_max_mhz: float | None
    temperature_max_c: float | None
    power_median_w: float | None
    power_max_w: float | None
    thermal_event_samples: int
    power_event_samples: int
    hw_slowdown_event_samples: int
    clock_events: dict[str, int] = field(default_factory=dict)  # reason name -> samples with it
    mem_clock_median_mhz: float | None = None
    throttled_samples: int = 0  # samples with any power, thermal or hw slowdown reason
    errors: tuple[str, ...] = ()
    sampling_stopped: bool = False  # the card stopped answering mid-run
    complete: bool = True  # the file ends with its "end" record

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["errors"] = list(self.errors)
        return data


def read_samples(
    path: str | os.PathLike[str], text: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the records of a samples file, the header's version checked; `text`: the
    file's text where the caller has read it already (verify, for its hash).

    An unreadable line (a run killed mid-write) becomes an error record, so it is reported.
    """
    path = Path(path)
    header: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") if text is None else io.StringIO(text) as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                records.append(
                    {"kind": "error", "message": f"line {number} unreadable", "stopped": False}
                )
                continue
            if header is None:
                header = record
                continue
            records.append(record)
    # the file's name and version: "format" and "schema_version"; "schema" and "version" before
    if header is None or header.get("format", header.get("schema")) != SAMPLES_SCHEMA:
        raise UserError(
            f"{path} is not a micakit samples file",
            "point at a run's samples file, as written by the series",
        )
    version = int(header.get("schema_version", header.get("version", 0)))
    if version > SAMPLES_VERSION:
        raise UserError(
            f"{path} is samples version {version}; this micakit reads up to {SAMPLES_VERSION}",
            "upgrade micakit to read this results directory",
        )
    return header, records


def _median(series: pd.Series) -> float | None:
    values = series.dropna()
    return None if values.empty else float(values.median())


def _extreme(series: pd.Series, how: str) -> float | None:
    values = series.dropna()
    return None if values.empty else float(getattr(values, how)())


def summarize_samples(
    path: str | os.PathLike[str],
    start_ns: int | None = None,
    end_ns: int | None = None,
    text: str | None = None,
) -> SampleSummary:
    """Summarise a samples file; `start_ns`/`end_ns` (stamps of the kit's line clock, e.g. the
    lines of steps 100 and 400) bound the window for clocks, power and clock events (§5: the
    warm-up's compilations idle the card, and would pull its median clock down). `text`: the
    file's text where the caller has read it already."""
    return _summarized(read_samples(path, text)[1], start_ns, end_ns)


def _summarized(
    records: list[dict[str, Any]], start_ns: int | None, end_ns: int | None
) -> SampleSummary:
    frame = pd.DataFrame.from_records(records) if records else pd.DataFrame(columns=["kind"])
    if "t_ns" not in frame:
        frame["t_ns"] = pd.Series(dtype="int64")
    kinds = frame["kind"]
    samples = frame[kinds == "sample"]
    memory_records = frame[kinds.isin(["sample", "memory"])]
    errors_frame = frame[kinds == "error"]
    window = samples
    if start_ns is not None:
        window = window[window["t_ns"] >= start_ns]
    if end_ns is not None:
        window = window[window["t_ns"] <= end_ns]

    def column(name: str) -> pd.Series:
        if name in window:
            return pd.to_numeric(window[name], errors="coerce")
        return pd.Series(dtype="float64")

    reasons = column("clock_event_reasons").dropna().astype("int64").to_numpy()
    events = {
        name: int(np.count_nonzero(reasons & bit))
        for bit, name in CLOCK_EVENT_BITS.items()
        if np.any(reasons & bit)
    }
    peak = (
        pd.to_numeric(memory_records["memory_used_bytes"], errors="coerce").max()
        if "memory_used_bytes" in memory_records
        else np.nan
    )
    stopped = (
        bool(errors_frame["stopped"].fillna(False).astype(bool).any())
        if "stopped" in errors_frame
        else False
    )
    return SampleSummary(
        sample_count=len(window),
        memory_read_count=int((kinds == "memory").sum()),
        peak_memory_bytes=None if pd.isna(peak) else int(peak),
        sm_clock_median_mhz=_median(column("sm_clock_mhz")),
        sm_clock_min_mhz=_extreme(column("sm_clock_mhz"), "min"),
        sm_clock_max_mhz=_extreme(column("sm_clock_mhz"), "max"),
        temperature_max_c=_extreme(column("temperature_c"), "max"),
        power_median_w=_median(column("power_w")),
        power_max_w=_extreme(column("power_w"), "max"),
        thermal_event_samples=int(np.count_nonzero(reasons & THERMAL_EVENTS)),
        power_event_samples=int(np.count_nonzero(reasons & POWER_EVENTS)),
        hw_slowdown_event_samples=int(np.count_nonzero(reasons & HW_SLOWDOWN_EVENTS)),
        clock_events=events,
        mem_clock_median_mhz=_median(column("mem_clock_mhz")),
        throttled_samples=int(
            np.count_nonzero(reasons & (POWER_EVENTS | THERMAL_EVENTS | HW_SLOWDOWN_EVENTS))
        ),
        errors=tuple(errors_frame["message"].astype(str)) if "message" in errors_frame else (),
        sampling_stopped=stopped,
        complete=bool((kinds == "end").any()),
    )


# ---------------------------------------------------------------------------------------------
# Across runs: flags, not voids

FLAG_COLUMNS = ("configuration", "sm_clock_median_mhz", "thermal_event_samples")


def flag_runs(runs: pd.DataFrame, threshold_pct: float = 10.0) -> pd.DataFrame:
    """Flag the timed runs whose card did not run as it usually does (§5 Conditions).

    `runs` holds one row per timed run: a `configuration` key and the `SampleSummary` fields
    (`sm_clock_median_mhz`, `thermal_event_samples`, `power_event_samples`, and optionally
    `hw_slowdown_event_samples`, `sample_count`). A run is flagged when its median SM clock stood
    more than `threshold_pct` below its configuration's median (the median of the
    configuration's per-run medians), or when it saw a thermal or power clock event.

    Returns a copy with `configuration_sm_clock_median_mhz`, `sm_clock_below_pct`, `flagged` and
    `flag_reasons` ("; "-joined, "" when none). A flag voids nothing: the run keeps its time, and
    the report shows the flag beside it. On consumer cards a software power cap is common under
    full load; its count of samples stands in the reason so a reader can weigh it.
    """
    missing = [c for c in (*FLAG_COLUMNS, "power_event_samples") if c not in runs]
    if missing:
        raise ValueError(f"flag_runs needs the columns {missing}")
    out = runs.copy()
    clock = pd.to_numeric(out["sm_clock_median_mhz"], errors="coerce")
    reference = clock.groupby(out["configuration"]).transform("median")
    below_pct = (1.0 - clock / reference) * 100.0
    out["configuration_sm_clock_median_mhz"] = reference
    out["sm_clock_below_pct"] = below_pct

    def count(name: str) -> pd.Series:
        if name not in out:
            return pd.Series(0, index=out.index)
        return pd.to_numeric(out[name], errors="coerce").fillna(0).astype("int64")

    def reason(mask: pd.Series, text: pd.Series | str) -> pd.Series:
        return pd.Series(np.where(mask, text, ""), index=out.index, dtype="object")

    sagged = below_pct > threshold_pct
    no_clock = clock.isna()
    if "sample_count" in out:
        no_clock |= count("sample_count") == 0
    thermal, power, hw = (
        count("thermal_event_samples"),
        count("power_event_samples"),
        count("hw_slowdown_event_samples"),
    )
    parts = [
        reason(
            sagged,
            "sm clock "
            + below_pct.round(1).astype(str)
            + "% below configuration median ("
            + clock.round(0).astype("Int64").astype(str)
            + " vs "
            + reference.round(0).astype("Int64").astype(str)
            + " MHz)",
        ),
        reason(thermal > 0, "thermal clock event (" + thermal.astype(str) + " samples)"),
        reason(power > 0, "power clock event (" + power.astype(str) + " samples)"),
        reason(
            hw > 0, "hw slowdown clock event, thermal or power (" + hw.astype(str) + " samples)"
        ),
        reason(no_clock, "no clock samples"),
    ]
    joined = functools.reduce(lambda left, right: left + "; " + right, parts)
    out["flag_reasons"] = joined.str.replace(r"(; )+", "; ", regex=True).str.strip("; ")
    out["flagged"] = out["flag_reasons"] != ""
    return out

"""§6 profiled runs: kernel tables from Nsight Systems, their families, and PyTorch's attention.

A profiled run never yields a step time (§5: Nsight Systems slows launches); it yields the kernel
table by name, total time and launches. nsys is a command-line tool with no library, so this
module builds its command lines (`nsys_commands`) and parses what `nsys stats` prints
(`parse_nsys_kernsum`); everything else here is pure.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from kit.errors import UserError
from kit.telemetry import sdpa_probe

# §6: the families explain a step time and never stand in for one; they say what they are.
KERNEL_TIME_LABEL = "profiled run's kernel time"
OTHER_FAMILY = "other"

KERNEL_TABLE_COLUMNS = ("name", "total_time_ns", "instances")


class KernelTableError(ValueError):
    """nsys printed no kernel table that can be read. Not a `UserError`: the series records it
    beside the configuration whose table is missing and goes on (amendment 8.3's spirit)."""


# ---------------------------------------------------------------------------------------------
# Nsight Systems


def nsys_commands(
    program_argv: Sequence[str],
    report_path: str | os.PathLike[str],
    *,
    nsys: str = "nsys",
    report: str = "cuda_gpu_kern_sum",
) -> list[list[str]]:
    """The two command lines of a profiled run: `nsys profile` around the program, then
    `nsys stats` printing the kernel summary as CSV on stdout (parse it with
    `parse_nsys_kernsum`). `report_path` is the report's name with or without `.nsys-rep`;
    `report` is "gpukernsum" for Nsight Systems before 2022.4."""
    base = str(report_path)
    if base.endswith(".nsys-rep"):
        base = base[: -len(".nsys-rep")]
    profile = [
        nsys,
        "profile",
        "--output",
        base,
        "--force-overwrite",
        "true",
        "--trace",
        "cuda",
        # reduce-overhead replays CUDA graphs: trace their nodes, or their kernels go missing.
        "--cuda-graph-trace",
        "node",
        # Nothing but the kernels is wanted; CPU sampling would only add to the slowdown.
        "--sample",
        "none",
        "--cpuctxsw",
        "none",
        *program_argv,
    ]
    stats = [
        nsys,
        "stats",
        "--report",
        report,
        "--format",
        "csv",
        "--force-export",
        "true",
        f"{base}.nsys-rep",
    ]
    return [profile, stats]


_TOTAL_TIME = re.compile(r"^Total Time(?: \((ns|us|ms|s)\))?$")
_UNIT_NS = {None: 1, "ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def _csv_fields(line: str) -> list[str]:
    return next(csv.reader([line]), [])


def _number(text: str, what: str, row: int) -> float:
    try:
        # nsys writes plain numbers in CSV, but a table copied from its console has "1,234".
        return float(text.strip().replace(",", ""))
    except ValueError:
        raise KernelTableError(
            f"kernel table row {row}: {what} is {text!r}, not a number"
        ) from None


def parse_nsys_kernsum(text: str) -> pd.DataFrame:
    """The kernel table of `nsys stats --report cuda_gpu_kern_sum --format csv` (or the older
    `gpukernsum`): columns `name`, `total_time_ns`, `instances`, one row per kernel name.

    nsys prints progress lines before the table ("Generating SQLite file ...", "Processing
    [...] with [.../cuda_gpu_kern_sum.py]..."); the table starts at the CSV header holding
    "Total Time (ns)", "Instances" and "Name" ("Time (%)" in recent versions, "Time(%)" in old
    ones) and ends at the first blank line. Kernel names hold commas and quotes (C++
    templates), so rows are read as CSV. Raises `KernelTableError` when no table can be read.
    """
    lines = text.splitlines()
    start = header = None
    for index, line in enumerate(lines):
        if "Name" not in line or "Total Time" not in line:
            continue
        fields = [f.strip() for f in _csv_fields(line)]
        if "Name" in fields and "Instances" in fields and any(_TOTAL_TIME.match(f) for f in fields):
            start, header = index, fields
            break
    if start is None or header is None:
        skipped = next(
            (ln.strip() for ln in lines if "SKIPPED" in ln or "does not contain" in ln), ""
        )
        if skipped:
            raise KernelTableError(f"nsys found no CUDA kernel in the report: {skipped}")
        shown = " | ".join(ln.strip() for ln in lines if ln.strip())[:300]
        raise KernelTableError(
            "no kernel table in nsys's output (no CSV header with 'Total Time (ns)', "
            f"'Instances' and 'Name'); it printed: {shown or '(nothing)'}"
        )
    block: list[str] = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        block.append(line)
    total_col = next(i for i, f in enumerate(header) if _TOTAL_TIME.match(f))
    unit = _UNIT_NS[_TOTAL_TIME.match(header[total_col]).group(1)]  # type: ignore[union-attr]
    name_col, count_col = header.index("Name"), header.index("Instances")
    rows = []
    for number, fields in enumerate(csv.reader(block), start=1):
        if len(fields) != len(header):
            raise KernelTableError(
                f"kernel table row {number} has {len(fields)} fields where its header has "
                f"{len(header)}: {','.join(fields)[:200]!r}"
            )
        total = _number(fields[total_col], "Total Time", number) * unit
        count = _number(fields[count_col], "Instances", number)
        if total < 0 or count < 0 or count != int(count):
            raise KernelTableError(f"kernel table row {number}: impossible time or count")
        rows.append((fields[name_col], int(round(total)), int(count)))
    table = pd.DataFrame(rows, columns=list(KERNEL_TABLE_COLUMNS))
    return table.astype({"name": "object", "total_time_ns": "int64", "instances": "int64"})


# ---------------------------------------------------------------------------------------------
# Families (§6: one rules file, first match wins, unmatched is "other")

Families = list[tuple[re.Pattern[str], str]]


def load_families(path: str | os.PathLike[str]) -> Families:
    """The rules of a families file: `pattern<TAB>family` a line, '#' comment lines and blank
    lines skipped. Patterns are Python regular expressions, searched anywhere in the kernel's
    name, ignoring case; the first rule that matches names the family."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise UserError(
            f"cannot read the families file {path}: {error.strerror}",
            "name benchmarks/NanoGpt/families.tsv, or a copy of it",
        ) from error
    rules: Families = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0] or not fields[1].strip():
            raise UserError(
                f"{path}:{number}: expected 'pattern<TAB>family', found {line!r}",
                "separate the pattern from its family by one tab; start comments with '#'",
            )
        pattern, family = fields[0], fields[1].strip()
        try:
            rules.append((re.compile(pattern, re.IGNORECASE), family))
        except re.error as error:
            raise UserError(
                f"{path}:{number}: the pattern {pattern!r} is not a regular expression ({error})",
                "correct that line's pattern (Python's re syntax)",
            ) from error
    return rules


def classify(names: pd.Series, families: Families) -> pd.Series:
    """Each kernel name's family: the first rule that matches, else "other"."""
    names = names.astype(str)
    result = pd.Series(OTHER_FAMILY, index=names.index, dtype="object")
    unassigned = pd.Series(True, index=names.index)
    for pattern, family in families:
        # One pass per rule; a rule's groups, if any, are of no matter to the match.
        hit = unassigned & names.map(lambda name, p=pattern: p.search(name) is not None)
        result[hit] = family
        unassigned &= ~hit
    return result


def group_families(table: pd.DataFrame, families: Families) -> pd.DataFrame:
    """The kernel table grouped into families: `family`, `total_time_ns`, `instances`,
    `kernels` (distinct names) and `share` of the table's total time, largest first. Labelled
    (`.attrs["label"]`) as the profiled run's kernel time: it explains a step time and never
    stands in for one (§6)."""
    labelled = table.assign(family=classify(table["name"], families))
    grouped = (
        labelled.groupby("family", sort=False)
        .agg(
            total_time_ns=("total_time_ns", "sum"),
            instances=("instances", "sum"),
            kernels=("name", "nunique"),
        )
        .reset_index()
        .sort_values(["total_time_ns", "family"], ascending=[False, True], ignore_index=True)
    )
    total = grouped["total_time_ns"].sum()
    grouped["share"] = grouped["total_time_ns"] / total if total else np.nan
    grouped.attrs["label"] = KERNEL_TIME_LABEL
    return grouped


# ---------------------------------------------------------------------------------------------
# Which attention PyTorch ran (§6)

_ATTENTION_KINDS: tuple[tuple[str, str], ...] = (
    ("flash", r"pytorch_flash::"),
    ("memory-efficient", r"fmha_cutlass[FB]"),
    ("cudnn", r"cudnn.*(?:sdpa|fmha|flash|attention)|(?:sdpa|fmha|flash|attention).*cudnn"),
)
# The loss's log-softmax (cross-entropy) is no attention's; only a plain softmax counts.
_SOFTMAX = r"softmax"
_LOSS_SOFTMAX = r"log_?softmax|cross_?entropy|nll"
_PRODUCT = r"gemm|xmma|nvjet|cutlass|cublas|triton_tem_|\bbmm\b|_bmm|matmul"


def attention_kind(table: pd.DataFrame) -> str:
    """Name the attention a profiled PyTorch run used, from its kernels' names (§6).

    "flash" (pytorch_flash::), "memory-efficient" (fmha_cutlassF / fmha_cutlassB), "cudnn" (a
    cuDNN attention kernel, e.g. cudnn_generated_fort_native_sdpa_...), several joined by "+"
    when a run used more than one; "math" when none of those ran but a softmax kernel ran beside
    matrix products (a kernel summary keeps no order, so "between batched products" is read as
    "beside them"); "unknown" otherwise.
    """
    names = table["name"].astype(str)
    found = [
        kind for kind, pattern in _ATTENTION_KINDS if names.str.contains(pattern, case=False).any()
    ]
    if found:
        return "+".join(found)
    softmax = names.str.contains(_SOFTMAX, case=False) & ~names.str.contains(
        _LOSS_SOFTMAX, case=False
    )
    if softmax.any() and names.str.contains(_PRODUCT, case=False).any():
        return "math"
    return "unknown"


# ---------------------------------------------------------------------------------------------
# The attention backends PyTorch allows, read in the same environment (§6)

# kit.telemetry.sdpa_probe, run in that environment, prints one line marked so
SDPA_PROBE_MARKER = sdpa_probe.MARKER


@dataclass(frozen=True)
class SdpaBackends:
    """The scaled-dot-product-attention backends torch allows; None where torch cannot say."""

    torch_version: str
    cuda_available: bool
    flash: bool | None
    mem_efficient: bool | None
    math: bool | None
    cudnn: bool | None
    flash_attention_available: bool | None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class SdpaProbeError(ValueError):
    """The probe printed no readable report (torch missing, or the probe crashed)."""


def parse_sdpa_probe(output: str) -> SdpaBackends:
    """Read the report the SDPA probe (kit.telemetry.sdpa_probe) printed, among whatever else
    the run printed."""
    line = next(
        (ln for ln in reversed(output.splitlines()) if ln.startswith(SDPA_PROBE_MARKER + " ")),
        None,
    )
    if line is None:
        tail = " | ".join(output.strip().splitlines()[-3:])
        raise SdpaProbeError(f"the SDPA probe printed no report; its output ends: {tail!r}")
    try:
        data = json.loads(line[len(SDPA_PROBE_MARKER) + 1 :])
        return SdpaBackends(
            torch_version=str(data["torch_version"]),
            cuda_available=bool(data["cuda_available"]),
            flash=data.get("flash_sdp_enabled"),
            mem_efficient=data.get("mem_efficient_sdp_enabled"),
            math=data.get("math_sdp_enabled"),
            cudnn=data.get("cudnn_sdp_enabled"),
            flash_attention_available=data.get("is_flash_attention_available"),
        )
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise SdpaProbeError(f"the SDPA probe's report is unreadable: {line!r}") from error

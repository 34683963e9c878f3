"""What a run's conditions come to (§5 "Conditions"), from its raw files: the card's samples
(samples.jsonl), or a CPU series' machine: the check before the run (idle.json) and its samples
during it (machine.jsonl), each over the run's timed window.

A series works this out once, when the run ends, and its record keeps it (`RunRecord.conditions`),
so a report opens none of these files again; `verify` works it out again from the very bytes it
reads for their hashes and names every value that differs from the record's (D6). A record from a
kit that did not keep it (None) is read the older way: from the raw files, by the report.

    {"card": {<SampleSummary.to_dict()>}, "machine": {"busy_before": false, ...}}

each key only where the run has that file; {} for a run with neither (one that never ran).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from kit.measure import timing
from kit.telemetry import machine

SAMPLES = "samples.jsonl"  # the card's samples during the run
IDLE = "idle.json"  # the check before the run, the card's or the machine's
MACHINE = "machine.jsonl"  # a CPU series' samples of the machine
FILES = (SAMPLES, IDLE, MACHINE)
# what a run's conditions come to, as its record keeps them (its card's, its machine's)
Conditions = Mapping[str, Any]
CARD, CPU = "card", "machine"

# a file of the run's folder by its name: its text, or None where the run has none
Read = Callable[[str], str | None]


def summarize(read: Read, where: str, start_ns: int | None, end_ns: int | None) -> dict:
    """The run's conditions over its window [start_ns, end_ns] (None: the whole run); `where`:
    the run's folder, as messages name it."""
    out = {}
    card = card_summary(read, where, start_ns, end_ns)
    if card is not None:
        out[CARD] = card
    cpu = machine_summary(read, where, start_ns, end_ns)
    if cpu is not None:
        out[CPU] = cpu
    return out


def card_summary(read: Read, where: str, start_ns: int | None, end_ns: int | None) -> dict | None:
    """Peak memory and the window's clocks of one run, from its card's samples; None without."""
    text = read(SAMPLES)
    if text is None:
        return None
    # lazy: pandas, which a CPU series' runs never need here (`report` forks before loading it)
    from kit.telemetry import samples

    return samples.summarize_samples(f"{where}/{SAMPLES}", start_ns, end_ns, text=text).to_dict()


def machine_summary(
    read: Read, where: str, start_ns: int | None, end_ns: int | None
) -> dict | None:
    """A CPU run's machine: the check before it (idle.json) and its samples over the window
    (machine.jsonl); None for a run without them (a card's run, a run from an older kit)."""
    text = read(MACHINE)
    if text is None:
        return None
    during = machine.summarize_machine(f"{where}/{MACHINE}", start_ns, end_ns, text=text)
    idle = read(IDLE)
    before = json.loads(idle) if idle is not None else {}
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


def again(data: Mapping[str, bytes], folder: str, outcome: timing.Outcome) -> dict | None:
    """What the run's conditions came to over the window just judged again (`verify`), from the
    bytes just hashed (`data`, by path); None where a file does not read: `report` reads it
    again and says why."""
    read = from_bytes(data, folder)
    try:
        return summarize(read, folder, outcome.window_start_ns, outcome.window_end_ns)
    except Exception:  # noqa: BLE001 - left to `report`, which names the file and what is wrong
        return None


def from_folder(folder: Path, held: Collection[str] | None = None, prefix: str = "") -> Read:
    """The run's files read from its folder; `held`: what the folder holds, by `prefix` + name
    (`ResultsDir.listing`), so a file it lacks is not even looked for."""

    def read(name: str) -> str | None:
        if held is not None and prefix + name not in held:
            return None
        try:
            return (folder / name).read_text("utf-8")
        except FileNotFoundError:
            return None

    return read


def from_bytes(data: Mapping[str, bytes], folder: str) -> Read:
    """The run's files from bytes already read (`data`, by path `folder/name`); a file not
    among them the run does not have."""

    def read(name: str) -> str | None:
        held = data.get(f"{folder}/{name}")
        return None if held is None else held.decode("utf-8")

    return read


def differences(
    recorded: Mapping[str, Any], fresh: Mapping[str, Any]
) -> list[tuple[str, Any, Any]]:
    """Each value of a record's conditions that differs from `fresh` (worked out again from the
    raw files): (name, recorded, recomputed), named as `machine.others_cpu_share`."""
    if recorded == fresh:
        return []  # every value the same (most runs): nothing to name, nothing to flatten
    mine, again = _flat(recorded), _flat(fresh)
    return [
        (name, mine.get(name), again.get(name))
        for name in sorted({*mine, *again})
        if not _same(mine.get(name), again.get(name))
    ]


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = list(value) if isinstance(value, tuple) else value
    return out


def _same(a: object, b: object) -> bool:
    """Equal, a float within a rounding of the last digit (a record read back from JSON)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12)
    return a == b

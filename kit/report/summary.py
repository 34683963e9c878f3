"""summary.json: the one file another tool needs to read what a series concluded.

Per configuration its state, runs, median, minimum and maximum (seconds, `_s`), peak memory
(bytes); the comparisons with their verdicts and gating; the conditions (flagged runs); every
version; and relative links to the raw files every number comes from. All of it is taken from
the tables the kit recomputes from the raw logs, never from a published file. Its JSON Schema
ships in the package (kit/files/summary.schema.json).
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kit import __version__
from kit.protocol import shipped
from kit.report import aa, clocks, flags, published, resolution, states, verdict
from kit.report.tables import Tables
from kit.results import fields, jsontext, store
from kit.results.planned import CONTENDER
from kit.results.store import ResultsDir

SUMMARY = "summary.json"
SCHEMA = 5  # 2: each comparison's resolution (resolution.py), "clocks", and the comparisons'
# verdict by cycles and what the clocks say; 3: the version key "schema_version" (was "schema"),
# beside each state, verdict and publication its kind (an enum) and its reason (prose), "aa"
# (kit.report.aa) and each resolution's A/A spread; 4: "protocol", whether it is the one the
# kit ships and, where not, each key that differs (kit.protocol.shipped), "conditions" near the
# top, its flagged_runs each flagged run with its reason (a count before) and "said", the
# resolution in the protocol's direction (PyTorch over contender) with no interval below
# MIN_RUNS runs a side; 5: nothing in this file, its report's notes: report.md, report.html, the
# step-time plot and the terminal count each configuration's flagged runs with their kinds
# (kit.report.tables.said_notes), where they named each flagged run; 1 to 4 still read and
# verified
VERSION_KEY = "schema_version"
# the report's layout since this schema (plots titled with their labels, true axes, report.md
# linking the plots, report.html linking rerun.sh): an earlier directory's is made as it was
SCHEMA_OF_LAYOUT = 3
# a protocol other than the shipped one said at the top of report.md and report.html since
# this schema: an earlier directory's report is made without
SCHEMA_OF_SHIPPED = 4
# each configuration's flagged runs counted in the report's notes since this schema, not named
# one by one: an earlier directory's report names them
SCHEMA_OF_SAID_NOTES = 5
OLD_VERSION_KEY = "schema"  # summary.json's schema 1 and 2
SCHEMA_FILE = "summary.schema.json"
NEVER_KEY = "break_even_steps_vs_eager"


def schema() -> dict[str, Any]:
    """The JSON Schema of summary.json, as shipped in the package."""
    return json.loads((resources.files("kit") / "files" / SCHEMA_FILE).read_text("utf-8"))


def _plain(value: Any) -> Any:
    """A cell as JSON has it: NaN is null, numpy scalars are Python's."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN or infinity
    return value


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The frame's rows as JSON has them (`_plain` on each cell of `to_dict("records")`), the
    numeric columns made whole at once: a 15,000-run series' per-run sections are a third of
    a million cells."""
    keys = list(frame.columns)
    if len(set(keys)) != len(keys) or not all(isinstance(k, str) for k in keys):
        return [{k: _plain(v) for k, v in row.items()} for row in frame.to_dict("records")]
    numeric = {k for k, t in frame.dtypes.items() if isinstance(t, np.dtype) and t.kind in "fiub"}
    others = [k for k in keys if k not in numeric]
    # the other columns (text, objects, pandas' own types) as to_dict gives their cells
    rest = frame[others].to_dict("records") if others else [{}] * len(frame)
    columns = {
        k: _plain_numbers(frame[k]) if k in numeric else [_plain(row[k]) for row in rest]
        for k in keys
    }
    return [dict(zip(keys, values, strict=True)) for values in zip(*columns.values(), strict=True)]


def _plain_numbers(column: pd.Series) -> list[float | int | bool | None]:
    """A numpy column's cells as Python's numbers; a float that is NaN or infinite is null."""
    if column.dtype.kind == "f":
        return [x if math.isfinite(x) else None for x in column.tolist()]
    return column.tolist()


def _state(row: dict[str, Any]) -> str:
    state = row.get("state")
    if isinstance(state, str) and state:
        return state
    if row.get("out_of_memory"):
        return "out of memory"
    return "complete" if row.get("median_step_s") is not None else "no time"


def _publication(cell: object) -> dict[str, str]:
    """A publication cell (rule 6) as its kind, an enum of states.Publication's names, and the
    reason beside it: why it is withheld, or the preview's label."""
    kind = states.Publication.of(cell)
    text = "" if cell is None else str(cell)
    if kind is states.Publication.WITHHELD:
        return {"publication_kind": "withheld", "publication_reason": text.partition(": ")[2]}
    if kind is states.Publication.PREVIEW:
        return {"publication_kind": "preview", "publication_reason": text}
    return {"publication_kind": "published", "publication_reason": ""}


def _verdict(said: object) -> dict[str, str]:
    """D1's verdict cell as its kind (verdict.VERDICTS) and, with no verdict, the reason."""
    text = str(said or "")
    word, _, why = text.partition(": ")
    if word == verdict.NO_VERDICT:
        return {"verdict_kind": verdict.NO_VERDICT, "verdict_reason": why}
    return {"verdict_kind": text, "verdict_reason": ""}


def _typed(row: dict[str, Any], found: dict[tuple, dict]) -> dict[str, Any]:
    """A comparison row with each prose cell's kind and reason beside it: what a dashboard
    reads without matching words. The contender's state is its configuration's (`found`)."""
    key = (row["card"], row["model"], row["precision"], row["contender_build"])
    config = found.get(key, {})
    return row | {
        "contender_state_kind": config.get("state"),
        "contender_state_reason": config.get("state_reason") or "",
        "correctness_kind": states.CheckOutcome.of(str(row.get("correctness") or "")).value,
        **_publication(row.get("publication")),
        **_verdict(row.get("verdict")),
    }


def _comparisons(
    t: Tables, resolved: bool, configurations: list[dict], pm: bool = True
) -> list[dict[str, Any]]:
    """The comparison table's rows, each with its kinds and reasons; with schema 2 and later,
    each with its resolution (null where a side shows no time), the kit's diagnostic outside
    §10."""
    found = {
        (c["card"], c["model"], c["precision"], c["variant"]): c
        for c in configurations
        if c["side"] == CONTENDER
    }
    rows = [_typed(row, found) for row in _rows(t.comparison)]
    if not resolved:
        return rows
    resolved_rows = resolution.of_comparisons(t, pm)
    return [row | {"resolution": x.to_json() if x else None} for row, x in zip(rows, resolved_rows)]


def build(rd: ResultsDir, t: Tables, resolved: bool = True) -> dict[str, Any]:
    """summary.json's content; `resolved`: this kit's schema, with the resolution, else schema
    1 (as a directory published before it has it)."""
    manifest = rd.manifest()
    runs = t.runs
    configurations = []
    for row in _rows(t.configurations):
        mine = runs[runs["config"] == row["config"]]
        folders = sorted({str(d) for d in mine.get("log_dir", pd.Series(dtype=str)) if d})
        state = _state(row)
        if (
            state != "complete"
        ):  # §5, amendments 5.2 and 8: only a complete configuration has a time
            row |= {"median_step_s": None, "min_step_s": None, "max_step_s": None}
        configurations.append(
            {
                **row,
                "state": state,
                **_publication(row.get("publication")),
                "units": {"step": "s", "peak_memory": "bytes"},
                "raw": folders,
            }
        )
    versions = rd.versions().to_json()
    document = {
        VERSION_KEY: SCHEMA,
        "kit": {"version": __version__, "commit": manifest.kit_commit},
        "protocol_sha256": manifest.protocol_sha256,
        # §3 rule 1: the protocol file against the one this kit ships, key by key
        "protocol": shipped.against_shipped(rd.root / store.PROTOCOL).to_json(),
        "series": dict(manifest.spec),
        "date": manifest.date_utc or None,  # when the series started (UTC)
        # §5's flags at the top, where a reader of the numbers below meets them
        "conditions": {
            "said": flags.headline(runs, t.aa) or None,
            "flagged_runs": flags.flagged_runs(runs),
        },
        "configurations": configurations,
        "comparisons": _comparisons(t, resolved, configurations, resolution.in_pm(rd)),
        # what compiling costs (per complete PyTorch mode): warm-up and break-even against eager
        # a break-even of infinity: the mode's steps are not faster, it never pays ("never")
        "compile_costs": [
            {k: _plain(v) for k, v in row.items()}
            | ({"break_even_steps_vs_eager": "never"} if row[NEVER_KEY] == math.inf else {})
            for row in t.compile_costs.to_dict("records")
        ],
        # the kit's diagnostic outside §10: each timed run's clocks, shares and cycles
        "clocks": _clocks(runs),
        # the kit's diagnostic outside §10: each chosen configuration's A/A runs beside its twin
        "aa": _aa(t),
        # each recorded run's per-run fields, as declared once (kit.results.fields)
        RUNS: _rows(runs[[*RUN_KEYS, *fields.NAMES]]),
        "versions": versions,
        "files": {
            "manifest": store.MANIFEST,
            "plan": store.PLAN,
            "runs": store.RECORDS,
            "protocol": store.PROTOCOL,
            "versions": "versions.json",
            "tables": [f"tables/{name}.csv" for name, _ in t.items()],
        },
    }
    return document if resolved else _schema_1(document)


# the fields schema 3 added beside the prose ones: each one's kind (an enum) and its reason
TYPED = (
    "publication_kind", "publication_reason", "verdict_kind", "verdict_reason",
    "contender_state_kind", "contender_state_reason", "correctness_kind",
)  # fmt: skip


def _schema_1(document: dict[str, Any]) -> dict[str, Any]:
    """summary.json as a kit before schema 2 wrote it (no resolution, no kinds, the version
    under "schema"): what `verify` recomputes for a directory it published."""
    older = {k: v for k, v in document.items() if k != VERSION_KEY}
    # its conditions: a count of the flagged runs, after the compile costs
    older.pop("conditions", None)
    flagged = len(document["conditions"]["flagged_runs"])
    at = list(older).index("compile_costs") + 1
    items = list(older.items())
    older = dict([*items[:at], ("conditions", {"flagged_runs": flagged}), *items[at:]])
    for part in ("configurations", "comparisons"):
        older[part] = [{k: v for k, v in row.items() if k not in TYPED} for row in older[part]]
    return {OLD_VERSION_KEY: 1, **older}


RUNS = "runs"
RUN_KEYS = ["run_id", "config", "kind", "status"]  # summary.json's runs[], before the fields

CLOCK_FIELDS = [
    "run_id", "config", "clock_source", "clock_mhz", "mem_clock_median_mhz", "clock_window",
    "step_s", "step_cycles", *clocks.SHARES,
]  # fmt: skip


def _clocks(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Per timed run, its clocks (kit.report.clocks); JSON's null where not readable."""
    timed = runs[runs["kind"] == "timed"]
    fields = [f for f in CLOCK_FIELDS if f in timed]
    return _rows(timed[fields])


def _aa(t: Tables) -> list[dict[str, Any]]:
    """Per chosen configuration, its A/A row (tables/aa.csv) with its A/A runs; [] for a series
    without A/A runs."""
    if t.aa is None:
        return []
    return [row | {"runs": _rows(aa.runs_of(t.runs, row["config"]))} for row in _rows(t.aa)]


def text(rd: ResultsDir, t: Tables, resolved: bool = True) -> str:
    return _dumps(build(rd, t, resolved))


def _dumps(document: Any) -> str:
    # allow_nan=False: a value JSON cannot hold is a bug here, never a file other tools choke on
    # as json.dumps(document, indent=2, allow_nan=False, default=str) writes it, at the C
    # encoder's speed (a 15,000-run series' per-run section took seconds in pure Python)
    return jsontext.dumps(document) + "\n"


def version_of(document: object) -> int | None:
    """A summary.json's schema version, under either key ("schema" before schema 3)."""
    if not isinstance(document, dict):
        return None
    version = document.get(VERSION_KEY, document.get(OLD_VERSION_KEY))
    return version if isinstance(version, int) else None


def published_version(root: Path) -> int:
    """The schema of the summary.json a directory was published with; this kit's where there is
    none yet or it does not read (verify names it then)."""
    document = published.document(root / SUMMARY)  # parsed once (kit.report.published)
    found = None if document is None else version_of(document)
    return SCHEMA if found is None else found


def as_older(path: Path, recomputed: bytes) -> bytes:
    """The recomputed summary.json as an older kit's (its version below SCHEMA) holds it: the
    keys added since, which the published file lacks, left out, and the version under the key
    that kit wrote; else the recomputation unchanged."""
    try:
        if path.read_bytes() == recomputed:  # a clean directory: nothing to shape
            return recomputed
    except OSError:
        return recomputed
    held = published.document(path)
    if held is None:
        return recomputed
    version = version_of(held)
    if version is None or version >= SCHEMA:
        return _without_later(recomputed, held)
    fresh = json.loads(recomputed)
    conditions = fresh.get("conditions")
    if version < 4 and isinstance(conditions, dict):  # a count of the flagged runs, then
        conditions["flagged_runs"] = len(conditions.get("flagged_runs") or [])
    shaped = _like(fresh, held)
    named = isinstance(held, dict) and VERSION_KEY in held  # a version: a dict
    key = VERSION_KEY if named else OLD_VERSION_KEY
    shaped.pop(VERSION_KEY, None)
    return _dumps({key: version, **shaped}).encode("utf-8")


def _without_later(recomputed: bytes, published: object) -> bytes:
    """This schema's recomputation less what a file written before it was added lacks: the
    per-run section, and each per-run field added since (kit.results.fields.LATER)."""
    runs = published.get(RUNS) if isinstance(published, dict) else None
    lacking: list[str] = []
    if isinstance(runs, list) and runs:
        held = {k for row in runs if isinstance(row, dict) for k in row}
        lacking = [k for k in fields.LATER if k not in held]
    if isinstance(runs, list) and not lacking:  # it lacks nothing: the recomputation as it is
        return recomputed
    document = json.loads(recomputed)
    if not isinstance(runs, list):
        document.pop(RUNS, None)
    else:
        document[RUNS] = [{k: v for k, v in r.items() if k not in lacking} for r in document[RUNS]]
    return _dumps(document).encode("utf-8")


def _like(new: Any, old: Any) -> Any:
    """`new` with the keys `old` lacks left out, through dicts and lists alike."""
    if isinstance(new, dict) and isinstance(old, dict):
        # in the older file's order: a key that moved since stays where that kit wrote it
        return {k: _like(new[k], v) for k, v in old.items() if k in new}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [_like(a, b) for a, b in zip(new, old)]
    return new

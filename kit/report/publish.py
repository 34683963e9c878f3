"""Publishing a results directory: the tables, report.md, report.html and rerun.sh, written
from the raw files; and `verify`, which recomputes them and names every difference."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pandas as pd

from kit.engine import store
from kit.engine.store import ResultsDir
from kit.report import html, rerun, summary, tables
from kit.report.markdown import markdown_report  # the wording lives apart from the numbers
from kit.report.tables import Tables


def write(rd: ResultsDir, t: Tables) -> list[Path]:
    """The tables in CSV (every digit), report.md, rerun.sh, plots/ and report.html.

    Each file is written whole (atomically). The HTML is the Markdown's own text with plots
    added, so §9's wording holds in both; rerun.sh carries rule 7's "every ... script".
    """
    written = []
    for name, df in t.items():
        rd.write_text(f"tables/{name}.csv", df.to_csv(index=False, float_format="%.17g"))
        written.append(rd.root / "tables" / f"{name}.csv")
    text = markdown_report(rd, t)
    rd.write_text("report.md", text)
    written.append(rd.root / "report.md")
    rd.write_text(summary.SUMMARY, summary.text(rd, t))  # the one file other tools read
    written.append(rd.root / summary.SUMMARY)
    written.append(rerun.write(rd))
    written += html.write(rd, t, text, (rd.root / rerun.RERUN).read_text("utf-8"))
    return written


def verify(rd: ResultsDir, checks: dict[str, str] | None = None) -> list[str]:
    """Every difference between what the directory publishes and the recomputation."""
    problems = []
    for record in rd.records():
        for rel, digest in record.get("files", {}).items():
            path = rd.root / rel
            if not path.exists():
                problems.append(f"{rel}: raw file missing (run {record['run_id']})")
            elif store.sha256_file(path) != digest:
                problems.append(f"{rel}: raw file changed since run {record['run_id']} wrote it")
    try:
        fresh = tables.tables(rd, checks)
    except ValueError as e:  # a raw log that no longer parses
        return [*problems, f"cannot recompute: {e}"]
    for name, df in fresh.items():
        path = rd.root / "tables" / f"{name}.csv"
        if not path.exists():
            problems.append(f"tables/{name}.csv: missing")
            continue
        published = pd.read_csv(path, keep_default_na=False, na_values=[""])
        recomputed = pd.read_csv(_as_csv_buffer(df), keep_default_na=False, na_values=[""])
        problems += _diff_frames(f"tables/{name}.csv", published, recomputed)
    return problems


def _as_csv_buffer(df: pd.DataFrame):
    return io.StringIO(df.to_csv(index=False, float_format="%.17g"))


def _diff_frames(where: str, published: pd.DataFrame, recomputed: pd.DataFrame) -> list[str]:
    if list(published.columns) != list(recomputed.columns):
        return [f"{where}: columns {list(published.columns)} differ from the recomputed ones"]
    if len(published) != len(recomputed):
        return [f"{where}: {len(published)} rows published, {len(recomputed)} recomputed"]
    out = []
    for col in published.columns:
        for i, (a, b) in enumerate(zip(published[col], recomputed[col])):
            if _same(a, b):
                continue
            out.append(f"{where} row {i + 2} column {col}: published {a!r}, recomputed {b!r}")
    return out


def _same(a: object, b: object) -> bool:
    try:
        fa, fb = float(a), float(b)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(a) == str(b)
    if math.isnan(fa) and math.isnan(fb):
        return True
    return fa == fb or abs(fa - fb) <= 1e-12 * max(abs(fa), abs(fb))

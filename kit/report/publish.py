"""Publishing a results directory: the tables, report.md, report.html and rerun.sh, written
from the raw files; and `verify`, which recomputes them and names every difference."""

from __future__ import annotations

import functools
import io
import math
import os
from pathlib import Path

import pandas as pd

from kit.errors import UserError
from kit.report import html, rerun, summary, tables
from kit.report.markdown import markdown_report  # the wording lives apart from the numbers
from kit.report.tables import Tables
from kit.results import audit, fanout, store
from kit.results.store import ResultsDir
from kit.results.tablefile import csv_text, read_table


def render(rd: ResultsDir, t: Tables) -> dict[str, bytes]:
    """report.md, rerun.sh, plots/ and report.html by their paths, built in memory.

    The HTML is the Markdown's own text with plots added, so §9's wording holds in both;
    rerun.sh carries rule 7's "every ... script".
    """
    text = markdown_report(rd, t)
    script = rerun.script(rd)
    return {
        "report.md": text.encode("utf-8"),
        summary.SUMMARY: summary.text(rd, t).encode("utf-8"),  # the one file other tools read
        rerun.RERUN: script.encode("utf-8"),
        **html.rendered(rd, t, text, script),
    }


# the folders whose every file `publish` makes: one it does not make is named by `verify`
MADE = ("tables", html.PLOTS)


def write(rd: ResultsDir, t: Tables) -> list[Path]:
    """The tables in CSV (every digit), then what `render` builds, each file written whole;
    a file of tables/ or plots/ an earlier publication made and this one does not (a plot of
    a time a preview showed) is removed, so the directory holds what `verify` recomputes."""
    written = []
    for name, df in t.items():
        rd.write_text(f"tables/{name}.csv", csv_text(df))
        written.append(rd.root / "tables" / f"{name}.csv")
    for rel, data in render(rd, t).items():
        store.write_atomic(rd.root / rel, data)
        written.append(rd.root / rel)
    (rd.root / rerun.RERUN).chmod(0o755)
    made = {str(p.relative_to(rd.root)) for p in written}
    for rel in _unmade(rd.root, made):
        (rd.root / rel).unlink()
    return written


def _unmade(root: Path, made: set[str]) -> list[str]:
    """The files under tables/ and plots/ that are not among `made` (paths in the directory)."""
    out = []
    for folder in MADE:
        for here, _, files in os.walk(root / folder):
            for name in files:
                rel = os.path.relpath(os.path.join(here, name), root)
                if rel not in made:
                    out.append(rel)
    return sorted(out)


def verify(
    rd: ResultsDir,
    checks: dict[str, str] | None = None,
    examined: audit.Examination | None = None,
) -> list[str]:
    """Every difference between what the directory publishes and the recomputation.

    First the directory itself (D6): each planned run's one final record in a folder of its
    own, every raw file as its run wrote it (`examined`: that part already started, by
    `audit.Examination`, which also judges each run again from the bytes it hashes). Then the
    tables, report.md, report.html, rerun.sh and the plots, each recomputed from the raw files
    and compared whole; any other file under tables/ or plots/ is named.
    """
    found = (audit.Examination(rd) if examined is None else examined).result()
    if found.problems:
        return [*found.problems, "not recomputed: the records and raw files above come first"]
    try:
        # the audit above came first
        fresh = tables.tables(rd, checks, listing=found.listing, judged=found.judged)
    except ValueError as e:  # a raw log that no longer parses
        return [f"cannot recompute: {e}"]
    # the tables compared in a forked process while this one renders the rest
    compared = fanout.Children([functools.partial(_diff_tables, rd.root, fresh)], len(fresh.runs))
    try:
        published_files = render(rd, fresh)
    except ValueError as e:
        compared.result()
        return [f"cannot recompute: {e}"]
    problems = compared.result()[0]
    for rel, data in published_files.items():
        problems += _diff_file(rd.root, rel, data)
    made = {*published_files, *(f"tables/{name}.csv" for name, _ in fresh.items())}
    problems += [f"{rel}: a file the report does not make" for rel in _unmade(rd.root, made)]
    return problems


def _diff_tables(root: Path, fresh: Tables) -> list[str]:
    """Each published CSV against its recomputation, cell by cell where the bytes differ."""
    problems = []
    for name, df in fresh.items():
        rel = f"tables/{name}.csv"
        path = root / rel
        if not path.exists():
            problems.append(f"{rel}: missing")
            continue
        text = csv_text(df)
        if path.read_bytes() == text.encode("utf-8"):
            continue  # the same bytes: nothing to compare cell by cell
        try:
            published = read_table(path)
        except UserError as e:
            problems.append(f"{rel}: {e.message}")
            continue
        recomputed = read_table(io.StringIO(text))
        problems += _diff_frames(rel, published, recomputed)
    return problems


def _diff_file(root: Path, rel: str, recomputed: bytes) -> list[str]:
    """A published file against its re-rendering: the first line that differs, named."""
    path = root / rel
    if not path.is_file():
        return [f"{rel}: missing"]
    published = path.read_bytes()
    if published == recomputed:
        return []
    if rel.endswith(".png"):
        return [f"{rel}: differs from the plot recomputed from the raw logs"]
    old = published.decode("utf-8", "replace").splitlines()
    new = recomputed.decode("utf-8", "replace").splitlines()
    for i, (a, b) in enumerate(zip(old, new)):
        if a != b:
            return [f"{rel} line {i + 1}: published {_clip(a, b)!r}, recomputed {_clip(b, a)!r}"]
    return [f"{rel}: {len(old)} lines published, {len(new)} recomputed"]


def _clip(line: str, other: str, width: int = 100) -> str:
    """The part of a long line (an HTML table row) around where it differs from `other`."""
    if len(line) <= width:
        return line
    same = (i for i, (a, b) in enumerate(zip(line, other)) if a != b)
    at = next(same, min(len(line), len(other)))
    lo = max(0, at - width // 2)
    return ("…" if lo else "") + line[lo : lo + width] + ("…" if lo + width < len(line) else "")


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

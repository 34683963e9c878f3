"""Publishing a results directory: the tables, report.md, report.html and rerun.sh, written
from the raw files; and `verify`, which recomputes them and names every difference."""

from __future__ import annotations

import dataclasses
import functools
import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

from kit.errors import UserError
from kit.report import html, rerun, resolution, sbom_tie, summary, tables
from kit.report.drawer import Drawer
from kit.report.markdown import markdown_report  # the wording lives apart from the numbers
from kit.report.tables import Tables
from kit.results import audit, fanout, store, tablefile, trees
from kit.results.differences import file_differences, frame_differences
from kit.results.store import ResultsDir
from kit.results.tablefile import csv_text, read_table

if TYPE_CHECKING:  # the checks' module loads the engine: only its type is needed here
    from kit.correctness.gate import GatingJson


def render(
    rd: ResultsDir,
    t: Tables,
    resolved: bool = True,
    earlier: bool = False,
    labelled: bool = True,
    drawer: Drawer | None = None,
) -> dict[str, bytes]:
    """report.md, rerun.sh, plots/ and report.html by their paths, built in memory.

    The HTML is the Markdown's own text with plots added, so §9's wording holds in both;
    rerun.sh carries rule 7's "every ... script". report.md ends with links to the plots.
    `resolved`: with the resolution beside each verdict (a directory published before it is
    verified without); `earlier`: the report as a kit before summary.json's schema 3 made
    it; `labelled`: a protocol other than the shipped one said at the top (schema 4);
    `drawer`: a process the command started to draw the plots (kit.report.drawer).
    """
    # the plots drawn in a process of their own while the text is written (html.Drawing)
    drawing = html.Drawing(rd, t, earlier, drawer)
    text = markdown_report(rd, t, resolved=resolved, earlier=earlier, labelled=labelled)
    script = rerun.script(rd)
    made = html.rendered(rd, t, text, script, earlier, drawing)
    if not earlier:
        text += plots_list(sorted(rel for rel in made if rel.startswith(f"{html.PLOTS}/")))
    return {
        "report.md": text.encode("utf-8"),
        summary.SUMMARY: summary.text(rd, t, resolved).encode(
            "utf-8"
        ),  # the one file other tools read
        rerun.RERUN: script.encode("utf-8"),
        **made,
    }


def report_md(rd: ResultsDir, t: Tables, gating: GatingJson | None = None) -> str:
    """report.md as `publish` writes it, the plots' links included (`micakit report`): which
    plots there are is worked out without drawing them, and nothing is written."""
    text = markdown_report(rd, t, gating)
    return text + plots_list(sorted(html.plot_names(rd, t)))


def plots_list(plots: list[str]) -> str:
    """report.md's last section: each plot report.html shows, linked by its file."""
    if not plots:
        return ""
    lines = [f"- [{Path(rel).stem}]({rel})" for rel in plots]
    return "\n## Plots\n\nThe plots of report.html, each as a file:\n\n" + "\n".join(lines) + "\n"


# the folders whose every file `publish` makes: one it does not make is named by `verify`
MADE = ("tables", html.PLOTS)


def write(rd: ResultsDir, t: Tables, drawer: Drawer | None = None) -> list[Path]:
    """The tables in CSV (every digit), then what `render` builds, each file written whole;
    a file of tables/ or plots/ an earlier publication made and this one does not (a plot of
    a time a preview showed) is removed, so the directory holds what `verify` recomputes."""
    written = []
    for name, df in t.items():
        rd.write_text(f"tables/{name}.csv", csv_text(df))
        written.append(rd.root / "tables" / f"{name}.csv")
    for rel, data in render(rd, t, drawer=drawer).items():
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
    drawer: Drawer | None = None,
) -> list[str]:
    """Every difference between what the directory publishes and the recomputation.

    First the directory itself (D6): each planned run's one final record in a folder of its
    own, every raw file as its run wrote it (`examined`: that part already started, by
    `audit.Examination`, which also judges each run again from the bytes it hashes). Then the
    tables, report.md, report.html, rerun.sh and the plots, each recomputed from the raw files
    and compared whole; any other file under tables/ or plots/ is named. `drawer`: a process
    the command started to draw the plots (kit.report.drawer).
    """
    try:
        return _verified(rd, checks, examined, drawer)
    finally:
        if drawer is not None:
            drawer.close()  # unused where the directory differed before the plots


def _verified(
    rd: ResultsDir,
    checks: dict[str, str] | None,
    examined: audit.Examination | None,
    drawer: Drawer | None,
) -> list[str]:
    found = (audit.Examination(rd) if examined is None else examined).result()
    # nanoGPT's trees and every file the manifest names, hashed again
    problems = [*found.problems, *trees.changed(rd.root, rd.manifest().inputs_sha256)]
    if problems:
        return [*problems, "not recomputed: the records and raw files above come first"]
    try:
        # the audit above came first
        fresh = tables.tables(
            rd,
            checks,
            listing=found.listing,
            judged=found.judged,
            conditions=found.conditions,
            read=found.read,
        )
    except ValueError as e:  # a raw log that no longer parses
        return [f"cannot recompute: {e}"]
    # the tables compared in a forked process while this one renders the rest
    compared = fanout.Children([functools.partial(_diff_tables, rd.root, fresh)], len(fresh.runs))
    try:
        # as the kit that published the directory made its report
        version = summary.published_version(rd.root)
        earlier = version < summary.SCHEMA_OF_LAYOUT
        labelled = version >= summary.SCHEMA_OF_SHIPPED
        if version < summary.SCHEMA_OF_SAID_NOTES:  # its notes name every flagged run
            fresh = dataclasses.replace(fresh, notes={})
        published_files = render(
            rd, fresh, resolution.published_with(rd), earlier, labelled, drawer
        )
    except ValueError as e:
        compared.result()
        return [f"cannot recompute: {e}"]
    problems = compared.result()[0]
    for rel, data in published_files.items():
        if rel == summary.SUMMARY:  # one from an older kit lacks the keys added since
            data = summary.as_older(rd.root / rel, data)
        problems += file_differences(rd.root, rel, data)
    made = {*published_files, *(f"tables/{name}.csv" for name, _ in fresh.items())}
    problems += [f"{rel}: a file the report does not make" for rel in _unmade(rd.root, made)]
    # §8: each image's bill of materials against the footprint the kit measured
    problems += sbom_tie.differences(rd.root / "footprint")
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
        recomputed = tablefile.as_older(
            published, read_table(io.StringIO(text)), tablefile.schema_of(path)
        )
        problems += frame_differences(rel, published, recomputed)
    return problems

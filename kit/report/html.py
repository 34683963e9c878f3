"""report.html: the report a reader sees, self-contained, from the same words as report.md.

The page is report.md, as kit.report.markdown writes it, converted by the `markdown` package, so
§9's
wording rules hold in both; to it this module adds only what a page can hold and Markdown
cannot: plots where a reader would rather look than read, each with a caption naming the raw
files it came from, and links from every table row to its runs' raw logs (§3 rules 4 and 7).

Self-contained (issue 7): no script, no external style, font or image; every plot is a data:
URI, and a Content-Security-Policy forbids the page to load anything else. Raw HTML in the
Markdown (a contender's text about itself, say) is shown as text, never run.
"""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

import markdown
import pandas as pd
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor

from kit.engine import store
from kit.engine.scheduler import CONTENDER, PYTORCH
from kit.engine.store import ResultsDir
from kit.report import markdown as render
from kit.report import plots
from kit.status import RunStatus

if TYPE_CHECKING:  # kit.report.tables imports this module
    from kit.protocol.load import Protocol
    from kit.report.tables import Tables

HTML = "report.html"
PLOTS = "plots"  # the same PNGs as files, so they can be checked and reused (§3 rule 7)

Piece = str | tuple[str, str]  # caption text, or (text, relative link)
CPU_NOTE = (
    "This is a CPU series: no card was sampled, so there are no clocks, temperature or power "
    "to show (§5 Conditions apply to a card)."
)


@dataclass(frozen=True)
class Plot:
    name: str  # file name under plots/
    png: bytes
    alt: str
    caption: tuple[Piece, ...]


@dataclass(frozen=True)
class Section:
    title: str
    plots: tuple[Plot, ...]
    note: str = ""  # said instead of (or before) the plots, e.g. why there are none


@dataclass(frozen=True)
class _Context:
    rd: ResultsDir
    t: Tables
    protocol: Protocol
    found: dict
    attention: dict[str, str]  # PyTorch config -> attention kernels of its profiled run
    preparation: str  # rule 9's label, or ""


def _context(rd: ResultsDir, t: Tables) -> _Context:
    from kit.telemetry import kernels

    found = render.recorded_versions(rd)
    attention = {}
    if not t.kernels.empty:
        for config, rows in t.kernels.groupby("config", sort=False):
            if str(config).split("/")[2:3] == [PYTORCH]:
                attention[str(config)] = kernels.attention_kind(rows)
    prep = f" — {render.preparation_label(found)}" if render.is_preparation(found) else ""
    # rule 6 and D3: a preview, or a card the protocol does not name, says so in every plot
    prep += "".join(f" — {x}" for x in render.labels(t))
    return _Context(rd, t, store.load_protocol(rd), found, attention, prep)


def _label(ctx: _Context, c: pd.Series) -> str:
    """A configuration's name in a plot; §9: PyTorch with version, mode, precision, attention."""
    if c["side"] == PYTORCH:
        attention = ctx.attention.get(c["config"], "not profiled")
        return render.pytorch_name(ctx.found, c["variant"], c["precision"], attention)
    role = "primary" if c.get("primary", True) else "secondary"
    return f"contender {c['variant']} ({role}), {c['precision']}"


def _groups(ctx: _Context) -> list[tuple[str, pd.DataFrame]]:
    """Per card, model and precision (§10: a verdict belongs to one), its title and configs."""
    configs, out = ctx.t.configurations, []
    for (card, model, precision), g in configs.groupby(["card", "model", "precision"], sort=False):
        # §9: M1 with its size; a smoke series' model is never given the real one's
        words = render.model_words(
            ctx.protocol.models, model, render.smoke_args(ctx.rd, ctx.protocol)
        )
        out.append((f"{card} · {words} · {precision}{ctx.preparation}", g))
    return out


def _file(rel: str) -> Piece:
    return (rel, rel)  # a link that names its file (the 003 style: a number names its file)


def _slug(*parts: str) -> str:
    joined = ".".join(p.replace("/", ".") for p in parts)
    return re.sub(r"[^A-Za-z0-9._-]+", "-", joined).strip("-.")


def _runs(ctx: _Context, config: str, kinds: Sequence[str], ok_only: bool) -> pd.DataFrame:
    r = ctx.t.runs
    mine = r[(r["config"] == config) & (r["kind"].isin(list(kinds)))]
    return mine[mine["status"] == RunStatus.OK] if ok_only else mine


def _links(runs: pd.DataFrame, file: str) -> list[Piece]:
    """'run 5, run 8' linking each run's raw file, or its folder where `file` is "".

    Relative links: the results directory is published and moved whole (§9, rule 7).
    """
    out: list[Piece] = []
    for i, (_, r) in enumerate(runs.iterrows()):
        out += [", "] if i else []
        name = f"run {int(r['run_id'])}" + (" (discarded)" if r["kind"] == "discarded" else "")
        out.append((name, f"{r['log_dir']}/{file}" if file else f"{r['log_dir']}/"))
    return out


def _conditions_words(ctx: _Context) -> list[Piece]:
    """Rule 4's conditions that a caption names once: card, versions, date, contender."""
    manifest = ctx.rd.manifest()
    says = ctx.found.get("contender", {}).get("says")
    words: list[Piece] = [
        f" Card {ctx.found.get('card', {}).get('name', manifest['series']['card'])}; every "
        "software version in ",
        _file("versions.json"),
        f"; series of {manifest['date_utc']}, kit {manifest['kit_version']}",
    ]
    if says:
        words.append(f"; the contender says of itself: {says!r}")
    return [*words, "."]


def step_time_section(ctx: _Context) -> Section:
    out = []
    for title, g in _groups(ctx):
        rows: list[plots.StepTimeRow] = []
        sources: list[Piece] = []
        for _, c in g.iterrows():
            timed = _runs(ctx, c["config"], ["timed"], ok_only=True)
            note = "out of memory: no time (amendment 8)" if c["out_of_memory"] else c["notes"]
            if c["state"] != "complete":
                timed = timed.iloc[0:0]  # only a complete configuration has a time
            elif str(c["publication"]).startswith("withheld"):
                timed, note = timed.iloc[0:0], c["publication"]  # rule 6
            label = _label(ctx, c)
            rows.append(plots.StepTimeRow(label, c["side"], tuple(timed["step_s"]), note))
            if len(timed):
                sources += ["; " if sources else "", f"{label}: ", *_links(timed, "stdout.log")]
        caption: list[Piece] = [
            f"{title}. Every timed run that counted is a dot, its step time by the outside "
            "clock (§5); the median is the black mark and the range the bar. A deficit is "
            "drawn as a lead is (§3 rule 5).",
            *_conditions_words(ctx),
            " From each timed run's stamped stdout.log: ",
            *sources,
            ". Every value is in ",
            _file("tables/runs.csv"),
            ".",
        ]
        name = f"step-times.{_slug(*g.iloc[0][['card', 'model', 'precision']])}.png"
        png = plots.step_times_png(rows, f"Step times: {title}")
        out.append(Plot(name, png, f"Step times, {title}", tuple(caption)))
    note = "" if out else "No configuration of this series has a timed run yet."
    return Section("Step times", tuple(out), note)


def conditions_section(ctx: _Context) -> Section:
    from kit.telemetry import samples as telemetry

    out = []
    for title, g in _groups(ctx):
        for _, c in g.iterrows():
            traces, used = [], []
            timed = _runs(ctx, c["config"], ["timed"], ok_only=False)
            for _, r in timed.iterrows():
                path = ctx.rd.root / r["log_dir"] / "samples.jsonl"
                trace = _trace(telemetry.read_samples(path)[1], r) if path.exists() else None
                if trace is not None:
                    traces.append(trace)
                    used.append(r)
            if not traces:
                continue
            label = _label(ctx, c)
            caption: list[Piece] = [
                f"{title}: {label}. The card's SM clock, temperature and power through each "
                "timed run, sampled every second (§5 Conditions); the timed window is drawn "
                "bold. From each run's samples.jsonl: ",
                *_links(pd.DataFrame(used), "samples.jsonl"),
                ". Their summaries and §5's flags are in ",
                _file("tables/runs.csv"),
                ".",
                *_conditions_words(ctx),
            ]
            png = plots.conditions_png(traces, f"The card through each timed run: {label}")
            name = f"conditions.{_slug(c['card'], c['config'])}.png"
            out.append(Plot(name, png, f"Card conditions, {label}", tuple(caption)))
    cpu = ctx.rd.manifest()["series"].get("device") == "cpu"
    why = CPU_NOTE if cpu else "No timed run of this series left card samples (samples.jsonl)."
    return Section("The card through each run", tuple(out), "" if out else why)


def _trace(records: list[dict], r: pd.Series) -> plots.ConditionTrace | None:
    samples = [x for x in records if x.get("kind") == "sample" and x.get("t_ns") is not None]
    if not samples:
        return None
    t0 = samples[0]["t_ns"]

    def col(key: str) -> tuple[float, ...]:
        return tuple(float("nan") if x.get(key) is None else float(x[key]) for x in samples)

    window = None
    if not pd.isna(r.get("window_start_ns")) and not pd.isna(r.get("window_end_ns")):
        window = ((int(r["window_start_ns"]) - t0) / 1e9, (int(r["window_end_ns"]) - t0) / 1e9)
    return plots.ConditionTrace(
        f"run {int(r['run_id'])}",
        tuple((x["t_ns"] - t0) / 1e9 for x in samples),
        col("sm_clock_mhz"),
        col("temperature_c"),
        col("power_w"),
        window,
    )


def kernel_section(ctx: _Context) -> Section:
    from kit.telemetry.kernels import KERNEL_TIME_LABEL

    fams = ctx.t.kernel_families
    out = []
    for title, g in _groups(ctx) if not fams.empty else []:
        mine = fams[fams["config"].isin(g["config"])]
        if mine.empty:
            continue
        labels = {c["config"]: _label(ctx, c) for _, c in g.iterrows()}
        frame = mine.assign(label=mine["config"].map(labels))
        profiled = pd.concat([_runs(ctx, cid, ["profile"], ok_only=True) for cid in g["config"]])
        caption: list[Piece] = [
            f"{title}. Kernel time by family, labelled as the {KERNEL_TIME_LABEL}: Nsight "
            "Systems slows launches, so it explains a step time and never stands in for one "
            "(§5, §6). From each profiled run's kernel table as nsys stats printed it "
            "(nsys-stats/stdout.log): ",
            *_links(profiled, "nsys-stats/stdout.log"),
            ". Every value is in ",
            _file("tables/kernel_families.csv"),
            ", each kernel in ",
            _file("tables/kernels.csv"),
            ".",
            *_conditions_words(ctx),
        ]
        png = plots.kernel_families_png(frame, f"Kernel families, the {KERNEL_TIME_LABEL}: {title}")
        name = f"kernel-families.{_slug(*g.iloc[0][['card', 'model', 'precision']])}.png"
        out.append(Plot(name, png, f"Kernel families, {title}", tuple(caption)))
    note = (
        "" if out else "No profiled run of this series has a kernel table; the §6 section says why."
    )
    return Section(f"Kernel families ({KERNEL_TIME_LABEL})", tuple(out), note)


def loss_section(ctx: _Context) -> Section:
    from kit.measure import timing

    out = []
    for title, g in _groups(ctx):
        curves: list[plots.LossCurve] = []
        sources: list[Piece] = []
        for _, c in g.iterrows():
            timed = _runs(ctx, c["config"], ["timed"], ok_only=True).sort_values("run_id")
            if timed.empty:
                continue
            run = timed.iloc[0]
            grammar = ctx.protocol.pytorch if c["side"] == PYTORCH else ctx.protocol.contender
            lines = timing.losses(ctx.rd.root / run["log_dir"] / "stdout.log", grammar)
            label = f"{_label(ctx, c)}, run {int(run['run_id'])}"
            curves.append(
                plots.LossCurve(
                    label, c["side"], tuple(x.step for x in lines), tuple(x.loss for x in lines)
                )
            )
            sources += ["; " if sources else "", *_links(timed.iloc[:1], "stdout.log")]
        if not curves:
            continue
        caption: list[Piece] = [
            f"{title}. Per configuration, the training loss of its first timed run that "
            "counted, as the program printed it, parsed with its side's grammar from the "
            "protocol file. These curves are not §7's correctness check. From each run's "
            "stamped stdout.log: ",
            *sources,
            ".",
            *_conditions_words(ctx),
        ]
        png = plots.loss_curves_png(
            curves, f"Training loss, one timed run a configuration: {title}"
        )
        name = f"loss.{_slug(*g.iloc[0][['card', 'model', 'precision']])}.png"
        out.append(Plot(name, png, f"Loss curves, {title}", tuple(caption)))
    note = "" if out else "No configuration of this series has a timed run that counted yet."
    return Section("Loss curves", tuple(out), note)


def sections(ctx: _Context) -> list[Section]:
    return [step_time_section(ctx), conditions_section(ctx), kernel_section(ctx), loss_section(ctx)]


# ---------------------------------------------------------------------------------------------
# The page: report.md converted, then enriched as an element tree (never by editing HTML text).


def _add(parent: ET.Element, pieces: Sequence[Piece]) -> None:
    """Append caption pieces to an element: text, and links as <a> (escaped on output)."""
    last: ET.Element | None = None
    for p in pieces:
        if isinstance(p, tuple):
            last = ET.SubElement(parent, "a", href=p[1])
            last.text = p[0]
        elif last is None:
            parent.text = (parent.text or "") + p
        else:
            last.tail = (last.tail or "") + p


def _text(el: ET.Element) -> str:
    return "".join(el.itertext()).strip()


class _Enrich(Treeprocessor):
    """Raw-log links in every table row that carries numbers (rule 4), the plots after the
    configurations, the rerun script and the raw files at the end (rule 7)."""

    def __init__(self, md: markdown.Markdown, ctx: _Context, secs: list[Section], rerun: str):
        super().__init__(md)
        self.ctx, self.secs, self.rerun = ctx, secs, rerun

    def run(self, root: ET.Element) -> None:
        comparisons = self._comparison_rows()
        children = list(root)
        plots_at = len(children)
        seen_configurations = False
        for i, el in enumerate(children):
            if el.tag == "h2":
                if seen_configurations and plots_at == len(children):
                    plots_at = i
                seen_configurations = _text(el) == "Configurations"
            if el.tag == "table":
                heads = [_text(th) for th in el.iter("th")]
                if heads[:1] == ["contender build"] and comparisons:
                    self._column(el, comparisons.pop(0))
                elif {"side", "mode or build", "model", "precision"} <= set(heads):
                    self._column(el, [self._config_cell(heads, tr) for tr in _body(el)])
                elif record := next((r for h, r in SEPARATE.items() if h in heads), None):
                    self._column(el, [self._record_cell(heads, tr, *record) for tr in _body(el)])
                at = list(root).index(el)  # wide tables scroll inside their own box
                root.remove(el)
                wrapper = ET.Element("div", {"class": "table"})
                wrapper.append(el)
                root.insert(at, wrapper)
        anchor = children[plots_at] if plots_at < len(children) else None
        at = list(root).index(anchor) if anchor is not None else len(root)
        for j, el in enumerate(self._plots()):
            root.insert(at + j, el)
        for el in self._tail():
            root.append(el)

    # -- raw-log columns ------------------------------------------------------------------

    def _column(self, table: ET.Element, cells: list[list[Piece]]) -> None:
        for tr in table.iter("tr"):
            if tr.find("th") is not None:
                ET.SubElement(tr, "th").text = "raw logs"
        for tr, pieces in zip(_body(table), cells):
            _add(ET.SubElement(tr, "td", {"class": "logs"}), pieces)

    def _config_runs(self, config: str) -> list[Piece]:
        runs = _runs(self.ctx, config, ["discarded", "timed"], ok_only=False)
        return _links(runs, "") or ["no run yet"]

    def _record_cell(self, heads: list[str], tr: ET.Element, kind: str, file: str) -> list[Piece]:
        cells = [_text(td) for td in tr.iter("td")]
        config = cells[heads.index("configuration" if "configuration" in heads else "config")]
        return _links(_runs(self.ctx, config, [kind], ok_only=False), file) or ["no record"]

    def _config_cell(self, heads: list[str], tr: ET.Element) -> list[Piece]:
        cells = dict(zip(heads, (_text(td) for td in tr.iter("td"))))
        config = f"{cells['model']}/{cells['precision']}/{cells['side']}/{cells['mode or build']}"
        return self._config_runs(config)

    def _comparison_rows(self) -> list[list[list[Piece]]]:
        """Per comparison table, in render's order (card, model, precision), per row."""
        comp = self.ctx.t.comparison
        tables: list[list[list[Piece]]] = []
        if comp.empty:
            return tables
        for (_, model, precision), g in comp.groupby(["card", "model", "precision"], sort=False):
            rows = []
            for _, r in g.iterrows():
                cell: list[Piece] = [f"{r['contender_build']}: "]
                cell += self._config_runs(f"{model}/{precision}/{CONTENDER}/{r['contender_build']}")
                if r["pytorch_fastest_mode"]:
                    mode = r["pytorch_fastest_mode"]
                    cell += [f"; PyTorch {mode}: "]
                    cell += self._config_runs(f"{model}/{precision}/{PYTORCH}/{mode}")
                rows.append(cell)
            tables.append(rows)
        return tables

    # -- the added sections -------------------------------------------------------------------

    def _plots(self) -> list[ET.Element]:
        h2 = ET.Element("h2", id="plots")
        h2.text = "Plots"
        intro = ET.Element("p")
        _add(
            intro,
            [
                "Drawn from the raw files each caption names; the same images are in ",
                (f"{PLOTS}/", f"{PLOTS}/"),
                ".",
            ],
        )
        out = [h2, intro]
        for s in self.secs:
            h3 = ET.Element("h3")
            h3.text = s.title
            out.append(h3)
            if s.note:
                p = ET.Element("p", {"class": "note"})
                p.text = s.note
                out.append(p)
            for plot in s.plots:
                fig = ET.Element("figure", id=plot.name.removesuffix(".png"))
                data = base64.b64encode(plot.png).decode("ascii")
                ET.SubElement(fig, "img", src=f"data:image/png;base64,{data}", alt=plot.alt)
                image = f"{PLOTS}/{plot.name}"
                _add(ET.SubElement(fig, "figcaption"), [*plot.caption, " Image: ", (image, image)])
                out.append(fig)
        return out

    def _tail(self) -> list[ET.Element]:
        h2 = ET.Element("h2", id="rerun")
        h2.text = "Rerun and recompute"
        p = ET.Element("p")
        _add(
            p,
            [
                _file("rerun.sh"),
                " runs this series again on another machine and "
                "recomputes it; these are its commands:",
            ],
        )
        pre = ET.Element("pre")
        ET.SubElement(pre, "code").text = self.rerun
        h2b = ET.Element("h2", id="raw-files")
        h2b.text = "Raw files (§3 rule 7)"
        ul = ET.Element("ul")
        for name, what in RAW_FILES:
            # report.md is published with this page, so listed before it is written
            if name == "report.md" or (self.ctx.rd.root / name.rstrip("/")).exists():
                _add(ET.SubElement(ul, "li"), [(name, name), f": {what}"])
        return [h2, p, pre, h2b, ul]


# the tables of render's other sections, told by a column, and the raw file behind each row
SEPARATE = {
    "family": ("profile", "nsys-stats/stdout.log"),  # §6: the kernel table as nsys printed it
    "graph_breaks": ("graph-breaks", "stderr.log"),  # §6: TORCH_LOGS' output
    "libnvrtc opened": ("discarded", "ld_debug/"),  # amendment 2: the loader's own log
}
RAW_FILES = (
    ("runs/", "every run's stamped stdout and stderr, command, samples and library log"),
    ("runs.jsonl", "one record per finished run, with the SHA-256 of its raw files"),
    ("manifest.json", "the kit's version and commit, the protocol's hash, the command, date"),
    ("versions.json", "every software version the numbers carry (§3 rule 4)"),
    ("plan.json", "the configurations and every planned run, fixed before the first"),
    ("protocol.toml", "the protocol file the series ran under"),
    ("tables/", "every table in CSV, every digit"),
    ("report.md", "this report in Markdown"),
)


def _body(table: ET.Element) -> list[ET.Element]:
    body = table.find("tbody")
    return [] if body is None else list(body.iter("tr"))


class _Extension(Extension):
    def __init__(self, ctx: _Context, secs: list[Section], rerun: str) -> None:
        super().__init__()
        self.args = (ctx, secs, rerun)

    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802 (the package's name)
        # raw HTML in the text (a contender's words about itself) is shown, never run
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")
        # after "inline" (20): the inserted text is never read as Markdown again
        md.treeprocessors.register(_Enrich(md, *self.args), "micakit", 15)


STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; color: #1b1b1b; margin: 0; background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 1.5em 1.2em 4em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ddd; } div.table { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.8em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.55em; vertical-align: top; }
th { background: #f3f3f3; } td.logs { font-size: 0.9em; min-width: 9em; }
figure { margin: 1.2em 0 2em; } figure img { max-width: 100%; border: 1px solid #e4e4e4; }
figcaption, pre { font-size: 0.85em; } pre { background: #f6f6f6; padding: 0.8em; }
pre { overflow-x: auto; } p.note { color: #444; font-style: italic; }
"""

# nothing but the page itself, inline style and data: images may load (offline, issue 7)
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def page(ctx: _Context, markdown_text: str, rerun: str, secs: list[Section]) -> str:
    """The whole page: report.md's text as HTML, enriched, in a page that loads nothing."""
    body = markdown.markdown(
        markdown_text, extensions=["tables", _Extension(ctx, secs, rerun)], output_format="html"
    )
    first = markdown_text.splitlines()[0].lstrip("# ").strip() if markdown_text else "report"
    title = escape(first)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<link rel="icon" href="data:,">\n'
        f"<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n"
        f"<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


def rendered(rd: ResultsDir, t: Tables, markdown_text: str, rerun: str) -> dict[str, bytes]:
    """plots/*.png and report.html, by their paths in the directory, built in memory."""
    ctx = _context(rd, t)
    secs = sections(ctx)
    out = {f"{PLOTS}/{plot.name}": plot.png for s in secs for plot in s.plots}
    out[HTML] = page(ctx, markdown_text, rerun, secs).encode("utf-8")
    return out


def write(rd: ResultsDir, t: Tables, markdown_text: str, rerun: str) -> list[Path]:
    """plots/*.png and report.html, each written whole (store.write_atomic)."""
    written = []
    for rel, data in rendered(rd, t, markdown_text, rerun).items():
        store.write_atomic(rd.root / rel, data)
        written.append(rd.root / rel)
    return written

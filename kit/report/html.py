"""report.html: the report a reader sees, self-contained, from the same words as report.md.

The page is report.md, as kit.report.markdown writes it, converted by the `markdown` package, so
§9's wording rules hold in both; to it this module adds only what a page can hold and Markdown
cannot: the summary drawn apart, the metadata folded in a <details> block, plots where a reader
would rather look than read (kit.report.html_sections), each with a caption naming the raw
files it came from, and links from every table row to its runs' raw logs (§3 rules 4 and 7).

Self-contained: no script, no external style, font or image; every plot is a data:
URI, and a Content-Security-Policy forbids the page to load anything else. Raw HTML in the
Markdown (a contender's text about itself, say) is shown as text, never run.
"""

from __future__ import annotations

import base64
import html
import secrets
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence

import markdown
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor

from kit.report import overview
from kit.report.drawer import Drawer
from kit.report.html_sections import (
    Context,
    Piece,
    Plot,
    Section,
    context,
    file_link,
    links,
    runs_of,
    sections,
)
from kit.report.html_style import CSP, STYLE
from kit.report.markdown import GRAPH_BREAKS, KERNEL_FAMILY
from kit.report.tables import Tables
from kit.results.planned import CONTENDER, PYTORCH
from kit.results.store import ResultsDir

HTML = "report.html"
PLOTS = "plots"  # the same PNGs as files, so they can be checked and reused (§3 rule 7)


# ---------------------------------------------------------------------------------------------
# The page: report.md converted, then enriched as an element tree (never by editing HTML text).


def _holding(tag: str, text: str, **attrs: str) -> ET.Element:
    """An element holding plain text."""
    e = ET.Element(tag, attrs)
    e.text = text
    return e


def _para(pieces: Sequence[Piece]) -> ET.Element:
    """A paragraph of caption pieces."""
    p = ET.Element("p")
    _add(p, pieces)
    return p


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

    def __init__(
        self,
        md: markdown.Markdown,
        ctx: Context,
        secs: list[Section],
        rerun: str,
        src: Callable[[Plot], str],
    ):
        super().__init__(md)
        self.ctx, self.secs, self.rerun, self.src = ctx, secs, rerun, src
        self.comparisons: list[list[list[Piece]]] = []

    def run(self, root: ET.Element) -> None:
        self.comparisons = self._comparison_rows()
        _fold(root)
        children = list(root)
        plots_at = len(children)
        section = seen = ""
        for el in children:
            if el.tag == "h2":
                section = _text(el)
                if seen == overview.COMPILE_COSTS and plots_at == len(children):
                    plots_at = children.index(el)
                if section == overview.SUMMARY:
                    el.set("id", "summary")
                # the plots follow the configurations and what compiling costs
                seen = section if section in ("Configurations", overview.COMPILE_COSTS) else seen
            for table in [el] if el.tag == "table" else list(el.iter("table")):
                self._table(root if el is table else el, table, section == overview.SUMMARY)
        anchor = children[plots_at] if plots_at < len(children) else None
        at = list(root).index(anchor) if anchor is not None else len(root)
        for j, el in enumerate(self._plots()):
            root.insert(at + j, el)
        for el in self._tail():
            root.append(el)

    def _table(self, parent: ET.Element, el: ET.Element, summary: bool) -> None:
        """A table's raw-log column, and a box of its own, as wide tables scroll inside it."""
        comparisons = self.comparisons
        heads = [_text(th) for th in el.iter("th")]
        if heads[:1] == ["contender build"] and comparisons:
            self._column(el, comparisons.pop(0))
        elif {"side", "mode or build", "model", "precision"} <= set(heads):
            self._column(el, [self._config_cell(heads, tr) for tr in _body(el)])
        elif record := next((r for h, r in SEPARATE.items() if h in heads), None):
            self._column(el, [self._record_cell(heads, tr, *record) for tr in _body(el)])
        at = list(parent).index(el)
        parent.remove(el)
        wrapper = ET.Element("div", {"class": "table summary" if summary else "table"})
        wrapper.append(el)
        parent.insert(at, wrapper)

    # -- raw-log columns ------------------------------------------------------------------

    def _column(self, table: ET.Element, cells: list[list[Piece]]) -> None:
        for tr in table.iter("tr"):
            if tr.find("th") is not None:
                ET.SubElement(tr, "th").text = "raw logs"
        for tr, pieces in zip(_body(table), cells):
            _add(ET.SubElement(tr, "td", {"class": "logs"}), pieces)

    def _configruns_of(self, config: str) -> list[Piece]:
        runs = runs_of(self.ctx, config, ["discarded", "timed"], ok_only=False)
        return links(runs, "") or ["no run yet"]

    def _record_cell(self, heads: list[str], tr: ET.Element, kind: str, file: str) -> list[Piece]:
        cells = [_text(td) for td in tr.iter("td")]
        config = cells[heads.index("configuration")]
        return links(runs_of(self.ctx, config, [kind], ok_only=False), file) or ["no record"]

    def _config_cell(self, heads: list[str], tr: ET.Element) -> list[Piece]:
        cells = dict(zip(heads, (_text(td) for td in tr.iter("td"))))
        config = f"{cells['model']}/{cells['precision']}/{cells['side']}/{cells['mode or build']}"
        return self._configruns_of(config)

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
                cell += self._configruns_of(
                    f"{model}/{precision}/{CONTENDER}/{r['contender_build']}"
                )
                if r["pytorch_fastest_mode"]:
                    mode = r["pytorch_fastest_mode"]
                    cell += [f"; PyTorch {mode}: "]
                    cell += self._configruns_of(f"{model}/{precision}/{PYTORCH}/{mode}")
                rows.append(cell)
            tables.append(rows)
        return tables

    # -- the added sections -------------------------------------------------------------------

    def _plots(self) -> list[ET.Element]:
        h2 = _holding("h2", "Plots", id="plots")
        intro = _para(
            [
                "Drawn from the raw files each caption names; the same images are in ",
                (f"{PLOTS}/", f"{PLOTS}/"),
                ".",
            ]
        )
        out = [h2, intro]
        for s in self.secs:
            out.append(_holding("h3", s.title))
            if s.note:
                out.append(_holding("p", s.note, **{"class": "note"}))
            for plot in s.plots:
                fig = ET.Element("figure", id=plot.name.removesuffix(".png"))
                ET.SubElement(fig, "img", src=self.src(plot), alt=plot.alt)
                image = f"{PLOTS}/{plot.name}"
                _add(ET.SubElement(fig, "figcaption"), [*plot.caption, " Image: ", (image, image)])
                out.append(fig)
        return out

    def _tail(self) -> list[ET.Element]:
        h2 = _holding("h2", "Rerun and recompute", id="rerun")
        # linked, not inlined, where it has no commands: pages of shell would bury the report
        said = "; these are its commands:" if self.rerun else ", every command in it."
        p = _para(
            [
                file_link("rerun.sh"),
                f" runs this series again on another machine and recomputes it{said}",
            ]
        )
        pre = ET.Element("pre")
        ET.SubElement(pre, "code").text = self.rerun
        h2b = _holding("h2", "Raw files (§3 rule 7)", id="raw-files")
        ul = ET.Element("ul")
        for name, what in RAW_FILES:
            # report.md is published with this page, so listed before it is written
            if name == "report.md" or (self.ctx.rd.root / name.rstrip("/")).exists():
                _add(ET.SubElement(ul, "li"), [(name, name), f": {what}"])
        return [h2, p, *([pre] if self.rerun else []), h2b, ul]


# the tables of render's other sections, told by a column, and the raw file behind each row
SEPARATE = {
    KERNEL_FAMILY: (
        "profile",
        "nsys-stats/stdout.log",
    ),  # §6: the kernel table as nsys printed it
    GRAPH_BREAKS: ("graph-breaks", "stderr.log"),  # §6: TORCH_LOGS' output
    overview.WARMUP: ("timed", "stdout.log"),  # the stamps a warm-up is computed from
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


def _fold(root: ET.Element) -> None:
    """report.md's <details> markers (shown as text by the converter) made a real <details>."""
    children = list(root)
    marks = [_text(el) for el in children]
    if overview.DETAILS_OPEN not in marks or overview.DETAILS_CLOSE not in marks:
        return
    first, last = marks.index(overview.DETAILS_OPEN), marks.index(overview.DETAILS_CLOSE)
    details = ET.Element("details", id="metadata")
    ET.SubElement(details, "summary").text = overview.DETAILS_SUMMARY
    for el in children[first + 1 : last]:
        root.remove(el)
        details.append(el)
    root.insert(first, details)
    root.remove(children[first])
    root.remove(children[last])


def _body(table: ET.Element) -> list[ET.Element]:
    body = table.find("tbody")
    return [] if body is None else list(body.iter("tr"))


class _Extension(Extension):
    def __init__(
        self, ctx: Context, secs: list[Section], rerun: str, src: Callable[[Plot], str]
    ) -> None:
        super().__init__()
        self.args = (ctx, secs, rerun, src)

    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802 (the package's name)
        # raw HTML in the text (a contender's words about itself) is shown, never run
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")
        # after "inline" (20): the inserted text is never read as Markdown again
        md.treeprocessors.register(_Enrich(md, *self.args), "micakit", 15)


def data_uri(png: bytes) -> str:
    """A plot as the page holds it: the image itself, so the page loads nothing."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def page(
    ctx: Context,
    markdown_text: str,
    rerun: str,
    secs: list[Section],
    src: Callable[[Plot], str] | None = None,
) -> str:
    """report.md's text as HTML, enriched, in a page that loads nothing; `src`: each plot's
    image source (by default the plot drawn, as a data: URI)."""
    src = src or (lambda plot: data_uri(plot.png))
    body = markdown.markdown(
        markdown_text,
        extensions=["tables", _Extension(ctx, secs, rerun, src)],
        output_format="html",
    )
    first = markdown_text.splitlines()[0].lstrip("# ").strip() if markdown_text else "report"
    title = html.escape(first, quote=False)  # &, < and > alone, as xml.sax's escape did
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<link rel="icon" href="data:,">\n'
        f"<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n"
        f"<body>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


class Drawing:
    """report.html's plots, drawn in another process (the command's drawer, else one forked
    now) while the caller writes the report's text and the page, which holds a placeholder for
    each image until it is drawn; where forking is not safe, each is drawn here when asked."""

    def __init__(
        self, rd: ResultsDir, t: Tables, earlier: bool = False, drawer: Drawer | None = None
    ):
        self.ctx = context(rd, t, earlier)
        self.secs = sections(self.ctx)
        self.plots = [plot for s in self.secs for plot in s.plots]
        # a placeholder no report's own text holds: random, for this rendering alone
        self._mark = f"micakit-plot-{secrets.token_hex(16)}-"
        if drawer is None and self.plots:
            drawer = Drawer()  # where the command started none, forked now
        # the drawer draws what pickles (kit.report.drawer); else each plot is drawn here
        self._waiting = drawer.send([p.draw for p in self.plots]) if drawer else None

    def placeholder(self, plot: Plot) -> str:
        return f"{self._mark}{self.plots.index(plot):04d}"  # fixed width: none another's prefix

    def pngs(self) -> dict[str, bytes]:
        """Each plot's bytes by its name, once drawn."""
        drawn: list[bytes] = []
        if self._waiting is not None:
            drawn, self._waiting = self._waiting(), None
        for plot, png in zip(self.plots, drawn):
            plot.__dict__["png"] = png  # as functools.cached_property keeps it
        return {plot.name: plot.png for plot in self.plots}

    def page(self, markdown_text: str, rerun: str) -> str:
        """`page`, the plots' images put in their places once drawn."""
        text = page(self.ctx, markdown_text, rerun, self.secs, self.placeholder)
        pngs = self.pngs()
        for plot in self.plots:
            text = text.replace(self.placeholder(plot), data_uri(pngs[plot.name]))
        return text


def rendered(
    rd: ResultsDir,
    t: Tables,
    markdown_text: str,
    rerun: str,
    earlier: bool = False,
    drawing: Drawing | None = None,
) -> dict[str, bytes]:
    """plots/*.png and report.html, by their paths in the directory, built in memory. The page
    links rerun.sh; `earlier`: as a kit before summary.json's schema 3 made them, rerun.sh's
    commands inlined (a directory it published verifies as it was made). `drawing`: the plots
    already being drawn (`Drawing`, started before the report's text was written)."""
    drawing = drawing or Drawing(rd, t, earlier)
    rerun = rerun if earlier else ""
    text = drawing.page(markdown_text, rerun)
    out = {f"{PLOTS}/{name}": png for name, png in drawing.pngs().items()}
    out[HTML] = text.encode("utf-8")
    return out


def plot_names(rd: ResultsDir, t: Tables) -> list[str]:
    """The paths of the plots `rendered` would draw, none of them drawn (`micakit report`)."""
    return [f"{PLOTS}/{plot.name}" for s in sections(context(rd, t)) for plot in s.plots]

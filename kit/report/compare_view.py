"""`micakit compare`'s table: Markdown where stdout is a file or a pipe, a rich table on a
terminal. One ratio, B / A (above 1: B slower), with its interval beside it, or, below
intervals.MIN_RUNS runs a side, "n runs a side: no interval"; the class; each side's flagged
runs and A/A (kit.report.comparison)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from kit.protocol.shipped import Changed
from kit.report import intervals
from kit.report.comparison import Compared, Comparison, Timed
from kit.report.states import Publication

HEADERS = (
    "model", "precision", "side", "variant", "card A", "card B", "A", "B", "B / A (interval)",
    "class", "flagged runs", "A/A", "why",
)  # fmt: skip


def _ms(t: Timed | None, state: str) -> str:
    if t is None:
        return state
    return f"{t['median'] * 1e3:.3f} ms ({t['min'] * 1e3:.3f}–{t['max'] * 1e3:.3f})"


def ratio(e: Compared) -> str:
    """B / A with its interval beside it, in the same direction, or why there is none."""
    if e["ratio_b_over_a"] is None:
        return "—"
    if e["interval_b_over_a"] is None:
        return f"{e['ratio_b_over_a']:.3f} ({intervals.no_interval(min(e['runs_a'], e['runs_b']))})"
    low, high = e["interval_b_over_a"]
    return f"{e['ratio_b_over_a']:.3f} ({low:.3f}–{high:.3f})"


def flagged(e: Compared) -> str:
    said = [f"{n}: {x}" for n, x in (("A", e["flagged_a"]), ("B", e["flagged_b"])) if x]
    return "; ".join(said) or "none"


def aa_level(e: Compared) -> str:
    """Each side's A/A: not level, level, or none run (—)."""

    def one(spread: float | None, not_level: str | None) -> str:
        if not_level:
            return "not level"
        return "level" if spread is not None else "—"

    a, b = one(e["aa_spread_a"], e["aa_not_level_a"]), one(e["aa_spread_b"], e["aa_not_level_b"])
    return "—" if a == b == "—" else f"A {a}, B {b}"


def cells(e: Compared) -> list[str]:
    return [
        e["model"], e["precision"], e["side"], e["variant"], e["card_a"], e["card_b"],
        _ms(e["a_s"], e["state_a"]), _ms(e["b_s"], e["state_b"]), ratio(e),
        e["verdict"] or "—", flagged(e), aa_level(e), e["reason"],
    ]  # fmt: skip


def _title(result: Comparison) -> str:
    title = f"{result['a']} (A) against {result['b']} (B)"
    if not (result["protocol_a"]["shipped"] and result["protocol_b"]["shipped"]):
        title += " — not the protocol the kit ships"
    if result.get("preview"):
        title += " — preparation: not a protocol result"
    return title


def _shipped_lines(result: Comparison) -> list[str]:
    """Where a directory's protocol is not the one the kit ships: said first, key by key."""
    lines = []
    for name, found in (("A", result["protocol_a"]), ("B", result["protocol_b"])):
        if found["shipped"]:
            continue
        lines.append(
            f"**{name} ran under a protocol the kit does not ship** (SHA-256 "
            f"{found['sha256'][:12]}…, the shipped one's {found['shipped_sha256'][:12]}…):"
        )
        lines.append("")
        lines += [
            f"- {Changed(c['key'], c['shipped'], c['here']).line()}" for c in found["differences"]
        ] or ["- its text differs from the shipped file's (comments or layout); no key does"]
        lines.append("")
    return lines


def _explained(result: Comparison) -> list[str]:
    lines = _shipped_lines(result)
    if result["protocol_changed"]:
        lines += [
            "**The two directories ran under different protocols** (--allow-protocol-change).",
            "",
        ]
    return [
        *lines,
        "Step time per configuration: median (range, fastest to slowest), recomputed from each "
        "directory's raw logs. A configuration without a time shows its state.",
        "",
        "B / A: B's median over A's (above 1: B slower), its 95% bootstrap interval beside it "
        f"from {intervals.MIN_RUNS} runs a side (fewer cannot carry one). The class, the kit's "
        "diagnostic (outside §10): `same` where the difference lies within the two sides' A/A "
        "spreads (their ranges where a series ran no A/A runs), `faster` or `slower` where the "
        "interval (with fewer runs, the ranges) lies clear of 1 by more than "
        f"{result['threshold']:.1%}, `ambiguous` otherwise, and wherever runs were flagged "
        "(§5: a busy machine, a throttled card, clocks that differed) or a series' A/A is not "
        "level.",
        "",
    ]


def markdown(result: Comparison) -> str:
    """The comparison as a Markdown table, with what is in one directory only."""
    lines = [f"# {_title(result)}", "", *_explained(result)]
    lines += ["| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
    lines += ["| " + " | ".join(cells(e)) + " |" for e in result["both"]]
    lines += _withheld_lines(result)
    lines += _only_lines(result)
    return "\n".join(lines) + "\n"


def _only_lines(result: Comparison) -> list[str]:
    lines = []
    for name, only in (("A", result["only_in_a"]), ("B", result["only_in_b"])):
        if only:
            lines += ["", f"Only in {name}:", ""]
            lines += [
                f"- {o['model']} · {o['precision']} · {o['side']} · {o['variant']} ({o['card']})"
                for o in only
            ]
    return lines


def terminal(result: Comparison, console: Console) -> None:
    """The comparison on a terminal: the same table, drawn by rich."""
    console.print(f"[bold]{_title(result)}[/bold]", markup=True, highlight=False)
    for line in _shipped_lines(result):
        console.print(line.replace("**", ""), markup=False, highlight=False)
    table = Table(show_lines=True)
    for h in HEADERS:
        table.add_column(h, overflow="fold")
    for e in result["both"]:
        table.add_row(*cells(e))
    console.print(table)
    for line in [*_withheld_lines(result), *_only_lines(result)]:
        console.print(line, markup=False, highlight=False)


def _withheld_lines(result: Comparison) -> list[str]:
    """Rule 6's way out, where it withholds a time: `--preview`, or the checks that give it."""
    states = [x for e in result["both"] for x in (e["state_a"], e["state_b"])]
    if not any(Publication.of(x) is Publication.WITHHELD for x in states):
        return []
    lines = [
        "",
        "Rule 6 withholds the times of configurations whose correctness check has not passed. "
        f"`micakit compare {result['a']} {result['b']} --preview` shows them, labelled "
        "preparation: not a protocol result.",
    ]
    if result.get("way_out"):
        lines += ["", "The checks that give them a verdict, then the verdicts gated by them:", ""]
        lines += [f"    {x}" for x in result["way_out"]]
    return lines

"""Several cards' results directories as one release table (§3 rules 4, 5 and 7; §9).

`merge()` opens every directory, judges it again from its raw stamped logs (`tables.tables`,
never the CSVs the directory publishes), refuses what a release cannot set side by side, and
writes `release.csv` (every digit) and `release.md` into a new directory. Refused:

- directories measured under different protocol files (manifest `protocol_sha256`) or made by
  different kit versions (`kit_version`): their numbers did not come from one procedure;
- a series that has not finished: a release publishes the protocol's runs, not some of them;
- a series with a void run: §5 finds a void run's cause before anything is published;
- two directories of the same card, model and precision, unless they ran on two machines (their
  cards' UUIDs differ, kit.report.machines): a release publishes one series of each machine.

Every comparison row is kept, the deficits with the leads (rule 5), each naming the directory
its raw logs are in (rule 4), in the order card, model, precision (the protocol file's order).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kit.errors import UserError
from kit.measure import timing
from kit.protocol.load import Protocol
from kit.report import machines, states, tables, words
from kit.report.tables import Tables
from kit.results import audit, store
from kit.results.documents import Manifest, Versions
from kit.results.store import ResultsDir
from kit.results.tablefile import csv_text
from kit.status import FINAL

RELEASE_CSV, RELEASE_MD = "release.csv", "release.md"
SOURCE = "source"  # the column naming the results directory a row was recomputed from

_ONE_PROTOCOL = (
    "a release compares the numbers of one protocol (§3 rule 1): merge only directories whose "
    "manifest.json records the same protocol_sha256"
)
_ONE_KIT = (
    "merge only directories made by one kit version (each manifest.json names its kit_version); "
    "rerun a series with that version where one is missing"
)


@dataclass(frozen=True)
class Source:
    """One results directory, opened and judged again from its raw logs."""

    name: str  # the path as the user gave it: what the release names
    rd: ResultsDir
    manifest: Manifest
    found: Versions  # versions.json: every software version the series recorded (rule 4)
    tables: Tables


def merge(dirs: Sequence[Path], out: Path) -> list[Path]:
    """Recompute every directory in `dirs` and write the release table into `out`, a new folder.

    Returns the files written. Raises UserError naming the directory at fault when the
    directories cannot stand in one table, and before anything is written.
    """
    out = Path(out)
    _check_out(out)
    sources = open_sources(dirs)
    protocol = store.load_protocol(sources[0].rd)
    table = release_table(sources, protocol)
    out.mkdir(parents=True, exist_ok=True)
    store.write_atomic(out / RELEASE_CSV, csv_text(table))
    store.write_atomic(out / RELEASE_MD, release_markdown(sources, protocol, table))
    return [out / RELEASE_CSV, out / RELEASE_MD]


def open_sources(dirs: Sequence[Path]) -> list[Source]:
    """Open and recompute every directory, refusing any set a release cannot hold."""
    if not dirs:
        raise UserError("no results directory to merge", "name at least one directory")
    seen: dict[Path, str] = {}
    for d in dirs:
        resolved = Path(d).resolve()
        if resolved in seen:
            raise UserError(f"{d} is named twice (also as {seen[resolved]})", "name it once")
        seen[resolved] = str(d)
    opened = [(str(d), ResultsDir.open(Path(d))) for d in dirs]
    manifests = {name: rd.manifest() for name, rd in opened}
    _same_everywhere(manifests, "protocol_sha256", "protocol file", _short_hash, _ONE_PROTOCOL)
    _same_everywhere(manifests, "kit_version", "kit version", str, _ONE_KIT)
    sources = []
    for name, rd in opened:
        try:
            # D6: numbers only from what a series wrote
            t = tables.tables(rd, listing=audit.refuse_if_altered(rd))
        except ValueError as e:  # a raw log that no longer parses
            raise UserError(
                f"cannot recompute {name}: {e}", f"`micakit verify {name}` names what changed"
            ) from None
        _check_complete(name, rd, t)
        _check_no_void(name, t)
        sources.append(Source(name, rd, manifests[name], rd.versions(), t))
    _check_one_series_each(sources)
    return sources


def release_table(sources: Sequence[Source], protocol: Protocol) -> pd.DataFrame:
    """Every source's comparison rows, with the source named, ordered by card, model, precision."""
    rows, columns = [], [SOURCE]
    fleet = _is_fleet(sources)
    machine = machines.machine_column({s.name: s.found for s in sources})
    for s in sources:
        c = s.tables.comparison
        columns += [col for col in c.columns if col not in columns]
        # several machines of one card name: a row per machine, the machine named
        extra = {machines.MACHINE: machine[s.name]} if fleet else {}
        rows += [{SOURCE: s.name, **extra, **r} for r in c.to_dict("records")]
    if fleet:
        columns.insert(1, machines.MACHINE)
    table = pd.DataFrame(rows, columns=columns)
    if table.empty:
        return table
    models = list(protocol.models)
    precisions = list(protocol.precisions.names)

    def key(i: int) -> tuple:
        r = table.loc[i]
        return (
            str(r["card"]),
            _position(models, r["model"]),
            str(r["model"]),
            _position(precisions, r["precision"]),
            str(r["precision"]),
        )

    order = sorted(range(len(table)), key=key)  # stable: a directory's own row order is kept
    return table.loc[order].reset_index(drop=True)


def release_markdown(sources: Sequence[Source], protocol: Protocol, table: pd.DataFrame) -> str:
    """The release table in Markdown, with the words §9 asks beside its numbers."""
    first = sources[0].manifest
    cards = ", ".join(dict.fromkeys(s.manifest.card for s in sources))
    lines = [
        f"# {protocol.name} release: {len(sources)} series ({cards})",
        "",
        f"- protocol {protocol.name} sha256 {first.protocol_sha256}, kit {first.kit_version}",
        f"- {words.DOMAIN}: every number below links its results directory (raw logs column)",
        f"- how kernels are made (§9): “{words.KERNELS_SENTENCE}”",
        "- every number below was recomputed by `micakit merge` from the raw stamped logs of the "
        "directory its row names, never read from that directory's published tables; "
        "`micakit verify DIR` checks each directory, `micakit report DIR` prints its report",
        f"- step time: the outside clock, (stamp of step {protocol.timing.window[1]}'s line − "
        f"stamp of step {protocol.timing.window[0]}'s) / "
        f"{protocol.timing.window[1] - protocol.timing.window[0]} (§5)",
        *[f"- {s.name}: {label}" for s in sources for label in _labels(s)],
        "",
        "## Series",
        "",
        _series_table(sources),
        "",
        *_machines_section(sources, table),
        "## Comparison (D1)",
        "",
    ]
    if table.empty:
        lines += ["No contender configuration ran in these series, so there is no comparison.", ""]
    else:
        labels = sorted({x for s in sources for x in words.labels(s.tables)})
        lines += [words.caption_words("Release comparison (D1), every row recomputed", labels)]
        lines += ["", _comparison_table(sources, protocol, table), ""]
        lines += _notes(table)
    return "\n".join(lines)


# -- refusals ---------------------------------------------------------------------------------


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(
            f"{out} already exists; a release is written into a new directory, never over one",
            "name a new directory with --out",
        )


def _same_everywhere(
    manifests: Mapping[str, Manifest], key: str, what: str, shown: Callable[[object], str], fix: str
) -> None:
    values = {name: getattr(m, key) for name, m in manifests.items()}
    if len(set(values.values())) > 1:
        each = "; ".join(f"{name} has {key} {shown(v)}" for name, v in values.items())
        raise UserError(f"the directories were made under different {what}s: {each}", fix)


def _short_hash(value: object) -> str:
    return f"{value}"[:12] if value else "(not recorded)"


def _check_complete(name: str, rd: ResultsDir, t: Tables) -> None:
    """Every planned run has a result, or its configuration ran out of memory (amendment 8)."""
    plan = rd.plan()
    runs = t.runs
    status = dict(zip(runs["run_id"], runs["status"]))
    stopped = set(runs[runs["status"] == timing.OOM]["config"])
    missing = [
        r.run_id
        for r in plan.order
        if status.get(r.run_id) not in FINAL and r.config not in stopped
    ]
    if missing:
        raise UserError(
            f"{name} has not finished: {len(missing)} of its {len(plan.order)} planned runs "
            f"have no result (the first is run {missing[0]})",
            f"finish it with `micakit series --resume {name}`, or leave it out of the release",
        )


def _check_no_void(name: str, t: Tables) -> None:
    """§5 cross-checks: a void run's cause is found before anything is published."""
    void = t.runs[t.runs["status"] == timing.VOID]
    if len(void):
        first = void.iloc[0]
        raise UserError(
            f"{name} has {len(void)} void run(s) (the first is run {int(first['run_id'])}, "
            f"{first['config']}: {first['reason']}); §5: a void run's cause is found before "
            "anything is published",
            "find and fix the cause, then run the series again; leave it out of the release "
            "until then",
        )


def _check_one_series_each(sources: Sequence[Source]) -> None:
    """One series of each card, model and precision on each machine (its card's UUID)."""
    owners: dict[tuple[str, str, str], list[Source]] = {}
    for s in sources:
        configs = s.tables.configurations
        for key in dict.fromkeys(zip(configs["card"], configs["model"], configs["precision"])):
            for other in owners.get(key, []):
                if machines.same_card(other.found, s.found):
                    raise UserError(
                        f"{other.name} and {s.name} both measured {' '.join(key)} "
                        "(card, model, precision) on one card (the same UUID in versions.json, "
                        "or none recorded); a release publishes one series of each machine",
                        "leave one of the two directories out",
                    )
            owners.setdefault(key, []).append(s)


def _is_fleet(sources: Sequence[Source]) -> bool:
    """Whether a card name stands for several machines (cards of two UUIDs) in these sources."""
    uuids: dict[str, set[str]] = {}
    for s in sources:
        uuid = machines.identity(s.found).get("uuid")
        if uuid:
            uuids.setdefault(s.manifest.card, set()).add(uuid)
    return any(len(found) > 1 for found in uuids.values())


def _machines_section(sources: Sequence[Source], table: pd.DataFrame) -> list[str]:
    """The machines, where several share a card name: which, where, what they cost, and the
    spread between them beside the spread within each."""
    if not _is_fleet(sources):
        return []
    dirs = [s.rd.root for s in sources]
    found = [s.found for s in sources]
    lines = ["## Machines", "", *machines.fleet_summary(found, dirs), ""]
    lines += [machines.machines_table([s.name for s in sources], found, dirs), ""]
    spreads = None if table.empty else machines.spread_table(table)
    if spreads:
        lines += [
            "Between machines: (largest − smallest) / median of the machines' medians; within "
            "a machine: the largest (max − min) / median of one machine's timed runs (its "
            "rounds), in percent.",
            "",
            spreads,
            "",
        ]
    return lines


# -- formatting -------------------------------------------------------------------------------


def _labels(s: Source) -> list[str]:
    """What a series is when it is not a protocol measurement on a released compiler (rule 9)."""
    labels = []
    if words.is_preparation(s.found):
        labels.append(words.preparation_label(s.found))
    labels += words.labels(s.tables)  # rule 6's preview, D3's card not named
    if s.manifest.smoke:
        labels.append("CPU smoke series: scaled-down models, not a protocol measurement")
    return labels


def _position(order: list[str], name: str) -> int:
    return order.index(name) if name in order else len(order)


def _series_table(sources: Sequence[Source]) -> str:
    rows = []
    for s in sources:
        m = s.manifest
        extra = m.spec.get("extra", {})
        rows.append(
            {
                "source": s.name,
                "card": m.card,
                "date (UTC)": m.date_utc,
                "host": m.host,
                "kit commit": m.kit_commit[:12],
                "executor": m.executor,
                "contender": extra.get("contender", "none given"),
                "versions": words.versions_line(s.found),
                "notes": "; ".join(_labels(s)),
            }
        )
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def _comparison_table(sources: Sequence[Source], protocol: Protocol, table: pd.DataFrame) -> str:
    by_name = {s.name: s for s in sources}
    rows = []
    for _, r in table.iterrows():
        s = by_name[r[SOURCE]]
        if r["pytorch_fastest_mode"]:
            attention = r.get("pytorch_attention", "") or "not profiled"
            against = words.pytorch_name(
                s.found, r["pytorch_fastest_mode"], r["precision"], attention
            )
        else:
            against = "no PyTorch mode is complete"
        ratio = "—" if math.isnan(r["ratio"]) else f"{r['ratio']:.3f}"
        configs = s.tables.configurations.set_index("config")
        torch_id = f"{r['model']}/{r['precision']}/pytorch/{r['pytorch_fastest_mode']}"
        torch_pub = configs.loc[torch_id, "publication"] if torch_id in configs.index else ""
        median, spread = words.step_cells(
            r["contender_median_step_s"],
            r["contender_min_step_s"],
            r["contender_max_step_s"],
            str(r["contender_state"]).split(":")[0],
            r["publication"],
        )
        p_median, p_spread = words.step_cells(
            r["pytorch_median_step_s"],
            r["pytorch_min_step_s"],
            r["pytorch_max_step_s"],
            "complete" if r["pytorch_fastest_mode"] else "no PyTorch mode is complete",
            torch_pub,
        )
        card = str(r["card"])
        if not r["card_named"]:
            card += f" ({states.NOT_NAMED})"
        smoke = words.smoke_args(s.rd, protocol)
        # several machines of the card's name: each row names its card (NVML's UUID)
        machine = {"machine": r[machines.MACHINE]} if machines.MACHINE in r else {}
        rows.append(
            {
                "card": card,
                **machine,
                # §9: every M1 number travels with its model's size, in its own row
                "model": words.model_words(protocol.models, r["model"], smoke),
                "precision": r["precision"],
                "contender build": f"{r['contender_build']} ({r['build_role']})",
                "state": r["contender_state"],
                "runs": r["contender_runs"],
                "median ms": median,
                "range ms": spread,
                "against": against,
                "PyTorch runs": r["pytorch_runs"],
                "PyTorch median ms": p_median,
                "PyTorch range ms": p_spread,
                "ratio P/M": ratio,
                "verdict": r["verdict"],
                "notes": "; ".join(_labels(s)),
                "raw logs": f"[{r[SOURCE]}]({r[SOURCE]})",
            }
        )
    return pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True)


def _notes(table: pd.DataFrame) -> list[str]:
    """§3 rule 8: what the times alone say without a passed check is labelled a hypothesis."""
    lines = []
    for _, r in table.iterrows():
        where = f"{r['card']} {r['model']} {r['precision']} {r['contender_build']}"
        if r["times_alone_say"] and r["verdict"] != r["times_alone_say"]:
            lines.append(
                f"- Hypothesis, not a protocol result: by step times alone, {where} would read "
                f"*{r['times_alone_say']}*; it has no verdict until its correctness check passes "
                "(§3 rule 6)."
            )
        if r["pytorch_modes_without_time"]:
            lines.append(
                f"- {where}: PyTorch modes without a time (amendments 5 and 8): "
                f"{r['pytorch_modes_without_time']}; the fastest of the complete modes is "
                "compared."
            )
    return [*lines, ""] if lines else []

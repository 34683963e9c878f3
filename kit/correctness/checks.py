"""The records of correctness checks and the verdict's gate (§7, amendment 7.3).

One line of `checks.jsonl` per method, card, model and precision; a configuration's check has
passed when method A passed with five seeds a side and method B passed on its own card, each run
with the very program the series measured: a record names its contender by SHA-256, and a check
of another program never gates a series, whatever its build is called.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from kit.correctness.methods import MethodAResult, MethodBResult
from kit.errors import UserError
from kit.results import store

# 2: each record names the program it checked (contender_sha256, contender_image_id); a record
# of schema 1 is read, and gates nothing (it names no program)
CHECKS_SCHEMA = 3  # 3: as 2, its version under "schema_version" (as every file the kit writes)
CHECKS_FILE = "checks.jsonl"

# why a configuration's check does not count for the program its series measured (rule 6)
ANOTHER_PROGRAM = "the check ran another program"
NO_PROGRAM = "the check names no program"
NO_SERIES_PROGRAM = "the series records no contender SHA-256 (versions.json) to bind a check to"
UNBOUND = (ANOTHER_PROGRAM, NO_PROGRAM, NO_SERIES_PROGRAM)  # rule 6 withholds, saying which


@dataclass(frozen=True)
class CheckRecord:
    """One method's outcome for one card, model and precision; a line of checks.jsonl."""

    method: str  # "A" or "B"
    card: str  # the card's name as the series records it (manifest series.card)
    model: str  # the runner's model name (D2)
    precision: str
    seeds_per_side: int  # method A: five on the card whose families judge, one elsewhere
    passed: bool | None  # None: one seed a side, read and not judged (amendment 7.1)
    first_failing_step: int | None
    reason: str
    contender_build: str = ""  # amendment 4.2: the build the verdict compares
    window: tuple[int, int] | None = None  # method B: the judged window
    beside_window: tuple[int, int] | None = None  # amendment 6.2
    beside_passed: bool | None = None
    beside_reason: str = ""
    seeds: tuple[int, ...] = ()  # method A: the seeds each side ran (amendments 7.1, 7.3)
    logs: str = ""  # where the raw logs lie, relative to the checks directory (D6)
    date_utc: str = ""
    # the contender the check ran, as its versions.json records it (rule 4): its program's
    # SHA-256, and under Docker its measured image's id; "" in a record of schema 1
    contender_sha256: str = ""
    contender_image_id: str = ""
    # whether the executor kept the contender's runs from the other side's files (a container,
    # or a local run's own namespaces); None: a record of a kit that did not say
    sides_isolated: bool | None = None

    def __post_init__(self) -> None:
        if self.method not in ("A", "B"):
            raise ValueError(f"a check's method is 'A' or 'B', not {self.method!r}")

    def to_json(self) -> str:
        return json.dumps({"schema_version": CHECKS_SCHEMA, **asdict(self)})


def record_method_a(
    result: MethodAResult, card: str, model: str, precision: str, **kw: Any
) -> CheckRecord:
    return CheckRecord(
        "A",
        card,
        model,
        precision,
        len(result.seeds),
        result.verdict,
        result.first_failing_step,
        result.reason,
        seeds=tuple(result.seeds),
        **kw,
    )


def record_method_b(result: MethodBResult, card: str, model: str, **kw: Any) -> CheckRecord:
    """Method B runs in float32 without TF32 (§7 B); its verdict holds for every precision."""
    beside = result.beside
    return CheckRecord(
        "B",
        card,
        model,
        "float32",
        1,
        result.passed,
        result.first_failing_step,
        result.reason,
        window=result.judged.window,
        beside_window=beside.window if beside else None,
        beside_passed=beside.passed if beside else None,
        beside_reason=beside.reason if beside else "",
        **kw,
    )


def append_check(checks_dir: Path, record: CheckRecord) -> None:
    """Append one record, fsynced: a check written is a check kept (hyperfine's rule)."""
    checks_dir.mkdir(parents=True, exist_ok=True)
    with open(checks_dir / CHECKS_FILE, "a", encoding="utf-8") as f:
        f.write(record.to_json() + "\n")
        f.flush()
        os.fsync(f.fileno())


def load_checks(checks_dir: Path) -> list[CheckRecord]:
    """Every record of a correctness results directory, in the order written; none is []."""
    path = Path(checks_dir) / CHECKS_FILE
    if not path.exists():
        return []
    text = path.read_text("utf-8")
    lines = text.split("\n")
    if lines and lines[-1] and not text.endswith("\n"):
        lines = lines[:-1]  # a torn last line (power lost mid-write) is not a record
    names = {f.name for f in fields(CheckRecord)}
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{where} is not a JSON record: {e}") from None
        schema = obj.pop("schema_version", obj.pop("schema", None))
        if not isinstance(schema, int) or schema > CHECKS_SCHEMA or schema < 1:  # 1 is read
            raise UserError(
                f"{where} has check schema {schema!r}; this kit reads schema {CHECKS_SCHEMA}",
                "read it with the kit version that wrote it, or a newer one",
            )
        unknown, missing = set(obj) - names, {"method", "card", "model"} - set(obj)
        if unknown or missing:
            what = f"unknown key {sorted(unknown)[0]}" if unknown else f"no {sorted(missing)[0]}"
            raise UserError(f"{where}: {what}", "the file was edited or is damaged")
        for key in ("window", "beside_window", "seeds"):
            if obj.get(key) is not None:
                obj[key] = tuple(obj[key])
        out.append(CheckRecord(**obj))
    return out


def check_verdict(
    model: str,
    precision: str,
    card: str,
    results: Sequence[CheckRecord],
    *,
    build: str | None = None,
    seeds: Sequence[int] | None = None,
    five_seed_card: str | None = None,
    program_sha256: str | None = None,
) -> tuple[str, list[CheckRecord]]:
    """The status "passed", or why this card's configuration has no verdict (rule 6, 7.3),
    with the records that status was read from (the ones that gate it, gating.json).

    Passed when method A passed on five seeds a side for this model, precision and contender
    `build` (amendment 4.2: a secondary build does not inherit the primary build's check), on
    the protocol's `five_seed_card` with the protocol's `seeds` (7.3: only those families stand
    for every card); on any other card that card's one seed a side, the first of `seeds`, was
    run (7.1); and method B passed on this card for this model. Every one of them ran the
    program `program_sha256` names (the series' contender): a check of another program, or a
    record that names none (schema 1), is not this program's check, whatever its build is
    called; method B's verdict holds for every precision of the same program. The latest
    record of each kind counts: a check run again after a fix replaces the earlier one.
    `build`, `seeds`, `five_seed_card` and `program_sha256` left None are not asked.
    """
    mine = [r for r in results if r.model == model]
    a_all = [r for r in mine if r.method == "A" and r.precision == precision]
    if build is not None:
        a_all = [r for r in a_all if r.contender_build == build]
    b_here = [r for r in mine if r.method == "B" and r.card == card]
    a_other: list[CheckRecord] = []
    b_other: list[CheckRecord] = []
    if program_sha256 is not None:
        a_other = [r for r in a_all if not _ran(r, program_sha256)]
        b_other = [r for r in b_here if not _ran(r, program_sha256)]
        a_all = [r for r in a_all if _ran(r, program_sha256)]
        b_here = [r for r in b_here if _ran(r, program_sha256)]
    if not a_all and not b_here:
        others = a_other + b_other
        return (_other_program(others[-1]) if others else "correctness not checked"), []
    families, reasons = _five_seed_families(a_all, seeds, five_seed_card)
    used = _judge_method_a(families, a_all, a_other, card, seeds, reasons)
    used += _judge_method_b(b_here, b_other, card, reasons)
    return "; ".join(reasons) or "passed", used


def _five_seed_families(
    a_all: list[CheckRecord], seeds: Sequence[int] | None, five_seed_card: str | None
) -> tuple[list[CheckRecord], list[str]]:
    """Method A's records that stand for every card (five seeds a side, the protocol's seeds,
    on its five-seed card), and why none does where one ran otherwise (7.3, §7 A)."""
    reasons = []
    wanted = len(seeds) if seeds is not None else 5  # §7 A: five seeds a side
    families = [r for r in a_all if r.seeds_per_side >= wanted and r.passed is not None]
    if five_seed_card is not None:
        elsewhere = [r for r in families if r.card != five_seed_card]
        families = [r for r in families if r.card == five_seed_card]
        if elsewhere and not families:
            reasons.append(
                f"method A's five seeds a side ran on {elsewhere[-1].card}, not on "
                f"{five_seed_card} (amendment 7.3)"
            )
    if seeds is not None:
        others = [r for r in families if tuple(r.seeds) != tuple(seeds)]
        families = [r for r in families if tuple(r.seeds) == tuple(seeds)]
        if others and not families:
            reasons.append(
                f"method A ran the seeds {_seeds(others[-1].seeds)}, not the protocol's "
                f"{_seeds(seeds)} (§7 A)"
            )
    return families, reasons


def _judge_method_a(
    families: list[CheckRecord],
    a_all: list[CheckRecord],
    a_other: list[CheckRecord],
    card: str,
    seeds: Sequence[int] | None,
    reasons: list[str],
) -> list[CheckRecord]:
    """Method A's records that gate this card's verdict; why it has none is added to
    `reasons`."""
    used: list[CheckRecord] = []
    if not families:
        if not reasons and a_other:
            reasons.append(f"method A: {_other_program(a_other[-1])}")
        elif not reasons:
            reasons.append("method A not run")
        return used
    a = families[-1]
    used.append(a)
    if not a.passed:
        reasons.append(_failed("A", a))
    # amendment 7.3: on the other cards, that card's one seed a side is published
    one = [r for r in a_all if r.card == card]
    if seeds is not None:
        one = [r for r in one if tuple(r.seeds) == (seeds[0],) or r is a]
    if a.card != card and not one:
        first = f" (seed {seeds[0]})" if seeds is not None else ""
        reasons.append(f"method A's one seed a side{first} not run on {card}")
    elif a.card != card:
        used.append(one[-1])
    return used


def _judge_method_b(
    b_here: list[CheckRecord], b_other: list[CheckRecord], card: str, reasons: list[str]
) -> list[CheckRecord]:
    """Method B's record that gates this card's verdict; why it fails or is missing is added
    to `reasons`."""
    if not b_here:
        other_b = f"method B on {card}: {_other_program(b_other[-1])}" if b_other else ""
        reasons.append(other_b or f"method B not run on {card}")
        return []
    if not b_here[-1].passed:
        reasons.append(_failed("B", b_here[-1]))
    elif b_here[-1].sides_isolated is False:
        # a contender that could read PyTorch's log could have copied its losses
        reasons.append(
            f"method B on {card}: {NOT_ISOLATED}; a verdict needs a check whose executor "
            "isolates the sides (--executor docker, or a machine that allows namespaces)"
        )
    return [b_here[-1]]


NOT_ISOLATED = "local executor: the contender could read the other side's files"


def _ran(r: CheckRecord, program_sha256: str) -> bool:
    """Whether a check ran this program; a record that names none ran no program known."""
    return bool(r.contender_sha256) and r.contender_sha256 == program_sha256


def _other_program(r: CheckRecord) -> str:
    if not r.contender_sha256:
        return f"{NO_PROGRAM} (a record of an older kit): run the check again"
    return f"{ANOTHER_PROGRAM} (sha256 {r.contender_sha256[:12]}…)"


def _seeds(seeds: Sequence[int]) -> str:
    return ", ".join(map(str, seeds)) if seeds else "(not recorded)"


def _failed(method: str, r: CheckRecord) -> str:
    if r.first_failing_step is None:
        return f"method {method} failed: {r.reason}"
    return f"method {method} failed at step {r.first_failing_step}"


def check_statuses(
    card: str,
    models: Sequence[str],
    precisions: Sequence[str],
    results: Sequence[CheckRecord],
    *,
    builds: Mapping[str, Sequence[str]] | None = None,
    seeds: Sequence[int] | None = None,
    five_seed_card: str | None = None,
    program_sha256: str | None = None,
) -> dict[str, str]:
    """The mapping that `report.comparison_table(checks=)` takes.

    With `builds` (precision -> contender builds) the keys are "model/precision/build", one per
    build (rule 6 is per build, amendment 4.2); without, "model/precision".
    """
    # without builds, one key a model and precision: a build of None is not asked
    keys = [
        (m, p, b)
        for m in models
        for p in precisions
        for b in ([None] if builds is None else builds.get(p, []))
    ]
    return {
        "/".join(x for x in (m, p, b) if x is not None): check_verdict(
            m,
            p,
            card,
            results,
            build=b,
            seeds=seeds,
            five_seed_card=five_seed_card,
            program_sha256=program_sha256,
        )[0]
        for m, p, b in keys
    }


# -- the products record a check runs with (amendments 4.3, 7.4) ----------------------------


def check_products_dir(path: Path, card_name: str) -> Path:
    """`--products DIR` must be the results directory of this card's own series (7.4)."""
    rd = store.ResultsDir.open(Path(path))
    series = rd.manifest().series or {}
    recorded = series.get("card")
    if not isinstance(recorded, str):
        raise UserError(
            f"{rd.root / store.MANIFEST} records no card (series.card)",
            "name the results directory of a `micakit series` run on this card",
        )
    if recorded != card_name:
        raise UserError(
            f"--products {path} is the results directory of a series on {recorded!r}, "
            f"not on this card, {card_name!r}",
            "name the results directory of this card's own series: no card's products record "
            "stands for another's (amendments 4.3 and 7.4)",
        )
    return rd.root

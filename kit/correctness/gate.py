"""The verdict gate (§3 rule 6, amendment 7.3): a series' configurations judged by the checks
that ran under its protocol file, of the very program the series measured.

Each check's verdict is computed again from its raw logs (`kit.correctness.check_verify.confirmed`),
and a check counts for a series only where it ran the program whose SHA-256 the series'
versions.json records: a check of another program (the same build name, other bytes) never
gates it. gating.json keeps, per configuration, the status and the checks that gave it (their
directories and the program each ran); `verify` derives it again (`gating_differences`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from kit.correctness import check_verify, checks
from kit.correctness.check_plan import KIND
from kit.errors import UserError
from kit.results import store
from kit.results.planned import CONTENDER
from kit.results.store import ResultsDir

GATING = "gating.json"  # as kit.report.tables.GATING, which reads its statuses


class GatingCheck(TypedDict):
    """A check record that gave a configuration its status, as gating.json names it."""

    check_dir: str
    method: str  # "A" or "B"
    card: str
    precision: str
    contender_sha256: str  # the program it ran ("" in a record that names none)
    contender_image_id: str


class GatingJson(TypedDict):
    """gating.json as this kit writes it."""

    check_dirs: list[str]
    contender_sha256: str
    statuses: dict[str, str]  # "model/precision/build" -> "passed" or why not
    gated_by: dict[str, list[GatingCheck]]


@dataclass(frozen=True)
class Gating:
    """gating.json: per "model/precision/build", its status and the checks that gave it."""

    check_dirs: tuple[str, ...]
    contender_sha256: str  # the series' contender, as its versions.json records it
    statuses: dict[str, str]
    # key -> each check record the status was read from: its directory, method, card and the
    # program it ran; empty where no check of this program was found
    gated_by: dict[str, list[GatingCheck]] = field(default_factory=dict)

    def to_json(self) -> GatingJson:
        return {
            "check_dirs": list(self.check_dirs),
            "contender_sha256": self.contender_sha256,
            "statuses": dict(self.statuses),
            "gated_by": {k: [x.copy() for x in v] for k, v in self.gated_by.items()},
        }


def checks_for_series(series_dir: Path, check_dirs: Sequence[Path]) -> dict[str, str]:
    """ "model/precision/build" -> "passed" or why not, for `report.tables(rd, checks=...)`."""
    return gating(series_dir, check_dirs).statuses


def gating(series_dir: Path, check_dirs: Sequence[Path]) -> Gating:
    """Every configuration of the series judged by the checks of `check_dirs`.

    Each is a `micakit correctness` results directory, run under the series' protocol file
    and, for a smoke series, a smoke check only; its verdict is computed again from its raw
    logs and must agree with its record. A configuration is judged by
    `checks.check_verdict` over the records of the series' own program (by SHA-256).
    """
    rd = ResultsDir.open(Path(series_dir))
    manifest = rd.manifest()
    series = manifest.spec
    found: list[tuple[Path, checks.CheckRecord]] = []
    for d in check_dirs:
        m = ResultsDir.open(Path(d)).manifest()
        if m.kind != KIND:
            raise UserError(
                f"--checks {d} is not a correctness check's results directory",
                "name a directory that `micakit correctness` wrote",
            )
        if m.protocol_sha256 != manifest.protocol_sha256:
            raise UserError(
                f"--checks {d} ran under another protocol file than the series {series_dir}",
                "a check gates only the series of its own protocol (§3 rule 1)",
            )
        if m.smoke != manifest.smoke:
            what = "a smoke check" if m.smoke else "a full check"
            raise UserError(
                f"--checks {d} is {what}, and the series is not alike",
                "a smoke check gates only a smoke series",
            )
        found += [(Path(d).resolve(), r) for r in check_verify.confirmed(Path(d))]
    protocol = store.load_protocol(rd)
    precisions = series.get("precisions", [])
    program = str(rd.versions().side(CONTENDER).get("program_sha256") or "")
    c, smoke = protocol.correctness, manifest.smoke
    records = [r for _, r in found]
    statuses: dict[str, str] = {}
    gated_by: dict[str, list[GatingCheck]] = {}
    for model in series.get("models", []):
        for precision in precisions:
            for build in (b.name for b in protocol.builds_for(precision)):
                key = f"{model}/{precision}/{build}"
                if not program:
                    statuses[key], gated_by[key] = checks.NO_SERIES_PROGRAM, []
                    continue
                # amendments 7.1 and 7.3: the protocol's seeds on its five-seed card; a smoke
                # check runs on the CPU with the seeds it was given, and a smoke series is a
                # preview whatever it says
                statuses[key], used = checks.check_verdict(
                    model,
                    precision,
                    manifest.card,
                    records,
                    build=build,
                    seeds=None if smoke else c.seeds,
                    five_seed_card=None if smoke else c.five_seed_card,
                    program_sha256=program,
                )
                gated_by[key] = [_named(found, r) for r in used]
    dirs = tuple(str(Path(d).resolve()) for d in check_dirs)
    return Gating(dirs, program, statuses, gated_by)


def _named(found: Sequence[tuple[Path, checks.CheckRecord]], r: checks.CheckRecord) -> GatingCheck:
    where = next(d for d, x in found if x is r)
    return {
        "check_dir": str(where),
        "method": r.method,
        "card": r.card,
        "precision": r.precision,
        "contender_sha256": r.contender_sha256,
        "contender_image_id": r.contender_image_id,
    }


def gating_differences(series_dir: Path) -> list[str]:
    """gating.json derived again from the check directories it names (`verify`): every
    configuration whose status or gating checks differ, named; [] without gating.json."""
    rd = ResultsDir.open(Path(series_dir))
    if not (rd.root / GATING).exists():
        return []
    saved = rd.read_json(GATING)
    dirs = [Path(d) for d in saved.get("check_dirs", [])]
    gone = [d for d in dirs if not (d / store.MANIFEST).is_file()]
    if gone:
        return [
            f"{GATING}: the check directory {d} is not here, so its gating cannot be derived again"
            for d in gone
        ]
    try:
        fresh = gating(rd.root, dirs).to_json()
    except UserError as e:
        return [f"{GATING}: cannot be derived again: {e.message}"]
    problems = []
    if saved.get("contender_sha256") != fresh["contender_sha256"]:
        problems.append(
            f"{GATING} contender_sha256: saved {saved.get('contender_sha256')!r}, "
            f"derived {fresh['contender_sha256']!r}"
        )
    statuses = saved.get("statuses") or {}
    problems += _mapping_differences(f"{GATING} statuses", statuses, fresh["statuses"])
    # a configuration that no check gated names none, whether saved as [] or left out
    saved_by, fresh_by = _named_only(saved.get("gated_by")), _named_only(fresh["gated_by"])
    problems += _mapping_differences(f"{GATING} gated_by", saved_by, fresh_by)
    return problems


def _named_only(gated_by: Mapping | None) -> dict:
    return {k: v for k, v in (gated_by or {}).items() if v}


def _mapping_differences(where: str, saved: Mapping, fresh: Mapping) -> list[str]:
    return [
        f"{where} {key}: saved {saved.get(key)!r}, derived {fresh.get(key)!r}"
        for key in sorted(set(saved) | set(fresh))
        if saved.get(key) != fresh.get(key)
    ]

"""A check verified as a series is (D6): its verdict, record, tables, plot and correctness.md
recomputed from the raw stamped logs of both sides, and every difference named.

`micakit verify CHECK_DIR` names them all; the gate (`publish --checks`) computes each check's
verdict again here rather than trusting the `passed` its record says, and refuses a check whose
record and logs disagree (`confirmed`).
"""

from __future__ import annotations

import dataclasses
import io
import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kit.correctness import check_md, check_verdict, checks
from kit.correctness.check_plan import KIND, CheckSpec, make_spec, plan_runs
from kit.errors import UserError
from kit.protocol.load import Protocol
from kit.results import judging, store, trees
from kit.results.differences import file_differences, frame_differences
from kit.results.planned import SIDES
from kit.results.run_options import CheckOptions
from kit.results.store import ResultsDir
from kit.results.tablefile import csv_text

# what a record of schema 1 lacks: it is compared without them, and gates nothing
PROGRAM_FIELDS = ("contender_sha256", "contender_image_id")
FIX = "`micakit verify {dir}` names every difference; run the check again in a new directory"


@dataclass(frozen=True)
class Recomputed:
    """A check's verdict computed again from its directory alone, or why it could not be."""

    rd: ResultsDir
    protocol: Protocol
    spec: CheckSpec
    options: CheckOptions
    verdict: check_verdict.Verdict | None  # None: see `problems`
    problems: list[str]  # raw files gone or changed, the plan not as the manifest says


def recompute(root: Path, outputs: bool = True) -> Recomputed:
    """The verdict from the stamped logs, once every raw file is as its run wrote it.

    `outputs`: also hash what run 0 made for method B (the shared start, GBs for M2b; the
    verdict is read from the logs, so the gate leaves them to `verify`).
    """
    rd = ResultsDir.open(Path(root))
    manifest = rd.manifest()
    if manifest.kind != KIND:
        raise UserError(
            f"{root} is not a correctness check's results directory",
            "name a directory that `micakit correctness` wrote",
        )
    protocol = store.load_protocol(rd)  # its SHA-256 against the manifest's, or refused
    options = CheckOptions.from_json(manifest.options)
    spec = make_spec(protocol, options)
    problems = _spec_differences(manifest.check or {}, spec)
    plan = plan_runs(spec)
    problems += _raw_differences(rd, {r.run_id for r in plan}, outputs)
    problems += trees.changed(rd.root, manifest.inputs_sha256)  # nanoGPT's trees, hashed again
    if problems:
        problems.append("not recomputed: the records and raw files above come first")
        return Recomputed(rd, protocol, spec, options, None, problems)
    grammars = {side: judging.grammar(protocol, side) for side in SIDES}
    try:
        v = check_verdict.evaluate(rd, protocol, spec, plan, grammars)
    except (UserError, ValueError) as e:
        said = e.message if isinstance(e, UserError) else str(e)
        return Recomputed(rd, protocol, spec, options, None, [f"cannot recompute: {said}"])
    return Recomputed(rd, protocol, spec, options, v, [])


def _spec_differences(recorded: object, spec: CheckSpec) -> list[str]:
    """What the check ran by (manifest.json's "check") against what its options give."""
    fresh = json.loads(json.dumps(dataclasses.asdict(spec)))
    if not isinstance(recorded, Mapping):
        return [f"{store.MANIFEST}: its check is not a mapping"]
    return [
        f"{store.MANIFEST} check.{k}: recorded {recorded.get(k)!r}, its options give {v!r}"
        for k, v in fresh.items()
        if recorded.get(k) != v
    ]


def _raw_differences(rd: ResultsDir, planned: set[int], outputs: bool) -> list[str]:
    """Each record of a planned run, every raw file it hashed as its run wrote it."""
    problems = []
    for number, r in enumerate(rd.runs(), 1):
        if r.run_id not in planned:
            problems.append(f"{store.RECORDS} line {number}: run {r.run_id} is not in the plan")
            continue
        hashed = dict(r.files)
        if outputs:
            hashed |= {k: str(v) for k, v in (r.outputs or {}).items()}
        for rel, digest in hashed.items():
            path = rd.root / rel
            if not path.is_file():
                problems.append(f"{rel}: raw file missing (run {r.run_id})")
            elif store.sha256_file(path) != digest:
                problems.append(f"{rel}: raw file changed since run {r.run_id} wrote it")
    return problems


def disagreements(stored: list[checks.CheckRecord], fresh: checks.CheckRecord) -> list[str]:
    """Each record of checks.jsonl against the verdict computed again, field by field (its date
    aside). A record of schema 1 names no program and is compared without one."""
    if not stored:
        return [f"{checks.CHECKS_FILE}: no record of the verdict its logs give"]
    out = []
    for number, r in enumerate(stored, 1):
        where = f"{checks.CHECKS_FILE} record {number}"
        skip = {"date_utc", *(PROGRAM_FIELDS if not r.contender_sha256 else ())}
        for f in dataclasses.fields(checks.CheckRecord):
            said, computed = getattr(r, f.name), getattr(fresh, f.name)
            if f.name not in skip and said != computed:
                out.append(f"{where} {f.name}: recorded {said!r}, recomputed {computed!r}")
    return out


def confirmed(check_dir: Path) -> list[checks.CheckRecord]:
    """The gate's records of a check: its verdict computed again from its raw logs, once the
    record says what the logs give; a check whose record and logs disagree is refused.

    A check that has not judged yet (no record) gives none. A record of schema 1 is kept as it
    is, without a program: it never gates (kit.correctness.checks).
    """
    stored = checks.load_checks(Path(check_dir))
    if not stored:
        return []
    found = recompute(Path(check_dir), outputs=False)
    fix = FIX.format(dir=check_dir)
    if found.verdict is None:
        raise UserError(
            f"--checks {check_dir}: its verdict cannot be computed again from its raw logs: "
            f"{found.problems[0]}",
            fix,
        )
    fresh = found.verdict.record
    differ = disagreements(stored, fresh)
    if differ:
        raise UserError(
            f"--checks {check_dir}: its record disagrees with its raw logs: {differ[0]}", fix
        )
    # each record as its logs give it; one of schema 1 still names no program
    unnamed = dataclasses.replace(fresh, contender_sha256="", contender_image_id="")
    return [
        dataclasses.replace(fresh if r.contender_sha256 else unnamed, date_utc=r.date_utc)
        for r in stored
    ]


def verify_check(root: Path) -> list[str]:
    """Every difference between what a check directory publishes and its recomputation: its
    raw files, its record (checks.jsonl), tables/*.csv, its plot and correctness.md."""
    found = recompute(Path(root))
    if found.verdict is None:
        return found.problems
    v, rd = found.verdict, found.rd
    try:
        stored = checks.load_checks(rd.root)
    except UserError as e:
        stored, problems = [], [e.message]
    else:
        problems = disagreements(stored, v.record)
    if stored and not stored[-1].contender_sha256:  # the record that counts names no program
        problems.append(
            f"{checks.CHECKS_FILE} record {len(stored)}: {checks.NO_PROGRAM} (a record of an "
            "older kit), so it gates no series; run the check again"
        )
    for name, df in v.tables.items():
        problems += _table_differences(rd.root, f"tables/{name}.csv", csv_text(df))
    with tempfile.TemporaryDirectory() as tmp:
        plotted = check_verdict.plot(rd, found.protocol, found.spec, v, Path(tmp))
        problems += file_differences(rd.root, plotted.name, plotted.read_bytes())
    said = check_md.Described(
        found.spec, found.options, found.protocol, v.record, check_verdict.shared_outputs(rd)
    )
    text = "\n".join(check_md.markdown(said, v.result))
    problems += file_differences(rd.root, check_md.CORRECTNESS_MD, text.encode("utf-8"))
    return problems


def _table_differences(root: Path, rel: str, recomputed: str) -> list[str]:
    """A published table against its recomputation, cell by cell where the bytes differ."""
    path = root / rel
    if not path.is_file():
        return [f"{rel}: missing"]
    if path.read_bytes() == recomputed.encode("utf-8"):
        return []
    try:
        published = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError) as e:
        return [f"{rel}: not a table ({e})"]
    fresh = pd.read_csv(io.StringIO(recomputed), dtype=str, keep_default_na=False)
    out = frame_differences(rel, published, fresh)
    return out or [f"{rel}: differs from its recomputation in its bytes alone"]

"""The verdict gate (§3 rule 6, amendment 7.3): a series' configurations judged by the checks
that ran under its protocol file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kit.correctness import checks
from kit.correctness.plan import KIND
from kit.engine import store
from kit.engine.store import ResultsDir
from kit.errors import UserError


def checks_for_series(series_dir: Path, check_dirs: Sequence[Path]) -> dict[str, str]:
    """ "model/precision/build" -> "passed" or why not, for `report.tables(rd, checks=...)`.

    Reads every check record of `check_dirs` (each a `micakit correctness` results directory,
    run under the series' protocol file and, for a smoke series, smoke checks only) and judges
    the series' card, models and precisions by `correctness.check_statuses`.
    """
    manifest = ResultsDir.open(Path(series_dir)).manifest()
    series = manifest.spec
    records: list[checks.CheckRecord] = []
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
        records += checks.load_checks(Path(d))
    protocol = store.load_protocol(ResultsDir.open(Path(series_dir)))
    precisions = series.get("precisions", [])
    builds = {p: [b.name for b in protocol.builds_for(p)] for p in precisions}
    c, smoke = protocol.correctness, manifest.smoke
    # amendments 7.1 and 7.3: the protocol's seeds on its five-seed card; a smoke check runs on
    # the CPU with the seeds it was given, and a smoke series is a preview whatever it says
    return checks.check_statuses(
        manifest.card,
        series.get("models", []),
        precisions,
        records,
        builds=builds,
        seeds=None if smoke else c.seeds,
        five_seed_card=None if smoke else c.five_seed_card,
    )

"""The scheduler (§5 "Runs", D3): the discarded runs, then rounds that rotate, then A/A rounds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kit.errors import UserError
from kit.results.planned import (
    AA,
    AA_TWIN,
    CONTENDER,
    DISCARDED,
    PYTORCH,
    TIMED,
    Config,
    PlannedRun,
)


def rotated(items: list, r: int) -> list:
    """The list rotated left by r: round r starts r places further on (D3)."""
    if not items:
        return []
    k = r % len(items)
    return items[k:] + items[:k]


def plan(
    configs: list[Config],
    runs: int,
    discarded_runs: int,
    separate: Sequence[tuple[str, list[str]]] = (),
    aa: Sequence[str] = (),
) -> list[PlannedRun]:
    """Every run of the series, in the order it runs.

    §5: one discarded run of each configuration first (it fills NVRTC's and Inductor's caches),
    then `runs` rounds; each round runs every configuration once, in an order that rotates from
    round to round, so heat and drift touch every configuration alike. The A/A rounds of the
    configurations `aa` names follow the timed rounds, leaving the protocol's plan as it was. The
    separate records of §6 (`separate`: a kind and the configurations it covers) come last, so
    a profiler never runs between two timed or A/A runs.
    """
    ids = [c.id for c in configs]
    if len(set(ids)) != len(ids):
        raise ValueError("configurations must be distinct")
    order: list[PlannedRun] = []
    for _ in range(discarded_runs):
        order += [PlannedRun(len(order) + i, c, 0, DISCARDED) for i, c in enumerate(ids)]
    for r in range(1, runs + 1):
        order += [PlannedRun(len(order) + i, c, r, TIMED) for i, c in enumerate(rotated(ids, r))]
    order += aa_rounds(aa, runs, len(order))
    for kind, covered in separate:
        order += [PlannedRun(len(order) + i, c, runs + 1, kind) for i, c in enumerate(covered)]
    return order


def aa_rounds(aa: Sequence[str], runs: int, first_id: int) -> list[PlannedRun]:
    """The A/A rounds: as many as the timed rounds, each running every chosen configuration
    twice, itself and its identical twin, the pairs in D3's rotated order. The twin runs first
    in odd rounds and second in even ones, so that a run's position in its round (heat, caches,
    a neighbour) shows as a difference between a configuration and its twin rather than hiding
    in both alike."""
    order: list[PlannedRun] = []
    for r in range(1, runs + 1 if aa else 1):
        for c in rotated(list(aa), r):
            pair = (AA_TWIN, AA) if r % 2 else (AA, AA_TWIN)
            order += [PlannedRun(first_id + len(order) + i, c, r, k) for i, k in enumerate(pair)]
    return order


AA_PRIMARY, AA_ALL = "primary", "all"  # `--aa` alone, and `--aa all`


def aa_chosen(
    words: Sequence[str], configs: Sequence[Config], primary: Mapping[str, bool]
) -> list[str]:
    """The configurations the A/A rounds run, in the series' order, from what `--aa` said:
    `primary` (the contender's primary builds and PyTorch's `default` mode, or its first mode
    where the series runs no `default`, of each model and precision), `all`, or ids."""
    ids = [c.id for c in configs]
    if not words:
        return []
    if AA_ALL in words:
        return ids
    named = {w for w in words if w != AA_PRIMARY}
    unknown = sorted(named - set(ids))
    if unknown:
        raise UserError(
            f"--aa names {', '.join(unknown)}, which this series does not run",
            f"name one of its configurations ({', '.join(ids)}), `all`, or give `--aa` alone "
            "for the contender's primary builds and PyTorch's default mode",
        )
    if AA_PRIMARY in words:
        named |= set(_primary_pairs(configs, primary))
    return [i for i in ids if i in named]


def _primary_pairs(configs: Sequence[Config], primary: Mapping[str, bool]) -> list[str]:
    chosen = [c.id for c in configs if c.side == CONTENDER and primary.get(c.id, True)]
    for key in dict.fromkeys((c.model, c.precision) for c in configs):
        modes = [c for c in configs if (c.model, c.precision) == key and c.side == PYTORCH]
        default = [c for c in modes if c.variant == "default"] or modes[:1]
        chosen += [c.id for c in default]
    return chosen

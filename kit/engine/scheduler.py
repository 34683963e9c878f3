"""The scheduler (§5 "Runs", D3): the discarded runs, then rounds that rotate."""

from __future__ import annotations

from collections.abc import Sequence

from kit.results.planned import DISCARDED, TIMED, Config, PlannedRun


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
) -> list[PlannedRun]:
    """Every run of the series, in the order it runs.

    §5: one discarded run of each configuration first (it fills NVRTC's and Inductor's caches),
    then `runs` rounds; each round runs every configuration once, in an order that rotates from
    round to round, so heat and drift touch every configuration alike. The separate records of
    §6 (`separate`: a kind and the configurations it covers) come after the timed rounds, so a
    profiler never runs between two timed runs.
    """
    ids = [c.id for c in configs]
    if len(set(ids)) != len(ids):
        raise ValueError("configurations must be distinct")
    order: list[PlannedRun] = []
    for _ in range(discarded_runs):
        order += [PlannedRun(len(order) + i, c, 0, DISCARDED) for i, c in enumerate(ids)]
    for r in range(1, runs + 1):
        order += [PlannedRun(len(order) + i, c, r, TIMED) for i, c in enumerate(rotated(ids, r))]
    for kind, covered in separate:
        order += [PlannedRun(len(order) + i, c, runs + 1, kind) for i, c in enumerate(covered)]
    return order

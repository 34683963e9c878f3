"""The scheduler (§5 "Runs", D3): configurations, the discarded runs, and rotating rounds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

PYTORCH, CONTENDER = "pytorch", "contender"


@dataclass(frozen=True)
class Config:
    """One configuration: card x model x precision x side (a PyTorch mode or a contender build)."""

    card: str
    model: str
    precision: str
    side: str  # pytorch or contender
    variant: str  # the PyTorch mode, or the contender build

    @property
    def id(self) -> str:
        return f"{self.model}/{self.precision}/{self.side}/{self.variant}"

    @property
    def slug(self) -> str:
        """The id as a file name."""
        return self.id.replace("/", ".")

    def to_json(self) -> dict:
        return asdict(self) | {"id": self.id}

    @classmethod
    def from_json(cls, d: dict) -> Config:
        return cls(d["card"], d["model"], d["precision"], d["side"], d["variant"])


DISCARDED, TIMED, PROFILE, GRAPH_BREAKS = "discarded", "timed", "profile", "graph-breaks"


@dataclass(frozen=True)
class PlannedRun:
    """A planned run, as the engine runs it and plan.json keeps it. A series' run names its
    configuration and round; a correctness check's (kit.correctness.plan.CheckRun) is kept in
    plan.json by its side and seed, and read back as one of these with those two set."""

    run_id: int  # the run's place in the series, fixed before the first run
    config: str = ""  # Config.id; "" for a check's run
    round: int = 0  # 0 for discarded runs; 1..runs for the timed rounds; runs + 1 after them
    kind: str = TIMED  # discarded, timed, or one of the separate records of §6; a check's kind
    side: str = ""  # a check's run only
    seed: int | None = None  # a check's run only

    @property
    def discarded(self) -> bool:
        return self.kind == DISCARDED

    @property
    def timed(self) -> bool:
        return self.kind == TIMED

    def to_json(self) -> dict[str, Any]:
        """Its line of plan.json, as written."""
        if self.side:
            return {"run_id": self.run_id, "kind": self.kind, "side": self.side, "seed": self.seed}
        return {
            "run_id": self.run_id,
            "config": self.config,
            "round": self.round,
            "kind": self.kind,
            "discarded": self.discarded,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PlannedRun:
        if "side" in d and "config" not in d:
            return cls(
                int(d["run_id"]), kind=str(d["kind"]), side=str(d["side"]), seed=d.get("seed")
            )
        # schema 0: a series' runs were all timed or discarded, said by "discarded" alone
        kind = d.get("kind") or (DISCARDED if d.get("discarded") else TIMED)
        return cls(int(d["run_id"]), str(d["config"]), int(d["round"]), str(kind))


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

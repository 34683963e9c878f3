"""What plan.json holds (§5 "Runs", D3): the configurations, and every planned run with its kind.

The order the runs take (discarded runs first, rotating rounds) is kit.engine.scheduler's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

PYTORCH, CONTENDER = "pytorch", "contender"
# The sides, each by its one code name, in the order every table and plot gives them. The
# contender is "contender" in code, whatever build it runs ("mica" is its image's and its
# default build's name, where the user meets it).
SIDES = (PYTORCH, CONTENDER)
SIDE_LABELS = {PYTORCH: "PyTorch", CONTENDER: "the contender"}


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
# A/A rounds after the timed rounds: a configuration's own A/A run, and its identical twin's
AA, AA_TWIN = "aa", "aa-twin"
AA_KINDS = (AA, AA_TWIN)


def twin_name(config_id: str) -> str:
    """The name a reader sees for a configuration's identical twin in the A/A rounds."""
    return f"{config_id}~aa"


@dataclass(frozen=True)
class PlannedRun:
    """A planned run, as the engine runs it and plan.json keeps it. A series' run names its
    configuration and round; a correctness check's (kit.correctness.check_plan.CheckRun) is kept in
    plan.json by its side and seed, and read back as one of these with those two set."""

    run_id: int  # the run's place in the series, fixed before the first run
    config: str = ""  # Config.id; "" for a check's run
    # 0 for discarded runs; 1..runs for the timed rounds and again for the A/A rounds; runs + 1
    # for the separate records of §6
    round: int = 0
    kind: str = TIMED  # discarded, timed, aa, aa-twin, or a separate record of §6; a check's kind
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

"""A correctness check's plan (§7): what it runs and judges by, and its runs in order."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kit.protocol.load import Protocol
from kit.results.planned import PYTORCH, SIDES, Config
from kit.results.run_options import CheckOptions

KIND = "correctness"  # the manifest's kind: a check's results directory, not a series'
SHARED_START, TRAINING = "shared-start", "training"  # the kinds of a check's runs
SHARED_DIR = "shared_start"  # §7 B: the shared start, in the results directory
CKPT, INIT, BATCHES = "ckpt.pt", "init.safetensors", "batch_order.npy"


@dataclass(frozen=True)
class CheckSpec:
    """What a check runs and judges by; saved in the manifest, taken from it on resume."""

    method: str  # "A" or "B"
    model: str
    precision: str  # method B: float32 (§7 B)
    seeds: tuple[int, ...]  # method B: the shared start's one seed
    card: str
    device: str
    smoke: bool
    contender_build: str  # amendment 4.2: the build the verdict compares
    pytorch_mode: str  # method A: the protocol's mode; method B: eager (compile=False)
    steps: int  # method A: the model's whole schedule; method B: its steps
    eval_interval: int
    eval_iters: int
    from_step: int  # method A: judged from this step on
    batch_size: int | None = None  # amendment 5.1: the batch its series halved, if it did

    def config(self, side: str) -> Config:
        variant = self.pytorch_mode if side == PYTORCH else self.contender_build
        return Config(self.card, self.model, self.precision, side, variant)


@dataclass(frozen=True)
class CheckRun:
    run_id: int
    kind: str  # shared-start or training
    side: str
    seed: int

    @property
    def slug(self) -> str:
        return SHARED_START if self.kind == SHARED_START else f"{self.side}.seed{self.seed}"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def plan_runs(spec: CheckSpec) -> list[CheckRun]:
    """§7 A: each seed on both sides; §7 B: the shared start, then one run a side."""
    runs = [CheckRun(0, SHARED_START, PYTORCH, spec.seeds[0])] if spec.method == "B" else []
    for seed in spec.seeds:
        for side in SIDES:
            runs.append(CheckRun(len(runs), TRAINING, side, seed))
    return runs


def make_spec(p: Protocol, o: CheckOptions) -> CheckSpec:
    c, smoke, a = p.correctness, o.smoke, o.method == "A"
    steps = p.model(o.model).full_steps if a else c.method_b_steps
    builds = [b.name for b in p.builds_for(o.precision) if b.primary]
    return CheckSpec(
        method=o.method,
        model=o.model,
        precision=o.precision,
        seeds=tuple(o.seeds),
        card=o.card,
        device=o.device,
        smoke=smoke,
        contender_build=builds[0],
        pytorch_mode=c.pytorch_mode if a else "eager",
        steps=(c.smoke_full_steps if a else c.smoke_method_b_steps) if smoke else steps,
        eval_interval=c.smoke_eval_interval if smoke else c.eval_interval,
        eval_iters=c.smoke_eval_iters if smoke else c.eval_iters,
        from_step=c.smoke_method_a_from_step if smoke else c.method_a_from_step,
        batch_size=o.batch_size,
    )


def method_b_windows(
    p: Protocol, spec: CheckSpec
) -> tuple[tuple[int, int], tuple[int, int] | None]:
    """Method B's judged window and the one published beside it (amendment 6), both scaled to
    a smoke check's steps."""
    scale = spec.steps / p.correctness.method_b_steps

    def scaled(w: tuple[int, int]) -> tuple[int, int]:
        return (w[0], max(w[0], round(w[1] * scale)))

    beside = p.method_b_beside_window(spec.model)
    return scaled(p.method_b_window(spec.model)), scaled(beside) if beside else None

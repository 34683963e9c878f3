"""The protocol as data (§3 rule 1): loaded from one TOML file, checked key by key and typed.

Nothing that decides a comparison is read from anywhere else. The file's SHA-256 identifies it
in every results directory; a series refuses to resume under a file whose hash changed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import ClassVar

from kit.errors import UserError
from kit.protocol import typed_toml

SCHEMA = 1
# The protocol's files live in benchmarks/NanoGpt/ (where the protocol names them) and travel in
# the package as kit/files/, so an installed kit reads the same bytes as a checkout.
FILES = Path(str(resources.files("kit") / "files"))
DEFAULT_PATH = FILES / "protocol.toml"
FAMILIES = "families.tsv"  # beside the protocol file (§6: fixed before the first series)


@dataclass(frozen=True)
class Timing:
    steps: int
    window: tuple[int, int]
    runs: int
    discarded_runs: int
    log_interval: int
    cross_check_tolerance: float
    verdict_margin: float
    # hangs: a run with no output line for stall_s seconds, or running longer than
    # run_limit_factor times its configuration's discarded run, is stopped and fails
    stall_s: float = 600.0
    run_limit_factor: float = 3.0
    # a run's stderr is kept to this many bytes: its first and last halves, the cut marked
    stderr_cap_bytes: int = 64 << 20


@dataclass(frozen=True, kw_only=True)
class Grammar:
    """How a side's step lines read, and how it says it ran out of memory."""

    line_regex: str
    step_prefix: str  # a line that starts like a step line but breaks the grammar is an error
    own_clock: str  # "cumulative": time_ms since start; "per_step": the last step's time
    oom_patterns: list[str]  # regular expressions: a line matching one, then an exit status
    # §5: a side's own reading is cross-checked with the outside clock; nanoGPT's alone is
    # recorded and not compared (PyTorch below), whichever clock a side declares
    own_clock_compared: ClassVar[bool] = True


@dataclass(frozen=True, kw_only=True)
class PyTorch(Grammar):
    own_clock_compared: ClassVar[bool] = False
    modes: list[str]
    patched_modes: list[str]
    torch: str
    numpy: str


@dataclass(frozen=True)
class NanoGpt:
    commit: str
    tree: str
    archive_url: str
    patch: str
    files: dict[str, str]


@dataclass(frozen=True)
class Data:
    input_sha256: str
    input_url: str


@dataclass(frozen=True)
class Build:
    name: str
    precisions: list[str]
    args: list[str]
    primary: bool


@dataclass(frozen=True, kw_only=True)
class Contender(Grammar):
    command: list[str]
    init_args: list[str]
    batch_args: list[str]
    version_args: list[str]
    development_pattern: str
    builds: list[Build]


@dataclass(frozen=True)
class Precisions:
    names: list[str]
    min_compute_capability: dict[str, float]


@dataclass(frozen=True)
class Model:
    label: str
    dataset: str
    config: str
    args: list[str]
    full_steps: int
    batch_size: int  # the batch the protocol trains; amendment 5.1 may halve it on a card
    parameters: str
    size_sentence: str
    halve_batch_when_no_mode_fits: bool = False


@dataclass(frozen=True)
class Smoke:
    device: str
    precisions: list[str]
    modes: list[str]
    runs: int
    discarded_runs: int
    args: list[str]


@dataclass(frozen=True)
class Conditions:
    """§5 Conditions of a CPU series (kit.telemetry.machine): a card is busy when it holds
    another program; a machine, when other processes use more than `cpu_busy_share` of all its
    CPUs' time over a look of `cpu_look_s` before a run, or over the run's timed window."""

    cpu_busy_share: float = 0.25
    cpu_look_s: float = 0.5


@dataclass(frozen=True)
class Diagnostics:
    """The kit's own diagnostics, outside §10 (they never change D1's words): `threshold` is the
    smallest relative difference between two sides worth a word (`micakit compare`'s classes,
    the resolution beside a verdict); `throttle_share`: a side whose timed runs spent more than
    this share of their samples power-capped or throttled (NVML's clock-event reasons) makes the
    verdict ambiguous."""

    threshold: float = 0.01
    throttle_share: float = 0.05


@dataclass(frozen=True)
class Correctness:
    """§7's checks (D5, amendments 6 and 7): what `micakit correctness` runs and judges by."""

    seeds: list[int]
    five_seed_card: str
    pytorch_mode: str
    eval_interval: int
    eval_iters: int
    method_a_from_step: int
    method_b_steps: int
    method_b_window: tuple[int, int]  # §7 B: steps 1 to 200
    method_b_windows: dict[str, tuple[int, int]]  # amendment 6.1: a model's own judged window
    method_b_beside_windows: dict[str, tuple[int, int]]  # amendment 6.2: published beside
    step0_tolerance: float
    step_tolerance: float
    shared_start_seed: int
    eval_args: list[str]
    method_b_args: list[str]
    smoke_full_steps: int
    smoke_eval_interval: int
    smoke_eval_iters: int
    smoke_method_a_from_step: int
    smoke_method_b_steps: int


@dataclass(frozen=True)
class Cards:
    """D3: the cards the protocol names, as NVML names them; any other card is labelled."""

    named: list[str]


@dataclass(frozen=True)
class Amendment:
    number: int
    date: str
    series_run: bool
    title: str
    reason: str


@dataclass(frozen=True)
class Protocol:
    schema: int
    name: str
    title: str
    timing: Timing
    pytorch: PyTorch
    nanogpt: NanoGpt
    data: Data
    contender: Contender
    cards: Cards
    precisions: Precisions
    models: dict[str, Model]
    smoke: Smoke
    correctness: Correctness
    amendments: list[Amendment]
    conditions: Conditions = field(default_factory=Conditions)  # a file without it: defaults
    diagnostics: Diagnostics = field(default_factory=Diagnostics)  # older files: defaults
    # not in the file: where it was read and its hash
    path: Path = field(default=Path(), compare=False)
    sha256: str = field(default="", compare=False)

    def model(self, name: str) -> Model:
        if name not in self.models:
            raise UserError(
                f"unknown model {name!r}",
                f"choose one of {', '.join(self.models)} (the protocol file {self.path.name})",
            )
        return self.models[name]

    def check_precision(self, name: str) -> str:
        if name not in self.precisions.names:
            raise UserError(
                f"unknown precision {name!r}", f"choose one of {', '.join(self.precisions.names)}"
            )
        return name

    def builds_for(self, precision: str) -> list[Build]:
        return [b for b in self.contender.builds if precision in b.precisions]

    def names_card(self, card: str) -> bool:
        """D3: whether the protocol names this card (its NVML name)."""
        return card in self.cards.named

    def method_b_window(self, model: str) -> tuple[int, int]:
        """The steps method B judges for a model (amendment 6.1: GPT-2 medium 1 to 100)."""
        c = self.correctness
        return c.method_b_windows.get(model, c.method_b_window)

    def method_b_beside_window(self, model: str) -> tuple[int, int] | None:
        """The window whose verdict stands beside the judged one (amendment 6.2), if any."""
        return self.correctness.method_b_beside_windows.get(model)

    def beside(self, relative: str) -> Path:
        """A file the protocol names, beside the protocol file."""
        return self.path.parent / relative


def _validate(p: Protocol) -> None:
    """Cross-field rules a type cannot say."""
    _check_bounds(p)
    _check_timing_window(p.timing)
    for name, m in p.models.items():
        if m.batch_size < 1 or m.full_steps < 1:
            raise UserError(
                f"protocol file: models.{name}: batch_size and full_steps must be at least 1",
                "correct that key (see benchmarks/NanoGpt/protocol.toml for the reference file)",
            )
    for side, grammar in (("pytorch", p.pytorch), ("contender", p.contender)):
        _check_grammar(side, grammar)
    _check_names(p)
    _check_seeds(p.correctness)
    if not p.cards.named:
        raise UserError("protocol file: cards.named must name at least one card")
    _check_correctness_steps(p)


Bound = tuple[str, object, bool, str]  # a key, its value, whether it is within, what it must be


def _check_bounds(p: Protocol) -> None:
    """Each number the protocol file holds, within its bounds."""
    for key, value, ok, want in (*_timing_bounds(p.timing), *_other_bounds(p)):
        if not ok:
            raise UserError(
                f"protocol file: {key} is {value!r}; it must be {want}",
                "correct that key (see benchmarks/NanoGpt/protocol.toml for the reference file)",
            )


def _timing_bounds(t: Timing) -> list[Bound]:
    """§5's numbers (the [timing] table)."""
    lo, hi = t.window
    return [
        ("timing.steps", t.steps, t.steps >= 1, "at least 1"),
        ("timing.window", t.window, lo >= 0 and hi >= 0, "two steps, neither negative"),
        ("timing.runs", t.runs, t.runs >= 1, "at least 1"),
        ("timing.discarded_runs", t.discarded_runs, t.discarded_runs >= 0, "0 or more"),
        ("timing.log_interval", t.log_interval, t.log_interval >= 1, "at least 1"),
        (
            "timing.cross_check_tolerance",
            t.cross_check_tolerance,
            0 < t.cross_check_tolerance < 1,
            "between 0 and 1 (0.01 is 1%)",
        ),
        (
            "timing.verdict_margin",
            t.verdict_margin,
            0 <= t.verdict_margin < 1,
            "between 0 and 1 (0.05 is 5%)",
        ),
        ("timing.stall_s", t.stall_s, t.stall_s > 0, "more than 0 seconds"),
        (
            "timing.stderr_cap_bytes",
            t.stderr_cap_bytes,
            t.stderr_cap_bytes >= 1 << 16,
            "at least 65536 bytes",
        ),
        ("timing.run_limit_factor", t.run_limit_factor, t.run_limit_factor >= 1, "at least 1"),
    ]


def _other_bounds(p: Protocol) -> list[Bound]:
    """The other tables' numbers: the smoke series, the conditions, the diagnostics, §7."""
    d = p.diagnostics
    return [
        ("smoke.runs", p.smoke.runs, p.smoke.runs >= 1, "at least 1"),
        (
            "conditions.cpu_busy_share",
            p.conditions.cpu_busy_share,
            0 < p.conditions.cpu_busy_share <= 1,
            "above 0 and at most 1 (0.25 is a quarter of all CPUs' time)",
        ),
        (
            "conditions.cpu_look_s",
            p.conditions.cpu_look_s,
            p.conditions.cpu_look_s > 0,
            "more than 0 seconds",
        ),  # fmt: skip
        ("diagnostics.threshold", d.threshold, 0 <= d.threshold < 1, "from 0 to 1 (0.01 is 1%)"),
        (
            "diagnostics.throttle_share",
            d.throttle_share,
            0 <= d.throttle_share <= 1,
            "between 0 and 1",
        ),
        ("smoke.discarded_runs", p.smoke.discarded_runs, p.smoke.discarded_runs >= 0, "0 or more"),
        (
            "correctness.step0_tolerance",
            p.correctness.step0_tolerance,
            0 < p.correctness.step0_tolerance < 1,
            "between 0 and 1",
        ),
        (
            "correctness.step_tolerance",
            p.correctness.step_tolerance,
            0 < p.correctness.step_tolerance < 1,
            "between 0 and 1",
        ),
    ]


def _check_timing_window(t: Timing) -> None:
    """§5's window: on logged steps, rising, within the steps trained."""
    lo, hi = t.window
    if lo % t.log_interval or hi % t.log_interval:
        raise UserError("protocol file: timing.window must fall on logged steps (log_interval)")
    if not lo < hi:
        raise UserError(
            f"protocol file: timing.window {list(t.window)} must rise (its first step before "
            "its last)"
        )
    if hi > t.steps:
        raise UserError(
            f"protocol file: timing.window ends at step {hi}, beyond timing.steps = {t.steps}",
            "end the window at or before the last step trained",
        )


def _check_grammar(side: str, grammar: Grammar) -> None:
    """A side's log grammar: its expressions compile and name the groups the reader needs."""
    for key in ("line_regex", "step_prefix"):
        try:
            rx = re.compile(getattr(grammar, key))
        except re.error as e:
            raise UserError(
                f"protocol file: {side}.{key} is not a regular expression: {e}"
            ) from None
        if key == "line_regex" and not {"step", "loss"} <= set(rx.groupindex):
            raise UserError(
                f"protocol file: {side}.line_regex must have the groups (?P<step>...) "
                "and (?P<loss>...)"
            )
    for pattern in grammar.oom_patterns:
        try:
            re.compile(pattern)
        except re.error as e:
            raise UserError(
                f"protocol file: {side}.oom_patterns {pattern!r} is not a regular expression: {e}",
                "write each pattern as a regular expression (escape . and parentheses)",
            ) from None
    if grammar.own_clock not in ("cumulative", "per_step"):
        raise UserError(f"protocol file: {side}.own_clock must be 'cumulative' or 'per_step'")


def _check_names(p: Protocol) -> None:
    """The modes, precisions and builds the file names exist, and builds are named once."""
    for mode in p.pytorch.patched_modes:
        if mode not in p.pytorch.modes:
            raise UserError(f"protocol file: pytorch.patched_modes names unknown mode {mode!r}")
    for b in p.contender.builds:
        for prec in b.precisions:
            if prec not in p.precisions.names:
                raise UserError(f"protocol file: build {b.name} names unknown precision {prec}")
    names = [b.name for b in p.contender.builds]
    if len(set(names)) != len(names):
        raise UserError("protocol file: contender build names must be distinct")


def _check_seeds(c: Correctness) -> None:
    """§7 A: the seeds are distinct and rising."""
    if not c.seeds or any(y <= x for x, y in zip(c.seeds, c.seeds[1:])):
        raise UserError("protocol file: correctness.seeds must be distinct and rising")


def _check_correctness_steps(p: Protocol) -> None:
    """§7's windows, mode and evaluations fit the steps the checks train."""
    c = p.correctness
    windows = [("method_b_window", c.method_b_window)]
    windows += [(f"method_b_windows.{m}", w) for m, w in c.method_b_windows.items()]
    windows += [(f"method_b_beside_windows.{m}", w) for m, w in c.method_b_beside_windows.items()]
    for key, (lo, hi) in windows:
        if not 1 <= lo <= hi <= c.method_b_steps:
            raise UserError(
                f"protocol file: correctness.{key} must satisfy 1 <= first <= last <= "
                f"method_b_steps ({c.method_b_steps})"
            )
    if c.pytorch_mode not in p.pytorch.modes:
        raise UserError(f"protocol file: correctness.pytorch_mode {c.pytorch_mode!r} is no mode")
    for prefix in ("", "smoke_"):
        interval = getattr(c, f"{prefix}eval_interval")
        if interval < 1 or getattr(c, f"{prefix}method_a_from_step") % interval:
            raise UserError(
                f"protocol file: correctness.{prefix}method_a_from_step must fall on an "
                f"evaluation (a multiple of {prefix}eval_interval)"
            )


def load(path: Path | None = None) -> Protocol:
    """Read and check a protocol file; any flaw is a UserError naming the key."""
    path = Path(path) if path else DEFAULT_PATH
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UserError(
            f"cannot read the protocol file {path}: {e.strerror}",
            "name an existing file with --protocol, or leave it out for the reference protocol",
        ) from None
    try:
        table = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"the protocol file {path} is not valid TOML: {e}") from None
    schema = table.get("schema")
    if schema != SCHEMA:
        raise UserError(
            f"the protocol file {path} has schema {schema!r}; this kit reads schema {SCHEMA}",
            "use a protocol file written for this kit version",
        )
    protocol = typed_toml.build(Protocol, table, "")
    protocol = dataclasses.replace(
        protocol, path=path.resolve(), sha256=hashlib.sha256(raw).hexdigest()
    )
    _validate(protocol)
    return protocol

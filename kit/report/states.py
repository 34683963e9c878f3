"""A configuration's state, computed in one place from the runs judged again from raw logs.

Every table, the Markdown and HTML reports, `merge` and the verdicts read a configuration's
state from here, so no two of them can disagree on which configuration has a time:

- complete: every planned timed run ok (§5: five runs, the median and the range);
- out of memory: any run of it, the discarded one included (amendments 5.2 and 8.1): no time;
- void: any run void, the reasons listed (§5 cross-checks: its cause is found before anything
  is published);
- failed: any run failed in another way (amendment 8.4: it ends the series);
- incomplete: k of the n planned timed runs have a result, the series stopped or resumes.

Only a complete configuration has a time. Rule 6 (and amendment 7.3) then decides whether that
time is published: `publication()` says "published", or why it is withheld. The tables keep
that as text; `Publication.of` reads its kind back, the one place that reads the text.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pandas as pd

from kit.correctness.checks import UNBOUND
from kit.measure import timing
from kit.results.documents import Plan

# §3 rule 6 and the preview that shows what it withholds
WITHHELD = "withheld"  # the first word of every withheld cell: "withheld: why"
WITHHELD_NOT_CHECKED = f"{WITHHELD}: correctness not checked (rule 6)"
WITHHELD_FAILED = f"{WITHHELD}: correctness failed"
PREVIEW = "preparation: not a protocol result"
PUBLISHED = "published"
NOT_NAMED = "card not named by the protocol"  # D3: any other card runs the same series
NOT_CHECKED = "correctness not checked"
PASSED = "passed"  # a check's status when every method it needs passed


class Publication(enum.Enum):
    """Whether a configuration's time is published (rule 6): the kind of its publication cell,
    which the tables write as text ("published", the preview's label, or "withheld: why")."""

    PUBLISHED = PUBLISHED
    PREVIEW = PREVIEW
    WITHHELD = WITHHELD

    @classmethod
    def of(cls, cell: object) -> Publication | None:
        """The kind of a publication cell as `publication()` writes it; None for no cell (a
        configuration a table does not list)."""
        text = str(cell)
        if text in (PUBLISHED, PREVIEW):
            return cls(text)
        word, colon, _ = text.partition(": ")
        return cls.WITHHELD if colon and word == WITHHELD else None


class CheckOutcome(enum.Enum):
    """What a check's status (`kit.correctness.checks.check_verdict`, gating.json) says for
    rule 6. A status is "passed", or its reasons joined by "; ": read here, once."""

    PASSED = "passed"
    FAILED = "failed"  # a method ran and failed
    UNBOUND = "unbound"  # a check of another program, or of none named
    NOT_CHECKED = "not checked"  # not checked, or some of its check not run yet

    @classmethod
    def of(cls, status: str) -> CheckOutcome:
        if status == PASSED:
            return cls.PASSED
        if "failed" in status:
            return cls.FAILED
        if any(why in status for why in UNBOUND):
            return cls.UNBOUND
        return cls.NOT_CHECKED


class State(enum.StrEnum):
    COMPLETE = "complete"
    OUT_OF_MEMORY = "out of memory"
    VOID = "void"
    FAILED = "failed"
    INCOMPLETE = "incomplete"


@dataclass(frozen=True)
class ConfigState:
    """What a configuration's runs allow it to publish."""

    config: str
    state: State
    reason: str  # why it has no time; "" when complete
    planned: int  # planned timed runs
    ok: int  # timed runs that are ok
    step_s: tuple[float, ...]  # the timed runs' step times; empty unless complete

    @property
    def has_time(self) -> bool:
        return self.state is State.COMPLETE

    @property
    def shown(self) -> str:
        """The state as a table cell: "complete", or the state with its reason."""
        if self.state is State.COMPLETE:
            return self.state.value
        if self.state is State.OUT_OF_MEMORY:
            return f"{self.state.value} {self.reason}"  # "out of memory in run 7"
        return f"{self.state.value}: {self.reason}"


def config_state(config: str, runs: pd.DataFrame, plan: Plan) -> ConfigState:
    """The state of one configuration from the judged runs (`tables.runs_table`) and the plan.

    The order of the tests is the order of precedence: out of memory ends a configuration
    whatever else happened (amendment 8.1); a void run stops publication until its cause is
    found (§5); a failure ends the series (amendment 8.4); then k of n.
    """
    planned = plan.timed(config)
    mine = runs[(runs["config"] == config) & runs["kind"].isin(["discarded", "timed"])]
    timed = mine[mine["kind"] == "timed"]
    ok = timed[timed["status"] == timing.OK]
    oom = mine[mine["status"] == timing.OOM]
    void = mine[mine["status"] == timing.VOID]
    failed = mine[mine["status"] == timing.FAILED]
    n, k = len(planned), len(ok)
    if len(oom):
        r = oom.iloc[0]
        where = f"in run {int(r['run_id'])}" + (" (discarded)" if r["kind"] == "discarded" else "")
        return ConfigState(config, State.OUT_OF_MEMORY, where, n, k, ())
    if len(void):
        reasons = "; ".join(f"run {int(r['run_id'])}: {r['reason']}" for _, r in void.iterrows())
        return ConfigState(config, State.VOID, f"{len(void)} void ({reasons})", n, k, ())
    if len(failed):
        reasons = "; ".join(f"run {int(r['run_id'])}: {r['reason']}" for _, r in failed.iterrows())
        return ConfigState(config, State.FAILED, reasons, n, k, ())
    if k < n or n == 0:
        return ConfigState(config, State.INCOMPLETE, f"{k} of {n} timed runs", n, k, ())
    return ConfigState(config, State.COMPLETE, "", n, k, tuple(ok["step_s"].astype(float)))


def config_states(runs: pd.DataFrame, plan: Plan) -> dict[str, ConfigState]:
    """Every planned configuration's state, in the plan's order."""
    return {c.id: config_state(c.id, runs, plan) for c in plan.configurations}


def check_key(model: str, precision: str, build: str) -> str:
    """Rule 6 is per model, precision and contender build (amendment 4.2: a secondary build
    does not inherit the primary build's check)."""
    return f"{model}/{precision}/{build}"


def publication(check: str, preview: bool) -> str:
    """Whether a configuration's speed is published (rule 6), or why it is withheld."""
    if preview:
        return PREVIEW
    outcome = CheckOutcome.of(check)
    if outcome is CheckOutcome.PASSED:
        return PUBLISHED
    if outcome is CheckOutcome.FAILED:
        return WITHHELD_FAILED
    if outcome is CheckOutcome.UNBOUND:  # a check of another program, or of none named
        return f"{WITHHELD}: {check}"
    return WITHHELD_NOT_CHECKED  # not checked, or some of its check not run yet


def named_card(card: str, named: list[str]) -> bool:
    """D3: the protocol names its cards as NVML names them."""
    return card in named


# the checks a status says are missing (kit.correctness.checks.check_verdict's reasons)
METHOD_A, METHOD_A_ONE_SEED, METHOD_B = "A", "A one seed", "B"


def missing_methods(status: str) -> frozenset[str]:
    """Which checks a configuration's status still waits for: all of them where none of this
    program ran, else those its reasons name (method A, its one seed on another card, B)."""
    outcome = CheckOutcome.of(status)
    if outcome is CheckOutcome.PASSED:
        return frozenset()
    if outcome is CheckOutcome.UNBOUND or status == NOT_CHECKED:
        return frozenset({METHOD_A, METHOD_B})
    found = set()
    for reason in status.split("; "):
        if reason.startswith("method A's one seed"):
            found.add(METHOD_A_ONE_SEED)
        elif reason.startswith("method A") and "failed" not in reason:
            found.add(METHOD_A)
        elif reason.startswith("method B") and "failed" not in reason:
            found.add(METHOD_B)
    return frozenset(found)

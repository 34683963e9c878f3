"""`micakit compare --fail-slower PCT`'s gate: does B pass against A? It fails closed.

B fails where a configuration of it is slower than A's by more than PCT, its bounds of B / A
clear of 1 + PCT (the interval, or below intervals.MIN_RUNS runs a side the ranges: B's fastest
run over A's slowest), and where B lacks what A has: a configuration, or a time (B's runs
failed, were void or ran out of memory) — unless `--allow-missing`. Where the gate cannot
decide (the class is ambiguous: runs flagged on either side, an A/A not level, a difference
the runs cannot resolve; or no time to compare) it says so and why, and fails only with
`--fail-ambiguous`. A gate that cannot decide never passes silently.
"""

from __future__ import annotations

from dataclasses import dataclass

from kit.errors import ExitCode
from kit.report.comparison import AMBIGUOUS, Compared, Comparison, OnlyIn


@dataclass(frozen=True)
class Finding:
    """One configuration the gate names, and why."""

    configuration: str  # "model · precision · side · variant"
    why: str

    def to_json(self) -> dict[str, str]:
        return {"configuration": self.configuration, "why": self.why}


@dataclass(frozen=True)
class Gate:
    """The gate's findings at `percent` (0.05 is 5%)."""

    percent: float
    slower: tuple[Finding, ...]
    missing: tuple[Finding, ...]  # B lacks a configuration or a time A has
    undecided: tuple[Finding, ...]
    allow_missing: bool = False
    fail_ambiguous: bool = False

    def exit_code(self) -> ExitCode:
        if self.slower:
            return ExitCode.SLOWER
        if self.missing and not self.allow_missing:
            return ExitCode.GATE_MISSING
        if self.undecided and self.fail_ambiguous:
            return ExitCode.GATE_UNDECIDED
        return ExitCode.OK

    def to_json(self) -> dict[str, object]:
        return {
            "percent": self.percent,
            "exit_code": int(self.exit_code()),
            "slower": [f.to_json() for f in self.slower],
            "missing": [f.to_json() for f in self.missing],
            "undecided": [f.to_json() for f in self.undecided],
            "allow_missing": self.allow_missing,
            "fail_ambiguous": self.fail_ambiguous,
        }

    def lines(self) -> list[str]:
        """What stderr says: each configuration named, then the outcome."""
        pct = f"{self.percent:.{_digits(self.percent)}%}"
        out = [
            f"B slower than A by more than {pct}: {f.configuration}: {f.why}" for f in self.slower
        ]
        lacks = "B lacks what A has" + (
            " (--allow-missing: not failed)" if self.allow_missing else ""
        )
        out += [f"{lacks}: {f.configuration}: {f.why}" for f in self.missing]
        out += [f"the gate could not decide: {f.configuration}: {f.why}" for f in self.undecided]
        code = self.exit_code()
        if code is ExitCode.OK:
            said = f"gate {pct}: passed"
            if self.undecided:
                said += f", {len(self.undecided)} undecided (--fail-ambiguous fails on them)"
        else:
            said = f"gate {pct}: failed (exit {int(code)})"
        return [*out, said]


def _digits(percent: float) -> int:
    """Enough decimals to print the percent given (2 → 2%, 0.5 → 0.5%)."""
    text = f"{percent * 100:g}"
    return len(text.split(".")[1]) if "." in text else 0


def name(e: Compared | OnlyIn) -> str:
    return f"{e['model']} · {e['precision']} · {e['side']} · {e['variant']}"


def _bound_low(e: Compared) -> float | None:
    """The smallest B / A the runs allow: the interval's low end, else the ranges'."""
    if e["interval_b_over_a"] is not None:
        return e["interval_b_over_a"][0]
    if e["a_s"] is None or e["b_s"] is None:
        return None
    return e["b_s"]["min"] / e["a_s"]["max"]


def _said_bounds(e: Compared) -> str:
    ratio = e["ratio_b_over_a"]
    if e["interval_b_over_a"] is not None and e["interval_level"] is not None:
        low, high = e["interval_b_over_a"]
        return f"B / A {ratio:.3f}, {e['interval_level']:.0%} interval {low:.3f}–{high:.3f}"
    return f"B / A {ratio:.3f}, B's fastest run {_bound_low(e):.3f}× A's slowest"


def _one(e: Compared, percent: float) -> tuple[str, str] | None:
    """("slower" | "missing" | "undecided", why) for one configuration; None where it passes."""
    if e["has_time_a"] and not e["has_time_b"]:
        return "missing", f"A has a time, B none ({e['state_b']})"
    if e["a_s"] is None or e["b_s"] is None:
        if not e["has_time_a"] and e["has_time_b"]:
            return "undecided", f"A has no time to hold B against ({e['state_a']})"
        if e["has_time_a"]:  # both have one, withheld by rule 6
            return "undecided", "times withheld by rule 6 (--preview shows them)"
        return "undecided", f"no time on either side (A: {e['state_a']}; B: {e['state_b']})"
    flagged = [
        x for x in (e["flagged_a"], e["flagged_b"], e["aa_not_level_a"], e["aa_not_level_b"]) if x
    ]
    if flagged:
        return "undecided", e["reason"]
    low = _bound_low(e)
    if low is not None and low > 1 + percent:
        return "slower", f"{_said_bounds(e)}, above {1 + percent:g}"
    if e["verdict"] == AMBIGUOUS:
        return "undecided", e["reason"]
    return None


def gate(
    result: Comparison, percent: float, *, allow_missing: bool = False, fail_ambiguous: bool = False
) -> Gate:
    """The gate's findings over every configuration A has."""
    found: dict[str, list[Finding]] = {"slower": [], "missing": [], "undecided": []}
    for e in result["both"]:
        one = _one(e, percent)
        if one is not None:
            found[one[0]].append(Finding(name(e), one[1]))
    for o in result["only_in_a"]:
        found["missing"].append(Finding(name(o), "B lacks this configuration"))
    return Gate(
        percent,
        tuple(found["slower"]),
        tuple(found["missing"]),
        tuple(found["undecided"]),
        allow_missing,
        fail_ambiguous,
    )

"""From a run's stamped logs to its outcome and step time (§5), and nothing else.

Everything here is a pure function of the raw files, so `micakit report` recomputes every
number from them alone, and `micakit verify` can tell when a published number differs.
"""

from __future__ import annotations

import functools
import math
import os
import re
import signal
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from kit.measure.stamped import StampedLine, read_stamped
from kit.protocol.load import Grammar, Timing
from kit.status import RunStatus

# the statuses a run is judged to (kit.status); the short names kept for the engine and report
OK, OOM, VOID, FAILED = RunStatus.OK, RunStatus.OUT_OF_MEMORY, RunStatus.VOID, RunStatus.FAILED

# §5: "every line leaves the moment it is written". A step line that arrives within BURST_GAP_S
# of the step line before it, though the program's own clock says at least MIN_OWN_GAP_S passed
# between the two, waited in a buffer: a block-buffered stdout (stdio on a pipe) lets lines out
# a few kilobytes at a time, and the stamps then measure the bursts, not the steps. An honest
# line is held back only when the reader itself was late, which is rare; a run whose window has
# at least BURST_SHARE of its step lines in bursts is void.
BURST_GAP_S = 1e-4
MIN_OWN_GAP_S = 1e-3
BURST_SHARE = 0.5
WATCHED_LINES = 10  # a run is stopped for bursts in its first lines once this many are seen
BUFFERED = "its output is buffered"  # how the reason of a run void for bursts begins
BUFFERED_FIX = (
    "make its stdout line-buffered: `stdbuf -oL`, `python -u`, or the program's own switch, "
    "e.g. `+mica stdout=line -mica`"
)


class OutputError(ValueError):
    """The program's output breaks its side's grammar; the message says how."""


class StepLine(NamedTuple):  # a tuple: thousands of runs' lines are parsed in one report
    step: int
    loss: float
    time_ms: float | None  # the program's own reading, never the step time
    stamp_ns: int


@dataclass(frozen=True)
class Outcome:
    """A run judged from its logs and exit code."""

    status: RunStatus
    step_s: float | None  # §5: (stamp of step hi - stamp of step lo) / (hi - lo); None unless ok
    own_step_s: float | None  # the program's own reading over the same window, recorded beside
    reason: str  # why void, failed or out of memory; empty when ok
    final_loss: float | None = None
    last_step: int | None = None
    window_start_ns: int | None = None  # the stamps of the window's two lines
    window_end_ns: int | None = None


def step_lines(lines: list[StampedLine], grammar: Grammar, where: str) -> list[StepLine]:
    """The step lines of a side's stdout, checked: in order, with numbers for losses."""
    line_rx = _compiled(grammar.line_regex)
    prefix_rx = _compiled(grammar.step_prefix)
    has_time = "time_ms" in line_rx.groupindex
    out: list[StepLine] = []
    for number, line in enumerate(lines, 1):
        m = line_rx.search(line.text)
        if not m:
            if prefix_rx.search(line.text):
                raise OutputError(
                    f"{where}:{number}: a step line that breaks the grammar "
                    f"{grammar.line_regex!r}: {line.text[:120]!r}"
                )
            continue
        step = int(m["step"])
        try:
            loss = float(m["loss"])
        except ValueError:
            raise OutputError(
                f"{where}:{number}: the loss {m['loss']!r} at step {step} is not a number"
            ) from None
        try:
            time_ms = float(m["time_ms"]) if has_time else None
        except ValueError:
            # the grammar's character class admits `-` or `e` alone; they are no reading
            raise OutputError(
                f"{where}:{number}: the time {m['time_ms']!r} at step {step} is not a number"
            ) from None
        if out and step <= out[-1].step:
            raise OutputError(
                f"{where}:{number}: step {step} comes after step {out[-1].step}: "
                "step numbers must rise"
            )
        out.append(StepLine(step, loss, time_ms, line.stamp_ns))
    return out


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _matches_oom(lines: list[StampedLine], patterns: list[str]) -> str | None:
    """The first line that matches the side's out-of-memory grammar (regular expressions)."""
    compiled = [re.compile(p) for p in patterns]
    for line in lines:
        if any(rx.search(line.text) for rx in compiled):
            return line.text.strip()
    return None


def signal_name(exit_code: int) -> str:
    """`SIGSEGV (11)` for a death by signal (a negative exit code, as subprocess gives it)."""
    try:
        return f"{signal.Signals(-exit_code).name} ({-exit_code})"
    except ValueError:
        return f"signal {-exit_code}"


def exit_outcome(
    out: list[StampedLine],
    err: list[StampedLine],
    exit_code: int | None,
    grammar: Grammar,
    stopped: str | None = None,
) -> Outcome | None:
    """How a run that did not exit 0 ended (failed, or out of memory); None for an exit 0."""
    if stopped:
        # the kit stopped it: a stall, or past the whole-run limit (kit.engine.limits)
        return Outcome(FAILED, None, None, stopped)
    if exit_code is None:
        return Outcome(FAILED, None, None, "the run did not finish")
    if exit_code < 0:
        # a death by signal is never out of memory, whatever was printed before it: only a
        # program that said so and then exited with a status ran out (D4, amendment 8)
        return Outcome(FAILED, None, None, f"killed by {signal_name(exit_code)}")
    if exit_code != 0:
        # D4 / amendment 8: out of memory is a line of the side's grammar, then an exit status
        oom_line = _matches_oom(out + err, grammar.oom_patterns)
        if oom_line:
            return Outcome(OOM, None, None, oom_line[:200])
        return Outcome(FAILED, None, None, f"exit code {exit_code}")
    return None


def judge(
    stdout_log: Path | str,
    stderr_log: Path | str,
    exit_code: int | None,
    grammar: Grammar,
    timing: Timing,
    stopped: str | None = None,
    read: Callable[[Path | str], bytes] | None = None,
) -> Outcome:
    """The outcome of one run, from its raw stamped logs and exit code alone.

    A negative exit code is a death by that signal; `stopped` is why the kit stopped the run
    (a stall or the whole-run limit), recorded with the run. `read`: how a log's bytes are
    had, by default from its file (kit.measure.stamped).
    """
    out = list(read_stamped(stdout_log, read))
    if stopped and is_buffered(stopped):
        # stopped at its first lines (`watch_first_lines`): judged again from the whole log
        return Outcome(VOID, None, None, buffered_output(out, grammar, stopped=True) or stopped)
    # stderr matters only to an exit with a status (its out-of-memory line, D4)
    needs_err = not stopped and exit_code is not None and exit_code > 0
    err = list(read_stamped(stderr_log, read)) if needs_err else []
    ended = exit_outcome(out, err, exit_code, grammar, stopped)
    if ended is not None:
        return ended
    if not out:
        return Outcome(FAILED, None, None, "the program printed nothing on stdout")
    try:
        steps = step_lines(out, grammar, os.path.basename(stdout_log))
    except OutputError as e:
        return Outcome(FAILED, None, None, str(e))
    return _window_outcome(steps, grammar, timing)


def _window_outcome(steps: list[StepLine], grammar: Grammar, timing: Timing) -> Outcome:
    """§5: a run that ended well, judged over its window: the step time by the outside clock,
    void where its output came in bursts or its own clock disagrees."""
    by_step = {s.step: s for s in steps}
    lo, hi = timing.window
    missing = [n for n in (lo, hi) if n not in by_step]
    if missing:
        return Outcome(
            FAILED,
            None,
            None,
            f"no line for step {missing[0]} (the window is steps {lo} to {hi}; "
            f"the last step line was {steps[-1].step if steps else 'none'})",
        )
    a, b = by_step[lo], by_step[hi]
    step_s = (b.stamp_ns - a.stamp_ns) / 1e9 / (hi - lo)  # §5: the outside clock
    final = steps[-1]
    common: dict[str, Any] = dict(  # the fields every outcome from here shares
        final_loss=final.loss,
        last_step=final.step,
        window_start_ns=a.stamp_ns,
        window_end_ns=b.stamp_ns,
    )
    broken = _past_last_step(steps, timing) or _not_finite_loss(steps, lo, hi)
    if broken:
        return Outcome(FAILED, None, None, broken, **{**common, "final_loss": None})
    own = _own_step_s(steps, lo, hi, grammar)
    held = buffered(steps, lo, hi, grammar)
    if held:  # the stamps measured the bursts: they are no step time
        return Outcome(VOID, None, own, held, **common)
    backwards = _own_clock_backwards(steps, lo, hi, grammar)
    if backwards:
        return Outcome(VOID, step_s, None, backwards, **common)
    if grammar.own_clock_compared:
        # §5 cross-check: the program's own reading within the tolerance, or the run is void
        if own is None:
            return Outcome(VOID, step_s, None, _no_own_time(steps, lo, hi, grammar), **common)
        rel = abs(own - step_s) / step_s if step_s > 0 else math.inf
        if rel > timing.cross_check_tolerance:
            return Outcome(
                VOID,
                step_s,
                own,
                f"own clock {own * 1e3:.4f} ms/step against the outside clock's "
                f"{step_s * 1e3:.4f} ms/step: {rel:.2%} apart, more than "
                f"{timing.cross_check_tolerance:.0%}",
                **common,
            )
    return Outcome(OK, step_s, own, "", **common)


def _past_last_step(steps: list[StepLine], t: Timing) -> str:
    """A run trains the steps it is asked (D4: `--steps {steps}`); a step line past the
    protocol's last step means another run than the one measured: the run fails."""
    if steps[-1].step <= t.steps:
        return ""
    past = next(s for s in steps if s.step > t.steps)
    return (
        f"a step line for step {past.step}, past the protocol's last step {t.steps} "
        f"(timing.steps; the last step line was {steps[-1].step}): a run trains the steps it "
        "is given"
    )


def _not_finite_loss(steps: list[StepLine], lo: int, hi: int) -> str:
    """A loss that is not a finite number in the window, or on the last line: training that
    diverged is no run to time, whatever it printed after."""
    for s in steps:
        if (lo <= s.step <= hi or s is steps[-1]) and not math.isfinite(s.loss):
            return f"the loss at step {s.step} is {s.loss}"
    return ""


def _own_clock_backwards(steps: list[StepLine], lo: int, hi: int, grammar: Grammar) -> str:
    """§5: a contender's own clock moves forward at every step line of the window (a
    cumulative clock rises, a per-step time is above zero); one that does not is no clock,
    and the run is void with the step named. nanoGPT's reading is never compared."""
    if not grammar.own_clock_compared:
        return ""
    window = [(s.step, s.time_ms) for s in steps if lo <= s.step <= hi and s.time_ms is not None]
    if grammar.own_clock == "cumulative":
        for (_, before), (step, now) in zip(window, window[1:]):
            if not (math.isfinite(now) and now > before):
                how = "stands still" if now == before else "goes backwards"
                return (
                    f"its own clock {how} at step {step}: {now:g} ms since its start, "
                    f"after {before:g} ms at the line before; §5 needs a clock that rises"
                )
        return ""
    for step, ms in window:
        if step > lo and not (math.isfinite(ms) and ms > 0):
            return f"its own clock reads {ms:g} ms for step {step}: a step takes time (§5)"
    return ""


def _own_step_s(steps: list[StepLine], lo: int, hi: int, grammar: Grammar) -> float | None:
    by_step = {s.step: s for s in steps}
    if grammar.own_clock == "cumulative":
        a, b = by_step[lo].time_ms, by_step[hi].time_ms
        return None if a is None or b is None else (b - a) / 1e3 / (hi - lo)
    times = [s.time_ms for s in steps if lo < s.step <= hi and s.time_ms is not None]
    if not grammar.own_clock_compared:
        # nanoGPT: each line carries its last step's time; recorded, never compared (§5)
        return float(statistics.median(times)) / 1e3 if times else None
    # a contender's per-step clock reads the window as the sum of its steps' times (§5), so
    # every step of the window needs its time
    if len(times) != hi - lo:
        return None
    return math.fsum(times) / 1e3 / (hi - lo)


def _no_own_time(steps: list[StepLine], lo: int, hi: int, grammar: Grammar) -> str:
    """Why a contender's run has no reading of its own to cross-check (§5)."""
    if grammar.own_clock == "cumulative":
        return "no own time on the window's lines"
    timed = sum(1 for s in steps if lo < s.step <= hi and s.time_ms is not None)
    return (
        f"its own clock is per step, so §5's cross-check needs a time on every step from "
        f"{lo + 1} to {hi}: {timed} of {hi - lo} have one (print a line with its time at "
        'every step, or declare own_clock = "cumulative" and print the time since the start)'
    )


def bursts(steps: list[StepLine], grammar: Grammar) -> tuple[int, int]:
    """How many of these step lines (after the first) arrived in a burst, and of how many.

    A burst: the line came within BURST_GAP_S of the step line before it, while the program's
    own clock says at least MIN_OWN_GAP_S passed between them: a cumulative clock by the
    difference of the two readings, a per-step clock by the later line's step alone (its step
    ran after the earlier line was written). A program without a reading of its own is never
    said to burst: nothing says how long its steps took (a contender without one is void by
    §5's cross-check all the same). A pure function of the stamped lines, so `verify` finds
    the same bursts as the run did.
    """
    gap_ns, min_own_ms = BURST_GAP_S * 1e9, MIN_OWN_GAP_S * 1e3
    held = 0
    for a, b in zip(steps, steps[1:]):
        if b.time_ms is None:
            continue
        if grammar.own_clock == "cumulative":
            if a.time_ms is None:
                continue
            own_ms = b.time_ms - a.time_ms
        else:
            own_ms = b.time_ms
        if own_ms >= min_own_ms and b.stamp_ns - a.stamp_ns < gap_ns:
            held += 1
    return held, max(len(steps) - 1, 0)


def buffered(steps: list[StepLine], lo: int, hi: int, grammar: Grammar) -> str:
    """Why the window's step lines cannot be stamped as written (§5's clock), or ""."""
    window = [s for s in steps if lo <= s.step <= hi]
    held, told = bursts(window, grammar)
    if not told or held < BURST_SHARE * told:
        return ""
    return buffered_reason(held, told)


def buffered_output(
    lines: list[StampedLine], grammar: Grammar, *, least: int = 1, stopped: bool = False
) -> str:
    """Why a program's stdout, whole, cannot be stamped as written (§5's clock), or "": its
    step lines, wherever they are (a program asked its version that trains instead, a run
    stopped at its first lines), at least `least` of them after the first. Output that breaks
    the grammar says nothing here: judging it says why."""
    try:
        steps = step_lines(lines, grammar, "stdout")
    except OutputError:
        return ""
    held, told = bursts(steps, grammar)
    if told < least or held < BURST_SHARE * told:
        return ""
    return buffered_reason(held, told, stopped)


def watch_first_lines(grammar: Grammar) -> Callable[[bytes], str | None]:
    """A run's watch (kit.executors.base.Limits): its first lines, stamped so far, that
    already arrived in bursts stop it, so a series ends during its first discarded run rather
    than after it. Never before WATCHED_LINES step lines: one late read is no burst."""

    def watch(data: bytes) -> str | None:
        try:
            lines = list(read_stamped("stdout.log", lambda _: data))
        except ValueError:
            return None  # a line that is not stamped: judging the run says why
        return buffered_output(lines, grammar, least=WATCHED_LINES) or None

    return watch


def buffered_reason(held: int, told: int, stopped: bool = False) -> str:
    before = " before the kit stopped it" if stopped else ""
    return (
        f"{BUFFERED}: {held} of {told} step lines arrived in bursts{before} (within "
        f"{BURST_GAP_S * 1e3:g} ms of the line before, though its own clock says "
        f"{MIN_OWN_GAP_S * 1e3:g} ms or more passed); §5 needs every line to leave when "
        f"written; fix: {BUFFERED_FIX}"
    )


def is_buffered(reason: str) -> bool:
    """A judgement's reason that says the run's output was buffered (`buffered`)."""
    return reason.startswith(BUFFERED)


def losses(stdout_log: Path, grammar: Grammar) -> list[StepLine]:
    """The loss curve of a run (for plots and correctness), from its stamped stdout."""
    return step_lines(list(read_stamped(stdout_log)), grammar, stdout_log.name)

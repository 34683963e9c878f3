import pytest

from kit.report.states import ConfigState, State
from kit.report.verdict import (
    FASTER,
    LEVEL,
    SLOWER,
    between,
    by_times,
    fastest_complete,
    fastest_mode,
    ranges_overlap,
)

P = [10.0, 10.1, 10.2, 10.3, 10.4]  # median 10.2, range 10.0-10.4


def test_faster_when_no_mica_run_was_as_slow_as_pytorchs_fastest():
    assert by_times([9.0, 9.1, 9.2, 9.3, 9.99], P, 0.05) == FASTER


def test_not_faster_when_mica_slowest_equals_pytorch_fastest():
    # max(M) < min(P) is strict: a tie is not "faster"
    assert by_times([9.0, 9.1, 9.2, 9.3, 10.0], P, 0.05) == LEVEL


def test_level_by_the_margin():
    m = [10.6, 10.65, 10.71, 10.72, 10.8]  # median 10.71 = 1.05 x 10.2 exactly
    assert by_times(m, P, 0.05) == LEVEL


def test_slower_just_past_the_margin():
    m = [10.6, 10.65, 10.72, 10.73, 10.8]  # median 10.72 > 10.71
    assert by_times(m, P, 0.05) == SLOWER


def test_level_by_overlapping_ranges_for_a_lead_beyond_the_margin():
    # amendment 1: Mica's median far below PyTorch's, ranges overlap: level, never faster
    p = [9.0, 20.0, 20.0, 20.0, 30.0]
    m = [5.0, 6.0, 6.0, 6.0, 9.5]
    assert ranges_overlap(m, p)
    assert by_times(m, p, 0.05) == LEVEL


def test_deficit_reads_slower():
    assert by_times([20.0] * 5, P, 0.05) == SLOWER


def test_fastest_mode_is_lowest_median_among_modes_that_ran():
    assert fastest_mode({"eager": [3, 3, 3], "default": [2, 9, 1], "max-autotune": []}) == "default"
    assert fastest_mode({"eager": []}) is None


def test_needs_times():
    with pytest.raises(ValueError):
        by_times([], P, 0.05)


# -- only complete configurations have a time (amendments 5.2 and 8.2) -------------------------


def _state(state: State, step_s=(), ok: int = 5) -> ConfigState:
    return ConfigState("c", state, "" if state is State.COMPLETE else "why", 5, ok, tuple(step_s))


def test_fastest_mode_is_chosen_among_complete_modes_only():
    modes = {
        "default": _state(State.COMPLETE, P),
        # its runs before it ran out were the fastest: it has no time all the same
        "max-autotune": _state(State.OUT_OF_MEMORY, (), ok=2),
        "reduce-overhead": _state(State.VOID, (), ok=4),
        "eager": _state(State.INCOMPLETE, (), ok=3),
    }
    assert fastest_complete(modes) == "default"
    assert fastest_complete({"max-autotune": modes["max-autotune"]}) is None


def test_a_verdict_only_between_complete_configurations():
    mica = _state(State.COMPLETE, [9.0, 9.1, 9.2, 9.3, 9.4])
    assert between(mica, _state(State.COMPLETE, P), 0.05) == FASTER
    for state in (State.OUT_OF_MEMORY, State.VOID, State.FAILED, State.INCOMPLETE):
        with pytest.raises(ValueError, match="D1 compares complete configurations"):
            between(_state(state, (), ok=1), _state(State.COMPLETE, P), 0.05)
        with pytest.raises(ValueError, match="PyTorch's is"):
            between(mica, _state(state, (), ok=1), 0.05)

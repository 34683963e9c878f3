"""The verdicts of D1 (§10, amendment 1): faster, level, slower, or no verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from kit.report.states import ConfigState

FASTER, LEVEL, SLOWER = "faster", "level", "slower"
NO_VERDICT = "no verdict"
# every verdict a comparison can carry (summary.json's enum, kit/files/summary.schema.json)
VERDICTS = (FASTER, LEVEL, SLOWER, NO_VERDICT)
# step times in seconds, as the tables hold them (numpy arrays) or as a list
Times = Sequence[float] | npt.NDArray[np.floating]


def ranges_overlap(a: Times, b: Times) -> bool:
    return max(min(a), min(b)) <= min(max(a), max(b))


def by_times(mica_s: Times, pytorch_s: Times, margin: float) -> str:
    """D1 applied to two sets of step times (Mica's, and PyTorch's fastest mode's).

    faster: max(M) < min(P), no run of Mica's was as slow as PyTorch's fastest run;
    level:  not faster, and median(M) <= (1 + margin) x median(P), or median(M) < median(P)
            with overlapping ranges (amendment 1: a lead whose ranges overlap is level);
    slower: median(M) > (1 + margin) x median(P).
    """
    if not len(mica_s) or not len(pytorch_s):
        raise ValueError("both sides need step times")
    if max(mica_s) < min(pytorch_s):
        return FASTER
    m, p = float(np.median(mica_s)), float(np.median(pytorch_s))
    # the edge itself is level; binary rounding of (1 + margin) x p is forgiven (1e-12 relative)
    within_margin = m - (1 + margin) * p <= 1e-12 * p
    if within_margin or (m < p and ranges_overlap(mica_s, pytorch_s)):
        return LEVEL
    return SLOWER


def fastest_mode(times_by_mode: Mapping[str, Times]) -> str | None:
    """PyTorch's fastest mode: the lowest median among the modes that ran (amendment 5.3)."""
    ran = {mode: float(np.median(t)) for mode, t in times_by_mode.items() if len(t)}
    return min(ran, key=lambda mode: (ran[mode], mode)) if ran else None


def fastest_complete(modes: Mapping[str, ConfigState]) -> str | None:
    """PyTorch's fastest mode among its complete modes alone (amendments 5.3 and 8.2): a mode
    out of memory, void, failed or incomplete has no time, whatever its other runs read."""
    return fastest_mode({mode: s.step_s for mode, s in modes.items() if s.has_time})


def between(mica: ConfigState, pytorch: ConfigState, margin: float) -> str:
    """D1's verdict between two complete configurations; any other state has no time."""
    for side, s in (("Mica", mica), ("PyTorch", pytorch)):
        if not s.has_time:
            raise ValueError(f"D1 compares complete configurations; {side}'s is {s.shown}")
    return by_times(mica.step_s, pytorch.step_s, margin)

"""How long a running build still needs, from earlier builds of the same target and settings.

Earlier builds with the same ETA key (same variant or command, same jobs and settings) recorded
their progress fraction once a second. At fraction f now, an earlier build still needed its
duration minus the time it reached f; the median over the latest few is the estimate. Without
earlier builds, the time so far is extrapolated from the fraction, once there is enough of it.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.progress import Progress
from workbench.supervision.history import EarlierRun

# Extrapolating from the first per cent of a build is noise: configure steps, then fast files.
_MIN_FRACTION = 0.05
_MIN_ELAPSED_S = 10.0
# A run this short that never showed work in progress had nothing to do ("ninja: no work to
# do", everything in the Nix store): it says nothing about how long building takes.
NO_OP_S = 5.0


def did_work(run: EarlierRun) -> bool:
    """Whether an earlier run built something: it took longer than a no-op could, or its
    progress was seen below complete."""
    if run.duration_s >= NO_OP_S:
        return True
    return any(fraction < 1.0 for _, fraction in run.curve) and run.duration_s >= 1.0


@dataclass(frozen=True)
class Eta:
    """Seconds left and what the figure rests on."""

    remaining_s: float
    basis: str


def progress_fraction(progress: Progress) -> float | None:
    """How much of the build is done, 0.0-1.0, when the log says; None when it does not."""
    if progress.nix and progress.planned > 0:
        inner = sum(d.step.fraction for d in progress.derivations if d.step is not None)
        return min(1.0, (progress.done + inner) / progress.planned)
    if progress.step is not None and progress.step.total > 0:
        return progress.step.fraction
    return None


def _time_at(curve: Sequence[tuple[float, float]], fraction: float) -> float | None:
    """When an earlier build reached `fraction` (linear between samples), None if never."""
    fractions = [f for _, f in curve]
    index = bisect.bisect_left(fractions, fraction)
    if index >= len(curve):
        return None
    t1, f1 = curve[index]
    if index == 0 or f1 <= fraction:
        return t1
    t0, f0 = curve[index - 1]
    return t0 + (t1 - t0) * (fraction - f0) / (f1 - f0) if f1 > f0 else t1


def estimate(elapsed_s: float, fraction: float | None, earlier: Sequence[EarlierRun]) -> Eta | None:
    """The ETA now, or None when nothing supports one (no-op runs do not count)."""
    earlier = [run for run in earlier if did_work(run)]
    if earlier:
        left: list[float] = []
        for run in earlier:
            reached = None
            if fraction is not None and run.curve:
                reached = _time_at(run.curve, fraction)
            left.append(max(0.0, run.duration_s - (reached if reached is not None else elapsed_s)))
        ids = ", ".join(f"#{run.build_id}" for run in earlier)
        how = "at this progress" if fraction is not None else "by elapsed time"
        return Eta(statistics.median(left), f"earlier builds {ids} ({how})")
    if fraction is not None and fraction >= _MIN_FRACTION and elapsed_s >= _MIN_ELAPSED_S:
        return Eta(elapsed_s * (1.0 - fraction) / fraction, "extrapolated from progress so far")
    return None

"""An ended build's three graphs (CPU, memory, edges) on one grid of time.

Live, each graph takes the 1 Hz samples as they come, placed one after another from the first.
Ended, that drifted from the build's clock: the samples start a moment after the build (its
first sample), the supervisor's last one comes at the exit, less than a second after the one
before, and each was drawn a whole second wide; the exact edges from `.ninja_log` were put on
seconds ending at the build's end. The CPU and memory graphs spanned a second or so more than
the edges graph beside them. Here every series is put on the same intervals, so that all three
span the build's start to its end and their time axes agree.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workbench.history.records import Sampled, cpu_measured

# One value a second up to this many, else one value per as many seconds as keep the series
# this long (a day-long build: 2 s each).
EXACT_VALUES = 65536


@dataclass(frozen=True)
class Grid:
    """`count` intervals of `interval_s` seconds, the last ending at `end_t`: the build's end;
    the first begins at `start_t` (the build's start) or less than an interval before it."""

    start_t: float
    end_t: float
    interval_s: float
    count: int

    @property
    def origin(self) -> float:
        """Where the first interval begins (epoch seconds)."""
        return self.end_t - self.count * self.interval_s

    @property
    def first_t(self) -> float:
        """Where the first interval ends: the time of the series' first value."""
        return self.origin + self.interval_s

    def index(self, t: float) -> int:
        """The interval that holds `t`: interval k is (origin + k·interval, origin + (k+1)·
        interval], as a sample at t measured the second before it; clamped to the grid."""
        return min(self.count - 1, max(0, math.ceil((t - self.origin) / self.interval_s) - 1))


def grid(start_t: float, end_t: float, most: int = EXACT_VALUES) -> Grid:
    """Whole seconds (or as many as keep it to `most` intervals) from `start_t` to `end_t`."""
    interval = float(max(1, math.ceil((end_t - start_t) / most)))
    count = max(1, math.ceil((end_t - start_t) / interval))
    return Grid(start_t, end_t, interval, count)


@dataclass(frozen=True)
class Timeline:
    """An ended build's graphs: one value per interval of `grid` each (NaN where no sample
    was taken), the edges exact from `.ninja_log` where it has them, else sampled."""

    grid: Grid
    cpu: tuple[float, ...]
    memory: tuple[float, ...]
    memory_scale: float | None  # the last sample's RSS plus what was still available
    edges: tuple[float, ...]
    exact: bool

    @property
    def frame(self) -> tuple[float, float]:
        """What each graph spans, left edge to right: the build's start to its end."""
        return self.grid.start_t, self.grid.end_t


def per_interval(
    samples: Sequence[Sampled],
    on: Grid,
    value: Callable[[Sampled], float],
    peak: bool,
) -> tuple[float, ...]:
    """One value per interval of `on`: the highest (`peak`) or the mean of the samples taken
    in it. An interval between two samples that none fell in (a late sample) holds the last
    value, as the live graph fills a missed sample; one before the first sample or after the
    last is NaN: nothing was measured then."""
    sums = [0.0] * on.count
    highest = [-math.inf] * on.count
    taken = [0] * on.count
    for sample in samples:
        k = on.index(sample.t)
        v = float(value(sample))
        sums[k] += v
        highest[k] = max(highest[k], v)
        taken[k] += 1
    values = [math.nan] * on.count
    held = math.nan
    filled = [k for k in range(on.count) if taken[k]]
    if not filled:
        return tuple(values)
    for k in range(filled[0], filled[-1] + 1):
        if taken[k]:
            held = highest[k] if peak else sums[k] / taken[k]
        values[k] = held
    return tuple(values)


def ended_timeline(
    started: float | None,
    ended: float | None,
    samples: Sequence[Sampled],
    spans: Sequence[tuple[float, float]],
    most: int = EXACT_VALUES,
) -> Timeline | None:
    """The build's graphs from its start to its end (widened to hold an edge or a sample
    outside them); None where nothing says when it ran."""
    from workbench.analysis.schedule import running_per_interval

    starts = [t for t in [started, *(start for start, _ in spans)] if t is not None]
    ends = [t for t in [ended, *(end for _, end in spans)] if t is not None]
    if samples:
        if not starts:
            starts.append(samples[0].t)
        ends.append(samples[-1].t)
    if not starts or not ends:
        return None
    on = grid(min(starts), max(max(ends), min(starts)), most)
    if spans:
        edges = tuple(running_per_interval(spans, on.origin, on.interval_s, on.count))
    else:
        edges = per_interval(
            samples, on, lambda s: float((s.compile_jobs or 0) + (s.link_jobs or 0)), peak=False
        )
    last = samples[-1] if samples else None
    # Only the samples that measured CPU (`cpu_measured`): the exit sample's 0% would pull the
    # last interval's mean down ("last 23%" for a job at 48%), the sampler's first reading's
    # the first. Their RSS is a measurement (the exit sample's, nothing left, counts in no
    # peak).
    cpu_samples = [s for s, known in zip(samples, cpu_measured(samples), strict=True) if known]
    return Timeline(
        on,
        per_interval(cpu_samples, on, lambda s: s.cpu_percent, peak=False),
        per_interval(samples, on, lambda s: float(s.rss), peak=True),
        None if last is None else float(last.rss + last.memory_available),
        edges,
        exact=bool(spans),
    )

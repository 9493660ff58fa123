"""An ETA that learns from exact edges: earlier runs of the same work, and this run's own pace.

Earlier runs that built the same tree and targets (`work_key`) left every edge's exact time.
Each edge's time in a run is its weight: a heavy CUDA unit counts for minutes, a light C++ one
for a second. At any moment the running build has finished some edges; in each earlier run the
same share of the work (weighted, not counted: -j1 and -j8 finish edges in different orders)
was done at some time t_ref, and that run still needed `duration - t_ref`. How long this build
took to reach the same share, against t_ref, is its pace: when this host is twice as loaded, or
runs half the jobs, the ratio says 2 and the rest of the build takes twice as long too.

Full and incremental builds are different animals: 8 edges left of a 2000-edge build and 8
edges left of a 10-edge rebuild of one file are unrelated. ninja says how many edges it will
run (`[f/total]`); a run is full when that is close to the most edges any run of this work
built, and an estimate only ever rests on earlier runs of its own kind.

Everything here is plain data in, numbers out: the references are built once at build start
(`reference_run`), and `EdgePace` takes the build's new edges as they come (O(new edges) per
tick), so the per-second estimate never scans stored edges.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

FULL = "full"
INCREMENTAL = "incremental"
# A run whose edge count is at least this share of the most edges any run of the same work
# built is a full build (CMake's re-run, a generated header or two may differ between them).
FULL_SHARE = 0.8
# Incremental references must be of a similar size: a 3-edge and a 300-edge rebuild differ.
INCREMENTAL_RATIO = 4.0
MAX_REFERENCES = 5
# An edge's weight never falls below this (ninja's log has millisecond times; `phony`-like
# edges take 0 ms): a run's weights must sum to more than nothing.
MIN_WEIGHT_S = 0.001
# The own pace gets full trust once this share of the work is done; before, it is blended
# with the earlier runs' plain remaining time (the first edges' order is noise).
PACE_TRUSTED_AT = 0.25
# Relative half-width of the range shown: at least this, widening towards the build's start.
BAND_FLOOR = 0.1
BAND_EARLY = 0.4
# Extrapolating from the first edges of a build is noise.
MIN_EXTRAPOLATION_SHARE = 0.05
MIN_EXTRAPOLATION_S = 10.0


@dataclass(frozen=True)
class ReferenceRun:
    """An earlier run of the same work: its duration and every edge's exact time."""

    build_id: int
    duration_s: float
    weights: dict[str, float]
    """Seconds per edge, by its first output."""
    ends: tuple[float, ...]
    """Seconds from the run's start at which each edge ended, in order; starts with 0.0."""
    done_share: tuple[float, ...]
    """Share of the run's total weight finished at each of `ends` (0.0 first, 1.0 last)."""
    total_weight: float
    median_weight: float

    @property
    def edge_count(self) -> int:
        return len(self.weights)

    def time_at(self, share: float) -> float:
        """When this run had finished `share` of its work (linear between edge ends)."""
        share = min(1.0, max(0.0, share))
        index = bisect.bisect_left(self.done_share, share)
        if index >= len(self.ends):
            return self.ends[-1]
        if index == 0:
            return self.ends[0]
        s0, s1 = self.done_share[index - 1], self.done_share[index]
        t0, t1 = self.ends[index - 1], self.ends[index]
        return t0 + (t1 - t0) * (share - s0) / (s1 - s0) if s1 > s0 else t1


def reference_run(
    build_id: int,
    started: float,
    duration_s: float,
    edges: Iterable[tuple[str, float, float]],
) -> ReferenceRun | None:
    """A reference from a run's stored edges (output, epoch start, epoch end); None when the
    run ran no edge (a no-op says nothing about how long building takes)."""
    weights: dict[str, float] = {}
    timed: list[tuple[float, float]] = []
    for output, edge_started, edge_ended in edges:
        weight = max(MIN_WEIGHT_S, edge_ended - edge_started)
        # The same output built twice in one run (a CMake re-run): the later one counts.
        weights[output] = weight
        timed.append((max(0.0, edge_ended - started), weight))
    if not timed or duration_s <= 0:
        return None
    timed.sort()
    total = sum(weight for _, weight in timed)
    ends = [0.0]
    shares = [0.0]
    finished = 0.0
    for end, weight in timed:
        finished += weight
        ends.append(min(end, duration_s))
        shares.append(finished / total)
    shares[-1] = 1.0
    return ReferenceRun(
        build_id,
        duration_s,
        weights,
        tuple(ends),
        tuple(shares),
        total,
        statistics.median(weights.values()),
    )


def kind_of(edge_total: int, references: Sequence[ReferenceRun]) -> str | None:
    """Whether a run of `edge_total` edges is a full or an incremental build of this work,
    judged against the most edges any earlier run built; None without earlier runs."""
    most = max((reference.edge_count for reference in references), default=0)
    if most == 0 or edge_total <= 0:
        return None
    return FULL if edge_total >= FULL_SHARE * most else INCREMENTAL


def matching(edge_total: int, references: Sequence[ReferenceRun]) -> list[ReferenceRun]:
    """The earlier runs an estimate of a run of `edge_total` edges may rest on: its own kind
    only; incremental ones of a similar size, nearest first."""
    kind = kind_of(edge_total, references)
    if kind is None:
        return []
    most = max(reference.edge_count for reference in references)
    full = [r for r in references if r.edge_count >= FULL_SHARE * most]
    if kind == FULL:
        return full[:MAX_REFERENCES]
    rebuilt = [
        r
        for r in references
        if r.edge_count < FULL_SHARE * most
        and max(r.edge_count, edge_total) / max(1, min(r.edge_count, edge_total))
        <= INCREMENTAL_RATIO
    ]
    rebuilt.sort(key=lambda r: abs(math.log(r.edge_count / edge_total)))
    return rebuilt[:MAX_REFERENCES]


@dataclass(frozen=True)
class Estimate:
    """Seconds left, the range it is likely in, and what it rests on."""

    remaining_s: float
    low_s: float
    high_s: float
    basis: str
    pace: float | None = None
    """This build's time against the earlier runs' to the same share of work (2.0: slower
    by half); None when no earlier run of its kind was there to compare with."""
    kind: str | None = None


def band(share: float) -> float:
    """Relative half-width of the range at `share` of the work done."""
    return BAND_FLOOR + BAND_EARLY * (1.0 - min(1.0, max(0.0, share)))


@dataclass
class _Progress:
    """What the running build finished so far, against one reference."""

    known_weight: float = 0.0
    known_count: int = 0


@dataclass
class EdgePace:
    """The running build's finished edges against the references of its work.

    `add` takes the edges as ninja's log yields them; `estimate` is O(references)."""

    references: list[ReferenceRun]
    finished: dict[str, float] = field(default_factory=dict)
    last_end_s: float | None = None
    """When the latest edge finished, seconds from the build's start."""
    _against: dict[int, _Progress] = field(default_factory=dict)
    _chosen: tuple[int, list[ReferenceRun]] | None = None

    def add(self, edges: Iterable[tuple[str, float, float]]) -> None:
        """Edges that finished (output, seconds, end in seconds from the build's start)."""
        for output, seconds, end_s in edges:
            if self.last_end_s is None or end_s > self.last_end_s:
                self.last_end_s = end_s
            if output in self.finished:
                self.finished[output] = seconds
                continue  # rebuilt in the same run: already counted against the references
            self.finished[output] = seconds
            for reference in self.references:
                weight = reference.weights.get(output)
                if weight is not None:
                    counted = self._against.setdefault(reference.build_id, _Progress())
                    counted.known_weight += weight
                    counted.known_count += 1

    def _references_for(self, edge_total: int) -> list[ReferenceRun]:
        if self._chosen is None or self._chosen[0] != edge_total:
            self._chosen = (edge_total, matching(edge_total, self.references))
        return self._chosen[1]

    def kind(self, edge_total: int) -> str | None:
        return kind_of(edge_total, self.references)

    def share_done(self, reference: ReferenceRun, edge_total: int, edges_done: int) -> float:
        """The share of this build's work finished, weighted by `reference`'s edge times."""
        counted = self._against.get(reference.build_id, _Progress())
        done = max(edges_done, len(self.finished))
        unknown = max(0, done - counted.known_count)
        done_weight = counted.known_weight + unknown * reference.median_weight
        # The edges still to run: how many ninja says, each weighing what the reference's edges
        # this build has not run yet weigh on average (all of them exactly, in a full build).
        left_in_reference = reference.edge_count - counted.known_count
        left_weight = reference.total_weight - counted.known_weight
        mean_left = (
            left_weight / left_in_reference if left_in_reference > 0 else reference.median_weight
        )
        left = max(0, edge_total - done) * max(MIN_WEIGHT_S, mean_left)
        return done_weight / (done_weight + left) if done_weight + left > 0 else 0.0

    def estimate(self, elapsed_s: float, edge_total: int, edges_done: int) -> Estimate | None:
        """The ETA at `elapsed_s` into the build, with ninja at `edges_done`/`edge_total`."""
        if edge_total <= 0:
            return None
        references = self._references_for(edge_total)
        kind = self.kind(edge_total)
        if not references:
            return extrapolate(elapsed_s, edge_total, edges_done, kind)
        # Shares of work are compared where this build finished its latest edge: between two
        # ends the time spent on edges still running is counted down, not taken as slowness.
        # Before any edge finished, the time since the start is all counted down.
        anchor = 0.0
        if self.last_end_s is not None:
            anchor = min(elapsed_s, max(0.0, self.last_end_s))
        since = elapsed_s - anchor
        estimates: list[float] = []
        paces: list[float] = []
        shares: list[float] = []
        for reference in references:
            share = self.share_done(reference, edge_total, edges_done)
            reached = reference.time_at(share)
            left = max(0.0, reference.duration_s - reached)
            trust = min(1.0, share / PACE_TRUSTED_AT)
            if reached > 0 and share > 0 and anchor > 0:
                pace = anchor / reached
                paces.append(pace)
                estimates.append(max(0.0, (1.0 - trust) * left + trust * left * pace - since))
            else:
                estimates.append(max(0.0, left - since))
            shares.append(share)
        share = statistics.median(shares)
        remaining = statistics.median(estimates)
        width = band(share)
        low = min(estimates) * (1.0 - width)
        high = max(estimates) * (1.0 + width)
        pace = statistics.median(paces) if paces else None
        ids = ", ".join(f"#{r.build_id}" for r in references)
        how = f"earlier {kind} builds {ids} of this tree"
        if pace is not None and abs(pace - 1.0) >= 0.1 and share >= 0.02:
            how += f", this run {pace:.1f}× their time"
        return Estimate(remaining, low, high, how, pace, kind)


def extrapolate(
    elapsed_s: float, edge_total: int, edges_done: int, kind: str | None = None
) -> Estimate | None:
    """The time so far stretched over the edges left, when no earlier run of this kind exists."""
    share = edges_done / edge_total if edge_total > 0 else 0.0
    if share < MIN_EXTRAPOLATION_SHARE or elapsed_s < MIN_EXTRAPOLATION_S or share >= 1.0:
        return None
    remaining = elapsed_s * (1.0 - share) / share
    # Counting edges ignores their weights: wider than an estimate from earlier runs.
    width = 2 * band(share)
    how = "extrapolated from this run's edges so far"
    if kind is not None:
        how += f" (no earlier {kind} build of this tree)"
    return Estimate(remaining, remaining * max(0.0, 1.0 - width), remaining * (1.0 + width), how)

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
import functools
import heapq
import math
import statistics
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from workbench.analysis.edges import COMPILE, CUDA, source_of
from workbench.analysis.edges import kind_of as edge_kind

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
# The own pace is weighed by the share of the work done (full trust once this share is done);
# before, it is blended with the earlier runs' plain remaining time: the first edges' order is
# noise, and on a shared host the load that slowed them comes and goes (the recorded rebuilds,
# benchmarks/eta_accuracy.py --recordings, "pace_trust": full trust at a quarter of the work
# overshot where the load eased).
PACE_TRUSTED_AT = 1.0
# ... unless the finished edges themselves say the ratio is real: a slower host (or one that is
# faster) makes every edge slower by about the same factor, where a passing load spreads them.
# The evidence is the mean of the edges' log(time here / time in the newest earlier run that
# built them) over the spread of those logs (a 3x slower host: log 3 = 1.1 over a spread of
# 0.05-0.3). Beyond `PACE_EVIDENCE` spreads the pace is trusted, fully one spread further.
# Chosen on the six earlier VM recordings' rebuilds from 2, 2.5, 3 and 4 (the best there: 8.9%
# against 9.3% for the others and for none; benchmarks/eta_accuracy.py --recordings,
# "pace_trust"), the later VM and H100 ones held out. In the recorded same-host rebuilds the
# evidence reached at most 2.3 (partly trusted, once), but in one that ran 3x faster than its
# first build, every edge alike (re2 on the VM: 7-8).
PACE_EVIDENCE = 2.0
# Fewer edges than this say nothing of their spread; edges shorter than `RATIO_MIN_S` in
# either run are ninja's bookkeeping and process start-up, not the host's speed.
PACE_EVIDENCE_EDGES = 3
RATIO_MIN_S = 0.05
# Relative half-width of the range shown: at least this, widening towards the build's start.
BAND_FLOOR = 0.1
BAND_EARLY = 0.4
# Extrapolating from the first edges of a build is noise.
MIN_EXTRAPOLATION_SHARE = 0.05
MIN_EXTRAPOLATION_S = 10.0
# A first build costed edge by edge (`extrapolate_by_kind`) needs only a second of it: the share
# of edges done is its floor, and the edges running count. Ten seconds, as for counting edges
# alone, left the 25% checkpoint of a 30 s json-c build without an ETA, and every checkpoint of
# a small tree built on a 16-core host (all of it in a few seconds): no ETA counts as a miss.
MIN_FIRST_BUILD_S = 1.0


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
    by_kind: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Outputs per kind of edge (compile, link, ...), in the order they ended."""

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

    def next_end_after(self, share: float) -> float:
        """When this run finished its next edge after having done `share` of its work."""
        index = bisect.bisect_right(self.done_share, share)
        return self.ends[index] if index < len(self.ends) else self.duration_s


def reference_run(
    build_id: int,
    started: float,
    duration_s: float,
    edges: Iterable[tuple[str, float, float]],
) -> ReferenceRun | None:
    """A reference from a run's stored edges (output, epoch start, epoch end); None when the
    run ran no edge (a no-op says nothing about how long building takes)."""
    weights: dict[str, float] = {}
    timed: list[tuple[float, float, str]] = []
    for output, edge_started, edge_ended in edges:
        weight = max(MIN_WEIGHT_S, edge_ended - edge_started)
        # The same output built twice in one run (a CMake re-run): the later one counts.
        weights[output] = weight
        timed.append((max(0.0, edge_ended - started), weight, output))
    if not timed or duration_s <= 0:
        return None
    timed.sort()
    total = sum(weight for _, weight, _ in timed)
    ends = [0.0]
    shares = [0.0]
    finished = 0.0
    by_kind: dict[str, list[str]] = {}
    for end, weight, output in timed:
        finished += weight
        ends.append(min(end, duration_s))
        shares.append(finished / total)
        by_kind.setdefault(edge_kind(output), []).append(output)
    shares[-1] = 1.0
    return ReferenceRun(
        build_id,
        duration_s,
        weights,
        tuple(ends),
        tuple(shares),
        total,
        statistics.median(weights.values()),
        {kind: tuple(outputs) for kind, outputs in by_kind.items()},
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
    """This build's time against the earlier runs' to the same share of work (2.0: twice
    theirs); None when no earlier run of its kind was there to compare with."""
    kind: str | None = None


def band(share: float) -> float:
    """Relative half-width of the range at `share` of the work done."""
    return BAND_FLOOR + BAND_EARLY * (1.0 - min(1.0, max(0.0, share)))


@dataclass
class _Against:
    """What the running build finished, against one reference: each finished edge stands for
    one of the reference's, the same output where it has it, else one of the same kind (an
    incremental build that rebuilt b.cc against one that rebuilt a.cc)."""

    unmatched: dict[str, deque[str]]
    matched: set[str] = field(default_factory=set)
    matched_weight: float = 0.0
    """The reference's weights of the edges that stand for this build's finished ones."""
    extra: int = 0
    extra_weight: float = 0.0
    """Finished edges with no counterpart in the reference, by their weights elsewhere."""

    def add(self, reference: ReferenceRun, output: str, known: float | None) -> None:
        counterpart: str | None = None
        if output in reference.weights and output not in self.matched:
            counterpart = output
        else:
            waiting = self.unmatched.get(edge_kind(output))
            while waiting and waiting[0] in self.matched:
                waiting.popleft()
            counterpart = waiting.popleft() if waiting else None
        if counterpart is None:
            self.extra += 1
            self.extra_weight += known if known is not None else reference.median_weight
            return
        self.matched.add(counterpart)
        self.matched_weight += reference.weights[counterpart]


@dataclass
class EdgePace:
    """The running build's finished edges against the references of its work.

    `add` takes the edges as ninja's log yields them (O(references) each); `estimate` is
    O(references)."""

    references: list[ReferenceRun]
    finished: dict[str, float] = field(default_factory=dict)
    last_end_s: float | None = None
    """When the latest edge finished, seconds from the build's start."""
    _against: dict[int, _Against] = field(default_factory=dict)
    _known: dict[str, float] = field(default_factory=dict)
    _chosen: tuple[int, list[ReferenceRun]] | None = None
    _ratios: int = 0
    _ratio_sum: float = 0.0
    _ratio_squares: float = 0.0
    """Count, sum and sum of squares of log(seconds here / seconds in the newest earlier run
    that built it) of the finished edges (`RATIO_MIN_S` or longer in both): one log an edge,
    whatever the number of references."""

    def __post_init__(self) -> None:
        for reference in self.references:
            self._against[reference.build_id] = _Against(
                {kind: deque(outputs) for kind, outputs in reference.by_kind.items()}
            )
            # An edge's time is the same whatever kind of run built it: the newest run's.
            for output, weight in reference.weights.items():
                self._known.setdefault(output, weight)

    def add(self, edges: Iterable[tuple[str, float, float]]) -> None:
        """Edges that finished (output, seconds, end in seconds from the build's start)."""
        for output, seconds, end_s in edges:
            if self.last_end_s is None or end_s > self.last_end_s:
                self.last_end_s = end_s
            if output in self.finished:
                self.finished[output] = seconds
                continue  # rebuilt in the same run: already counted against the references
            self.finished[output] = seconds
            known = self._known.get(output)
            if known is not None and known >= RATIO_MIN_S and seconds >= RATIO_MIN_S:
                ratio = math.log(seconds / known)
                self._ratios += 1
                self._ratio_sum += ratio
                self._ratio_squares += ratio * ratio
            for reference in self.references:
                self._against[reference.build_id].add(reference, output, known)

    def evidence(self) -> float:
        """How far the finished edges' own times say this run's pace really differs from the
        earlier runs': their mean log ratio over its spread (see `PACE_EVIDENCE`); 0.0 with
        fewer than `PACE_EVIDENCE_EDGES`."""
        count = self._ratios
        if count < PACE_EVIDENCE_EDGES:
            return 0.0
        mean = self._ratio_sum / count
        variance = max(0.0, (self._ratio_squares - count * mean * mean) / (count - 1))
        # A floor: edges that all took the same time (sleeps) do not make the evidence endless.
        return abs(mean) / max(math.sqrt(variance), 0.05)

    def _references_for(self, edge_total: int) -> list[ReferenceRun]:
        if self._chosen is None or self._chosen[0] != edge_total:
            self._chosen = (edge_total, matching(edge_total, self.references))
        return self._chosen[1]

    def kind(self, edge_total: int) -> str | None:
        """Full or incremental, for a run of `edge_total` edges (see `kind_of`)."""
        return kind_of(edge_total, self.references)

    def share_done(self, reference: ReferenceRun, edge_total: int, edges_done: int) -> float:
        """The share of this build's work finished, in `reference`'s edge times."""
        against = self._against[reference.build_id]
        done = max(edges_done, len(self.finished))
        seen = len(against.matched) + against.extra
        # Finished by ninja's count, not yet in its log: of a typical weight.
        done_weight = (
            against.matched_weight
            + against.extra_weight
            + max(0, done - seen) * reference.median_weight
        )
        # The edges still to run: how many ninja says, each weighing what the reference's edges
        # nothing stood for yet weigh on average (in a full build: exactly those edges).
        left_in_reference = reference.edge_count - len(against.matched)
        left_weight = reference.total_weight - against.matched_weight
        mean_left = (
            left_weight / left_in_reference if left_in_reference > 0 else reference.median_weight
        )
        left = max(0, edge_total - done) * max(MIN_WEIGHT_S, mean_left)
        return done_weight / (done_weight + left) if done_weight + left > 0 else 0.0

    def estimate(
        self,
        elapsed_s: float,
        edge_total: int,
        edges_done: int,
        running: Mapping[str, float] | None = None,
    ) -> Estimate | None:
        """The ETA at `elapsed_s` into the build, with ninja at `edges_done`/`edge_total`.
        `running` (output → seconds it has run: what the sampler sees building now): an edge
        runs on one core, so the time left is never less than what is left of a running edge,
        its time in the earlier run at this build's pace against it, less its age."""
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
        spans: list[float] = []
        evidence = self.evidence()
        for reference in references:
            share = self.share_done(reference, edge_total, edges_done)
            reached = reference.time_at(share)
            left = max(0.0, reference.duration_s - reached)
            trust = min(1.0, max(share / PACE_TRUSTED_AT, evidence - PACE_EVIDENCE))
            stretch = 1.0
            this_pace = None
            if reached > 0 and share > 0 and anchor > 0:
                this_pace = anchor / reached
                paces.append(this_pace)
                stretch = 1.0 - trust + trust * this_pace
            # Whatever runs now, no further edge has finished: at least what the earlier run
            # did after its next edge is left. Without this floor the ETA would count down to
            # zero and stay there while a slow edge runs.
            after_next = reference.duration_s - reference.next_end_after(share)
            longest_running = max(
                (
                    reference.weights[output] * stretch - age
                    for output, age in (running or {}).items()
                    if output in reference.weights and output not in self.finished
                ),
                default=0.0,
            )
            estimates.append(
                max(0.0, left * stretch - since, after_next * stretch, longest_running)
            )
            if this_pace is not None:
                # The range spans the pace trusted not at all and wholly: the earlier run's pace
                # comes back, or this run's so far lasts (a load that came mid-build stays).
                # Replayed rebuilds (benchmarks/eta_accuracy.py --recordings): 83% -> 90%
                # inside, the range 1.14x as wide (its high over its low, median).
                for bound in (1.0, this_pace):
                    spans.append(max(0.0, left * bound - since, after_next * bound))
            shares.append(share)
        share = statistics.median(shares)
        remaining = statistics.median(estimates)
        width = band(share)
        low = min(estimates + spans) * (1.0 - width)
        high = max(estimates + spans) * (1.0 + width)
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


# A first build's range: nothing earlier says how the rest compares with what is done, so the
# range is wide and says why ("first build: no history"). Calibrated on recorded first builds of
# three third-party trees (benchmarks/eta_accuracy.py --recordings).
FIRST_LOW = 0.35
FIRST_HIGH = 2.2
# A first build costed from another tree of the same sources (`from_other_tree`): narrower, the
# edges' own times are known. On the recordings' 156 pairings (benchmarks/eta_accuracy.py
# --recordings, "other_tree_prior"; chosen on them, not held out) 0.35-2.2 held the truth at
# 99% of checkpoints, 0.6-1.7 at 95% (the H100 host's own pairings: 95%), 0.7-1.5 at 84%.
OTHER_LOW = 0.6
OTHER_HIGH = 1.7


def planned_kinds(outputs_and_rules: Iterable[tuple[str, str | None]]) -> dict[str, int]:
    """Edges per kind ("compile", "link", ...) of a ninja graph's non-phony edges."""
    counts: dict[str, int] = {}
    for output, rule in outputs_and_rules:
        if rule == "phony":
            continue
        kind = edge_kind(output, rule) if rule is not None else edge_kind(output)
        counts[kind] = counts.get(kind, 0) + 1
    return counts


@functools.lru_cache(maxsize=1 << 17)
def _kind(output: str) -> str:
    """edge_kind by output, remembered: a first build's ETA asks it of every edge each tick."""
    return edge_kind(output)


@functools.lru_cache(maxsize=1 << 17)
def same_source(output: str) -> str | None:
    """What makes two compile edges of one tree cost alike: the same source file built into
    another target (CMake builds a library's sources once for its static and once for its
    shared form, a test tree compiles its test-main.cc and util.cc into every test): the
    source's last two path parts (`CMakeFiles/t.dir/__/src/os.cc.o` and
    `CMakeFiles/u.dir/src/os.cc.o` are both `src/os.cc`); None for what is no compile."""
    if _kind(output) not in (COMPILE, CUDA):
        return None
    source = source_of(output)
    if source is None:
        return None
    return "/".join(source.split("/")[-2:])


@functools.lru_cache(maxsize=1 << 17)
def part_of(output: str) -> str:
    """The part of the tree an edge belongs to: the directory of its CMake target
    (`test/CMakeFiles/format-test.dir/format-test.cc.o` → `test`, `programs/CMakeFiles/...` →
    `programs`), else its output's directory (`bin/format-test` → `bin`; `libfmt.a` → "").
    A tree's test units are alike, and unlike its library's; its programs' units likewise."""
    marker = output.find("CMakeFiles/")
    if marker >= 0:
        return output[:marker].rstrip("/")
    return output.rsplit("/", 1)[0] if "/" in output else ""


# What is left of an edge that has run `age` seconds and whose cost is not known: at least
# this share of its age again (what has run long tends to run long: the rest of a heavy-tailed
# duration grows with its age). No fit: the half is the order of the rule, not a measured value.
RUNNING_REST = 0.5


def _mean(sums: tuple[int, float] | None, extra: list[float] | None = None) -> float | None:
    count, total = sums if sums is not None else (0, 0.0)
    if not count:
        return None
    if extra:
        return (total + sum(extra)) / (count + len(extra))
    return total / count


@dataclass
class EdgeCosts:
    """What each edge of a first build's ninja graph still costs, kept up to date edge by edge.

    An edge left costs what this build's edges like it took: the same source compiled for
    another target (`same_source`), else the mean of its kind in its part of the tree
    (`part_of`: a tree's test units cost like its other test units, not like its library's),
    else the mean of its kind anywhere, else a typical (the median) edge of this build (a kind
    not seen yet, a custom command or the first link, is no heavy compile).

    The edges running count as what they are: observations of their kind cut short. An edge of
    unknown cost that has run `age` seconds is expected to take at least `(1 + RUNNING_REST) ×
    age` in all; that is one more value of its kind's mean, as a finished edge is. A mean of the
    finished edges alone is the mean of those short enough to have finished: fmt's test units
    that ran for minutes were not in it while the quick ones were (-50% at 25% of its first
    build).

    Kept as sums so that a finished edge costs O(1) and the work left is O(parts × kinds +
    edges running), not a pass over a 10,000-edge graph every second."""

    planned: dict[str, tuple[str | None, str, tuple[str, str]]] = field(default_factory=dict)
    """Planned output → (its source key, its kind, its group: (part of the tree, kind))."""
    finished: dict[str, float] = field(default_factory=dict)
    left: int = 0
    """Planned edges not finished."""
    _outputs_of: dict[str, list[str]] = field(default_factory=dict)
    _by_name: dict[str, str] = field(default_factory=dict)
    _source_left: dict[str, int] = field(default_factory=dict)
    _source_done: dict[str, tuple[int, float]] = field(default_factory=dict)
    _kind_done: dict[str, tuple[int, float]] = field(default_factory=dict)
    _group_done: dict[tuple[str, str], tuple[int, float]] = field(default_factory=dict)
    _all_done: list[float] = field(default_factory=list)
    """Every finished edge's seconds, sorted (the median of this build's edges)."""
    _unknown_left: dict[tuple[str, str], int] = field(default_factory=dict)
    """Planned edges left whose source nothing finished yet (or with no source), by group."""
    _known_work: float = 0.0
    """Σ over sources with a finished edge: its edges left × its mean."""

    @classmethod
    def of(cls, planned_outputs: Iterable[str]) -> EdgeCosts:
        costs = cls()
        for output in planned_outputs:
            if output in costs.planned:
                continue
            key, kind = same_source(output), _kind(output)
            group = (part_of(output), kind)
            costs.planned[output] = (key, kind, group)
            costs.left += 1
            costs._unknown_left[group] = costs._unknown_left.get(group, 0) + 1
            if key is not None:
                costs._outputs_of.setdefault(key, []).append(output)
                costs._source_left[key] = costs._source_left.get(key, 0) + 1
            else:
                costs._by_name.setdefault(output.rsplit("/", 1)[-1], output)
        return costs

    def add(self, output: str, seconds: float) -> None:
        """An edge that finished (the first time it finished counts)."""
        if output in self.finished:
            return
        self.finished[output] = seconds
        kind = _kind(output)
        group = (part_of(output), kind)
        count, total = self._kind_done.get(kind, (0, 0.0))
        self._kind_done[kind] = (count + 1, total + seconds)
        count, total = self._group_done.get(group, (0, 0.0))
        self._group_done[group] = (count + 1, total + seconds)
        bisect.insort(self._all_done, seconds)
        plan = self.planned.get(output)
        if plan is not None:
            self.left -= 1
        key = same_source(output)
        if key is None:
            if plan is not None:
                self._unknown_left[plan[2]] -= 1
            return
        before = self._source_left.get(key, 0)
        after = before - (plan is not None)
        done, spent = self._source_done.get(key, (0, 0.0))
        if done:
            self._known_work -= before * spent / done
        else:
            # This source's edges left were costed by their group; from now on by this one.
            for other in self._outputs_of.get(key, ()):
                if other == output or other not in self.finished:
                    group_of = self.planned[other][2]
                    self._unknown_left[group_of] = self._unknown_left.get(group_of, 0) - 1
        self._source_left[key] = after
        self._source_done[key] = (done + 1, spent + seconds)
        self._known_work += after * (spent + seconds) / (done + 1)

    def _typical(self) -> float:
        """The median finished edge (0.0 before any)."""
        done = self._all_done
        if not done:
            return 0.0
        middle = len(done) // 2
        return done[middle] if len(done) % 2 else (done[middle - 1] + done[middle]) / 2

    def _means(
        self, ages: Mapping[str, float]
    ) -> tuple[dict[tuple[str, str], float | None], dict[str, float | None]]:
        """The mean of each group and kind, with the edges running of unknown cost (`ages`)
        counted at what they are expected to take (see the class docstring)."""
        group_extra: dict[tuple[str, str], list[float]] = {}
        kind_extra: dict[str, list[float]] = {}
        for output, age in ages.items():
            key, kind, group = self.planned[output]
            if key is not None and key in self._source_done:
                continue  # its cost is known: no observation of its kind
            expected = (1.0 + RUNNING_REST) * age
            seen = _mean(self._group_done.get(group))
            if seen is not None:
                group_extra.setdefault(group, []).append(max(seen, expected))
            seen = _mean(self._kind_done.get(kind))
            if seen is not None:
                kind_extra.setdefault(kind, []).append(max(seen, expected))
        groups = {
            group: _mean(self._group_done.get(group), group_extra.get(group))
            for group in {*self._unknown_left, *group_extra}
        }
        kinds = {
            kind: _mean(self._kind_done.get(kind), kind_extra.get(kind))
            for kind in {group[1] for group in groups}
        }
        return groups, kinds

    def cost(
        self,
        output: str,
        means: tuple[dict[tuple[str, str], float | None], dict[str, float | None]] | None = None,
    ) -> tuple[float, bool]:
        """What a planned edge costs and whether that is known (its source built elsewhere);
        `means`: `_means`' (the edges running counted), else the finished edges' alone."""
        plan = self.planned.get(output)
        key, group = (plan[0], plan[2]) if plan else (None, (part_of(output), _kind(output)))
        done, spent = self._source_done.get(key, (0, 0.0)) if key is not None else (0, 0.0)
        if done:
            return spent / done, True
        return self._group_cost(group, means), False

    def _group_cost(
        self,
        group: tuple[str, str],
        means: tuple[dict[tuple[str, str], float | None], dict[str, float | None]] | None,
    ) -> float:
        if means is not None:
            found = means[0].get(group)
            if found is None:
                found = means[1].get(group[1])
        else:
            found = _mean(self._group_done.get(group))
            if found is None:
                found = _mean(self._kind_done.get(group[1]))
        return found if found is not None else self._typical()

    def work_left(self, running: Mapping[str, float] | None = None) -> float:
        """Edge seconds left: every planned edge not finished at its cost; one running
        (`running`: output → seconds it ran) at its cost less its age where that is known, else
        at least `RUNNING_REST` of its age again; the running ones of unknown cost count in
        their kind's mean (see the class docstring)."""
        return self.left_of(running)[0]

    def left_of(self, running: Mapping[str, float] | None = None) -> tuple[float, float]:
        """(`work_left`, the most any one running edge still needs): an edge runs on one core,
        so the build needs at least the rest of its longest running edge, whatever the
        parallelism the rest of the work gets."""
        ages = {
            output: age
            for output, age in (running or {}).items()
            if output not in self.finished and output in self.planned
        }
        means = self._means(ages)
        work = max(0.0, self._known_work)
        for group, count in self._unknown_left.items():
            if count > 0:
                work += count * self._group_cost(group, means)
        # A source none of whose copies finished, with a copy running for `age` seconds, costs
        # at least what that copy is expected to take in all: its other copies too (zstd's
        # zstd_lazy.c, built for the static and the shared library, ran 9.4 and 10.1 s on 16
        # cores where its part's other units took 1-3 s: the copy started later was costed
        # at that mean, -67% at 25% of the build).
        running_for: dict[str, float] = {}
        for output, age in ages.items():
            key = self.planned[output][0]
            if key is not None and key not in self._source_done:
                running_for[key] = max(running_for.get(key, 0.0), age)
        longest = 0.0
        for output, age in ages.items():
            cost, known = self.cost(output, means)
            least = RUNNING_REST * age
            key = self.planned[output][0]
            if not known and key in running_for:
                least = max(least, (1.0 + RUNNING_REST) * running_for[key] - age)
            rest = max(cost - age, 0.0 if known else least)
            longest = max(longest, rest)
            work += rest - cost
        for key, age in running_for.items():
            for output in self._outputs_of.get(key, ()):
                if output not in self.finished and output not in ages:
                    cost, _known = self.cost(output, means)
                    work += max(0.0, (1.0 + RUNNING_REST) * age - cost)
        return max(0.0, work), longest

    def match_running(self, running: Iterable[tuple[str, str, float]]) -> dict[str, float]:
        """The planned edges the sampler sees running ((what, kind, seconds): a compiler's
        source file, a linker's output, `progress.live_view.RunningEdge`), by output →
        seconds: a compile by its source (`same_source`: the first unfinished edge of it, the
        copies of one source cost alike), a link by its output's name."""
        found: dict[str, float] = {}
        for what, kind, seconds in running:
            parts = what.replace("\\", "/").split("/")
            matched: str | None = None
            if kind in (COMPILE, CUDA, "compiler"):
                for output in self._outputs_of.get("/".join(parts[-2:]), ()):
                    if output not in self.finished and output not in found:
                        matched = output
                        break
            else:
                matched = self._by_name.get(parts[-1])
                if matched in self.finished:
                    matched = None
            if matched is not None:
                found[matched] = max(found.get(matched, 0.0), seconds)
        return found


def match_running(
    planned_outputs: Sequence[str],
    finished: Mapping[str, float],
    running: Iterable[tuple[str, str, float]],
) -> dict[str, float]:
    """`EdgeCosts.match_running` from plain values."""
    costs = EdgeCosts.of(planned_outputs)
    for output, seconds in finished.items():
        costs.add(output, seconds)
    return costs.match_running(running)


def extrapolate_by_kind(
    elapsed_s: float,
    edge_total: int,
    finished: dict[str, float],
    planned: dict[str, int] | None,
    last_end_s: float | None = None,
    planned_outputs: Sequence[str] | None = None,
    running: Mapping[str, float] | None = None,
    costs: EdgeCosts | None = None,
) -> Estimate | None:
    """A first build's ETA from its own finished edges: each edge still to run at what this
    build's edges like it took, over the parallelism it kept so far (edge time per wall second).
    Like it: the same source compiled for another target (`same_source`, when the build's
    ninja graph named the edges left: `planned_outputs`), else its kind in its part of the tree,
    else its kind, else a typical edge (`EdgeCosts`); without the outputs, the mean of its kind
    (from the graph, `planned`: edges per kind, e.g. {"compile": 51, "link": 26}). Without
    either every edge left counts at the mean of all. None before enough of the build is done
    to say anything: 5% of its edges and a second (`MIN_FIRST_BUILD_S`).

    `running` (output → seconds it has run, `match_running`: what the sampler sees compiling
    now): an edge running is partly done. Where its cost is known (its source built for another
    target) what is left of it is that cost less its age; where it is not, an edge that ran a
    while is likely a long one, and at least half its age again is left (what has run long
    tends to run long: the rest of a heavy-tailed duration grows with its age), and it counts
    in its kind's mean. The parallelism is then the edge time done, running edges' included,
    per second so far; the time left is the work left at that parallelism, never less than the
    rest of the longest edge running (one edge runs on one core).
    Without `running` (nothing sampled) the pace is kept to the latest edge's end and the time
    since is counted down. `costs`: the same graph's `EdgeCosts`, kept edge by edge (the live
    ETA's, instead of `planned_outputs`; it has seen `finished`)."""
    done = len(finished)
    share = done / edge_total if edge_total > 0 else 0.0
    if share < MIN_EXTRAPOLATION_SHARE or elapsed_s < MIN_FIRST_BUILD_S or share >= 1.0:
        return None
    busy = sum(finished.values())
    if busy <= 0:
        return None
    # The pace kept up to the latest edge's end; the time since is spent on edges still
    # running, counted down from what is left.
    anchor = elapsed_s if last_end_s is None else min(elapsed_s, max(last_end_s, 1e-3))
    parallel = max(busy / anchor, 1e-3)
    overall = busy / done
    left_s = 0.0
    left = max(0, edge_total - done)
    if costs is None and planned_outputs:
        costs = EdgeCosts.of(planned_outputs)
        for output, seconds in finished.items():
            costs.add(output, seconds)
    to_run = costs is not None and costs.left > 0
    ages: dict[str, float] = {}
    longest_running = 0.0
    if costs is not None and to_run:
        ages = {
            output: age
            for output, age in (running or {}).items()
            if output not in costs.finished and output in costs.planned
        }
        # ninja runs what the graph holds less what is up to date: as many as it says are left.
        work, longest_running = costs.left_of(ages)
        left_s = work * left / costs.left
    elif planned:
        by_kind: dict[str, list[float]] = {}
        for output, seconds in finished.items():
            by_kind.setdefault(_kind(output), []).append(seconds)
        scale = edge_total / max(1, sum(planned.values()))
        counted = 0
        for kind, count in planned.items():
            remaining = max(0, round(count * scale) - len(by_kind.get(kind, ())))
            remaining = min(remaining, left - counted)
            counted += remaining
            times = by_kind.get(kind)
            left_s += remaining * (statistics.fmean(times) if times else overall)
        left_s += max(0, left - counted) * overall
    else:
        left_s = left * overall
    if to_run and running is not None:
        parallel = max((busy + sum(ages.values())) / max(elapsed_s, 1e-3), 1e-3)
        # The work left at the parallelism kept, but never less than the rest of the longest
        # edge running: one edge does not spread over the cores the others leave idle.
        remaining_s = max(left_s / parallel, longest_running)
    else:
        from_anchor = left_s / parallel
        remaining_s = max(0.1 * from_anchor, from_anchor - (elapsed_s - anchor))
    how = "extrapolated from this run's edges so far"
    if to_run:
        how += ", by source and kind of edge"
    elif planned:
        how += ", by kind of edge"
    return Estimate(remaining_s, remaining_s * FIRST_LOW, remaining_s * FIRST_HIGH, how)


# -- another tree of the same sources --------------------------------------------------------

# Another tree stands for this one when it built at least this share of this build's edges (by
# `tree_key`): another build directory of the same checkout, another variant's, the same
# project at another release. Below it, too much of the build is unknown to it.
OTHER_TREE_COVERS = 0.8
# Another tree's runs read at most, newest first, for the one that covers this build.
OTHER_TREE_CANDIDATES = 10


@functools.lru_cache(maxsize=1 << 17)
def tree_key(output: str) -> str:
    """What an edge is whatever tree built it: a compile by its source (`same_source`: the
    source's last two path parts, as CMake names the object after it), anything else by its
    output's file name (`bin/format-test`, `libzstd.a`)."""
    return same_source(output) or output.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class OtherTree:
    """What each edge took in another tree of the same sources: the newest full run of one in
    the history, this tree's own runs before workbench watched it (its `.ninja_log`), or
    another build directory's beside it (its `.ninja_log`)."""

    build_id: int | None
    """The other tree's run in the history; None: a `.ninja_log` (`log`)."""
    seconds: dict[str, float]
    """Seconds by `tree_key` (the mean where one key was built several times)."""
    covers: float
    """The share of this build's planned edges it built."""
    log: str | None = None
    """The `.ninja_log` whose entries the times are (`build_id` None): each output's latest."""
    own: bool = False
    """`log` is this tree's own, as it was before this build."""

    def basis(self) -> str:
        """What the ETA learned from, in words."""
        share = f"{self.covers:.0%} of these edges"
        if self.build_id is not None:
            return (
                f"first build of this tree: each edge at its time in build #{self.build_id} "
                f"(another tree of the same sources, {share})"
            )
        if self.own:
            return (
                "first run of this tree under workbench: each edge at its time in its earlier "
                f"ninja runs (its .ninja_log before this build, {share})"
            )
        return (
            "first build of this tree: each edge at its time in another build directory's "
            f"ninja runs ({self.log}, {share})"
        )


def _covering(
    planned: set[str], edges: Iterable[tuple[str, float]]
) -> tuple[dict[str, float], float]:
    """Edges' mean seconds by `tree_key`, and the share of `planned` (tree keys) among them."""
    sums: dict[str, tuple[int, float]] = {}
    for output, seconds in edges:
        key = tree_key(output)
        count, total = sums.get(key, (0, 0.0))
        sums[key] = (count + 1, total + max(0.0, seconds))
    covers = sum(1 for key in planned if key in sums) / len(planned) if planned else 0.0
    return {key: total / count for key, (count, total) in sums.items()}, covers


def other_tree(
    planned_outputs: Sequence[str],
    candidates: Iterable[tuple[int | str, Iterable[tuple[str, float]]]],
    own: bool = False,
) -> OtherTree | None:
    """The first of `candidates` ((a history's build id, or a `.ninja_log`'s path; its edges:
    (first output, seconds)), best first) that built at least `OTHER_TREE_COVERS` of
    `planned_outputs` by `tree_key`; None when none did. `own`: the logs are this tree's own
    from before the build."""
    planned = {tree_key(output) for output in planned_outputs}
    if not planned:
        return None
    # A tree key's last part is its output's file name, less the object suffix for a compile
    # (`tree_key`, `source_of`): a candidate holding too few of these names cannot cover the
    # build, and is passed over without working out its edges' tree keys (most of the cost
    # where no other tree covers: 10 trees of 12,000 edges, benchmarks/eta_accuracy.py "cost").
    names = [key.rsplit("/", 1)[-1] for key in planned]
    least = OTHER_TREE_COVERS * len(planned)
    for source, edges in candidates:
        edges = list(edges)
        held: set[str] = set()
        for output, _seconds in edges:
            name = output.rsplit("/", 1)[-1]
            held.add(name)
            held.add(name.removesuffix(".o").removesuffix(".obj"))
        if sum(1 for name in names if name in held) < least:
            continue
        seconds_of, covers = _covering(planned, edges)
        if covers >= OTHER_TREE_COVERS:
            if isinstance(source, str):
                return OtherTree(None, seconds_of, covers, source, own)
            return OtherTree(source, seconds_of, covers)
    return None


def own_earlier_runs(
    planned_outputs: Sequence[str], log: str, before_build: Mapping[str, float]
) -> OtherTree | None:
    """This tree's own `.ninja_log` from before the build (`log`; `before_build`: each output's
    seconds in its latest entry there), when it holds at least `OTHER_TREE_COVERS` of
    `planned_outputs`: a tree built by ninja before workbench watched it (a clean rebuild, or
    the first build under workbench of a tree built by hand) has each edge's time there."""
    return other_tree(planned_outputs, [(log, before_build.items())], own=True)


def schedule_left(
    waits: Mapping[str, Sequence[str]] | None,
    running: Mapping[str, float],
    to_start: Mapping[str, float],
    jobs: int,
) -> float:
    """Seconds until the last edge ends, ninja's way: the edges running (output → seconds still
    to run) hold their jobs; an edge not started (`to_start`: output → its seconds, in the order
    ninja picks them) starts once every edge it waits for (`waits`; None: none) that is running
    or not started has ended, and a job is free. O(edges log edges)."""
    pending: dict[str, int] = {}
    dependents: dict[str, list[str]] = {}
    for output in to_start:
        count = 0
        for before in (waits or {}).get(output, ()):
            if before in to_start or before in running:
                dependents.setdefault(before, []).append(output)
                count += 1
        pending[output] = count
    order = {output: index for index, output in enumerate(to_start)}
    # In ninja's order already: a sorted list is a heap.
    ready = [(order[o], o) for o, count in pending.items() if count == 0]
    ends = [(rest, output) for output, rest in running.items()]
    heapq.heapify(ends)
    jobs = max(1, jobs)
    now = 0.0
    while ready and len(ends) < jobs:
        _, output = heapq.heappop(ready)
        heapq.heappush(ends, (to_start[output], output))
    while ends:
        now, output = ends[0]
        for after in dependents.get(output, ()):
            pending[after] -= 1
            if pending[after] == 0:
                heapq.heappush(ready, (order[after], after))
        if ready and len(ends) <= jobs:
            # The job the edge ending now held goes to the next edge ready: one heap operation.
            _, start = heapq.heappop(ready)
            heapq.heapreplace(ends, (now + to_start[start], start))
            while ready and len(ends) < jobs:
                _, start = heapq.heappop(ready)
                heapq.heappush(ends, (now + to_start[start], start))
        else:
            heapq.heappop(ends)
    return now


# How far an edge's time here strays from its time in the other tree, in log units, once its
# pace is taken out (`from_other_tree`): the spread of the finished edges' log ratios, within
# these bounds; this before 3 of them finished. Not fitted: the spread of the whole builds'
# edges between the H100 host's nine release pairs was 0.18-0.47 (median 0.23;
# benchmarks/data/eta_runs/h100-*-after-earlier-release.json against their earlier release).
OTHER_SPREAD = 0.25
OTHER_SPREAD_LEAST = 0.1
OTHER_SPREAD_MOST = 1.0


def rest_beyond(mean: float, spread: float, age: float) -> float:
    """E[T - age | T > age] for a log-normal T of this mean and log spread (`spread` > 0):
    what is left of an edge expected to take `mean` seconds once it has run `age`: about
    `mean - age` while `age` is well short of `mean`; past it, less and less but never
    nothing."""
    if mean <= 0.0:
        return 0.0
    if age <= 0.0:
        return mean
    mu = math.log(mean) - spread * spread / 2.0
    z = (math.log(age) - mu) / spread
    if z > 8.0:
        # Far in the tail the log's overshoot beyond log(age) is about exponential with rate
        # z / spread (the normal's tail), whose exp has the mean rate / (rate - 1).
        return age * spread / (z - spread)

    def upper(x: float) -> float:
        return 0.5 * math.erfc(x / math.sqrt(2.0))

    beyond = mean * upper(z - spread) / upper(z)
    return max(0.0, beyond - age)


def from_other_tree(
    costs: EdgeCosts,
    other: OtherTree,
    jobs: int,
    running: Mapping[str, float] | None = None,
    waits: Mapping[str, Sequence[str]] | None = None,
) -> Estimate | None:
    """A first build of its tree, when another tree of the same sources was built before
    (`other`): each edge left at its time there times this build's pace against it (its
    finished edges' seconds over theirs there: a slower host, another compiler flag), an edge
    whose source finished here at that, one the other tree did not build as `EdgeCosts` costs
    it; of a running one (`running`: output → its age) what is left beyond its age
    (`rest_beyond`: one past its time is not about to end); scheduled on `jobs` jobs with the
    graph's dependencies (`waits`: output → the edges it waits for), as ninja
    runs them: the other tree's -j does not matter, only what each edge costs. None before an
    edge the other tree built has finished here."""
    finished = costs.finished
    here = there = 0.0
    logs: list[float] = []
    for output, seconds in finished.items():
        seen = other.seconds.get(tree_key(output))
        if seen is not None:
            here += seconds
            there += seen
            if seconds >= RATIO_MIN_S and seen >= RATIO_MIN_S:
                logs.append(math.log(seconds / seen))
    if here <= 0 or there <= 0 or jobs <= 0:
        return None
    pace = here / there
    spread = OTHER_SPREAD
    if len(logs) >= PACE_EVIDENCE_EDGES:
        spread = min(OTHER_SPREAD_MOST, max(OTHER_SPREAD_LEAST, statistics.stdev(logs)))
    ages = {
        output: age
        for output, age in (running or {}).items()
        if output in costs.planned and output not in finished
    }
    means = costs._means(ages)
    by_group: dict[tuple[str, str], float] = {}

    def cost(output: str) -> tuple[float, bool]:
        """`EdgeCosts.cost` where this tree has no time of its own: the other tree's; and
        whether the time is known (here or there)."""
        key, _kind, group = costs.planned[output]
        done = costs._source_done.get(key) if key is not None else None
        if done:
            return done[1] / done[0], True
        seen = other.seconds.get(tree_key(output))
        if seen is not None:
            return seen * pace, True
        found = by_group.get(group)
        if found is None:
            found = by_group[group] = costs._group_cost(group, means)
        return found, False

    def rest(output: str, age: float) -> float:
        """What is left of an edge that has run `age` seconds: of one whose time is known here
        or there, what a log-normal of that mean and this build's `spread` leaves beyond `age`
        (an edge past its time is not about to end: the files changed, the host is busier);
        of one whose time is not, at least `RUNNING_REST` of its age again (`EdgeCosts`)."""
        seconds, known = cost(output)
        if known:
            return rest_beyond(seconds, spread, age)
        return max(seconds - age, RUNNING_REST * age)

    rests = {output: rest(output, age) for output, age in ages.items()}
    if waits is None:
        order: Iterable[str] = costs.planned
    else:
        order = [o for o in waits if o in costs.planned]
        order += [o for o in costs.planned if o not in waits]
    to_start = {o: cost(o)[0] for o in order if o not in finished and o not in rests}
    remaining = schedule_left(waits, rests, to_start, jobs)
    how = other.basis()
    if abs(pace - 1.0) >= 0.1:
        how += f", this run {pace:.1f}× its time"
    return Estimate(remaining, remaining * OTHER_LOW, remaining * OTHER_HIGH, how, pace)

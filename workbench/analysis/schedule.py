"""How a build used its jobs: the critical path, parallelism over time, and where time went.

From exact edges (`edges.Edge`) and what each waited for (`graph.BuildGraph`):

- the critical path: the chain of executed edges, each waiting for the one before, with the
  largest total duration; no number of jobs makes the build faster than it;
- parallelism over time: how many edges ran at each moment (exact, a step function), and its
  mean per bucket for a graph;
- job slots left idle (jobs × wall time − edge time), split into
  - too few jobs: moments when an edge was ready (everything it waits for done) but had not
    started, because every slot was busy;
  - the tail: from the last moment every slot was busy (or an edge waited) to the end, when
    fewer edges ran than there were slots: one slow unit and the link at the end;
  - waiting for dependencies: the rest, slots idle while nothing was ready.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from workbench.analysis.edges import Edge

# ninja starts a ready edge within a few milliseconds; a shorter wait is not a wait.
_WAIT_EPSILON_S = 0.05


@dataclass(frozen=True)
class CriticalPath:
    """The longest chain of edges and its total duration."""

    edges: tuple[Edge, ...]
    seconds: float


@dataclass(frozen=True)
class Usage:
    """How the job slots were used over the build."""

    jobs: int
    wall_s: float
    edge_s: float
    """Sum of edge durations."""
    mean_parallelism: float
    most_parallel: int
    idle_slot_s: float
    """jobs × wall − edge time (never below 0)."""
    too_few_jobs_s: float
    """Seconds during which at least one ready edge waited for a free slot."""
    waited_edge_s: float
    """Sum over edges of the time each waited once ready."""
    waiting_edges: int
    """Edges that waited for a slot once ready (those `waited_edge_s` sums over)."""
    tail_s: float
    """Seconds at the end with fewer edges running than slots and none waiting."""
    tail_idle_slot_s: float
    tail_edges: tuple[Edge, ...]
    """Edges that ran in the tail, longest first."""
    dependency_idle_slot_s: float
    """Idle slot-seconds before the tail: nothing was ready."""


def critical_path(edges: Sequence[Edge], dependencies: Mapping[str, Sequence[str]]) -> CriticalPath:
    """The chain of dependent edges with the largest total duration."""
    if not edges:
        return CriticalPath((), 0.0)
    by_name = {edge.output: edge for edge in edges}
    longest: dict[str, float] = {}
    before: dict[str, str | None] = {}
    for edge in sorted(edges, key=lambda e: (e.start_s, e.end_s)):
        best, best_name = 0.0, None
        for name in dependencies.get(edge.output, ()):
            value = longest.get(name)
            if value is not None and value > best:
                best, best_name = value, name
        longest[edge.output] = best + edge.duration_s
        before[edge.output] = best_name
    end = max(longest, key=lambda name: longest[name])
    chain: list[Edge] = []
    step: str | None = end
    while step is not None:
        chain.append(by_name[step])
        step = before[step]
    chain.reverse()
    return CriticalPath(tuple(chain), longest[end])


def steps(edges: Sequence[Edge]) -> list[tuple[float, int]]:
    """Parallelism as a step function: (time, edges running from then on), time-ordered."""
    events: dict[float, int] = {}
    for edge in edges:
        events[edge.start_s] = events.get(edge.start_s, 0) + 1
        events[edge.end_s] = events.get(edge.end_s, 0) - 1
    running = 0
    result: list[tuple[float, int]] = []
    for t in sorted(events):
        running += events[t]
        result.append((t, running))
    return result


def series(edges: Sequence[Edge], buckets: int) -> list[float]:
    """Mean edges running in each of `buckets` equal slices of the build (exact integral)."""
    if not edges or buckets < 1:
        return []
    start = min(edge.start_s for edge in edges)
    end = max(edge.end_s for edge in edges)
    width = (end - start) / buckets if end > start else 1.0
    return running_per_interval(((e.start_s, e.end_s) for e in edges), start, width, buckets)


def running_per_interval(
    spans: Iterable[tuple[float, float]], start: float, width: float, count: int
) -> list[float]:
    """Mean number of spans (edges' start and end) running in each of `count` intervals of
    `width` seconds from `start`: the exact integral of the step function, divided by `width`.

    The build screen draws it one interval a second beside the CPU graph, on the same clock
    (epoch seconds), so the intervals are anchored at a time rather than at the first edge."""
    if count < 1 or width <= 0:
        return []
    totals = [0.0] * count
    horizon = count * width
    for span_start, span_end in spans:
        a, b = span_start - start, span_end - start
        if b <= 0 or a >= horizon or b <= a:
            continue
        if a < 0:
            a = 0.0
        if b > horizon:
            b = horizon
        first, last = int(a / width), min(count - 1, int(b / width))
        if first == last:  # most edges: inside one interval
            totals[first] += b - a
            continue
        for index in range(first, last + 1):
            overlap = min(b, (index + 1) * width) - max(a, index * width)
            if overlap > 0:
                totals[index] += overlap
    return [total / width for total in totals]


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, current_start, current_end = 0.0, None, None
    for a, b in sorted(intervals):
        if current_end is None or a > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = a, b
        else:
            current_end = max(current_end, b)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total


def usage(
    edges: Sequence[Edge], dependencies: Mapping[str, Sequence[str]] | None, jobs: int | None
) -> Usage:
    """Where the job slots' time went; `jobs` None takes the most edges seen running at once."""
    if not edges:
        return Usage(jobs or 0, 0.0, 0.0, 0.0, 0, 0.0, 0.0, 0.0, 0, 0.0, 0.0, (), 0.0)
    timeline = steps(edges)
    most = max(running for _, running in timeline)
    slots = jobs if jobs and jobs > 0 else most
    start = min(edge.start_s for edge in edges)
    end = max(edge.end_s for edge in edges)
    wall = end - start
    edge_s = sum(edge.duration_s for edge in edges)
    by_name = {edge.output: edge for edge in edges}
    session_start: dict[int, float] = {}
    for edge in edges:
        session_start[edge.session] = min(
            session_start.get(edge.session, edge.start_s), edge.start_s
        )
    waits: list[tuple[float, float]] = []
    waited = 0.0
    if dependencies is not None:
        for edge in edges:
            ready = session_start[edge.session]
            for name in dependencies.get(edge.output, ()):
                dependency = by_name.get(name)
                if dependency is not None:
                    ready = max(ready, dependency.end_s)
            if edge.start_s - ready > _WAIT_EPSILON_S:
                waits.append((ready, edge.start_s))
                waited += edge.start_s - ready
    # The tail starts at the last moment all slots were busy or an edge waited for one.
    busy_until = start
    for index, (_, running) in enumerate(timeline):
        if running >= slots and index + 1 < len(timeline):
            busy_until = max(busy_until, timeline[index + 1][0])
    for _, until in waits:
        busy_until = max(busy_until, until)
    tail_start = min(busy_until, end)
    tail_edge_s = sum(
        max(0.0, min(edge.end_s, end) - max(edge.start_s, tail_start)) for edge in edges
    )
    tail_idle = max(0.0, slots * (end - tail_start) - tail_edge_s)
    idle = max(0.0, slots * wall - edge_s)
    tail_edges = sorted(
        (edge for edge in edges if edge.end_s > tail_start + _WAIT_EPSILON_S),
        key=lambda edge: -edge.duration_s,
    )
    return Usage(
        jobs=slots,
        wall_s=wall,
        edge_s=edge_s,
        mean_parallelism=edge_s / wall if wall > 0 else float(most),
        most_parallel=most,
        idle_slot_s=idle,
        too_few_jobs_s=_union_length(waits),
        waited_edge_s=waited,
        waiting_edges=len(waits),
        tail_s=end - tail_start,
        tail_idle_slot_s=tail_idle,
        tail_edges=tuple(tail_edges),
        dependency_idle_slot_s=max(0.0, idle - tail_idle),
    )

"""Everything the report says of a build's exact edges, from the rows the history stores."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from workbench.analysis import schedule
from workbench.analysis.edges import Edge

_BARS = " ▁▂▃▄▅▆▇█"


class StoredEdgeLike(Protocol):
    """An edge as stored (history.EdgeRow): epoch times, dependencies, sampled peak.

    Read-only members (properties), so that a frozen dataclass such as EdgeRow matches."""

    @property
    def outputs(self) -> tuple[str, ...]: ...

    @property
    def started(self) -> float: ...

    @property
    def ended(self) -> float: ...

    @property
    def session(self) -> int: ...

    @property
    def command_hash(self) -> str: ...

    @property
    def rule(self) -> str | None: ...

    @property
    def deps(self) -> tuple[str, ...] | None: ...

    @property
    def peak_rss(self) -> int | None: ...

    @property
    def cpu_s(self) -> float | None: ...


@dataclass(frozen=True)
class EdgeAnalysis:
    """A build's edges with times relative to its first edge, and what they tell."""

    edges: tuple[Edge, ...]
    origin: float
    """Epoch seconds of time 0 (the first edge's start)."""
    dependencies: dict[str, tuple[str, ...]] | None
    critical: schedule.CriticalPath | None
    usage: schedule.Usage
    peak_rss: dict[str, int]
    cpu_s: dict[str, float]
    """Sampled CPU seconds per edge output (a lower bound), for the edges the sampler saw."""

    def slowest(self, count: int = 10) -> list[Edge]:
        """The `count` longest edges."""
        return sorted(self.edges, key=lambda edge: -edge.duration_s)[:count]


def analyse(rows: Sequence[StoredEdgeLike], jobs: int | None) -> EdgeAnalysis | None:
    """The analysis of stored edges; None when there are none."""
    if not rows:
        return None
    origin = min(row.started for row in rows)
    edges = tuple(
        Edge(
            outputs=tuple(row.outputs),
            start_s=row.started - origin,
            end_s=row.ended - origin,
            command_hash=row.command_hash,
            session=row.session,
            rule=row.rule,
        )
        for row in rows
    )
    known = all(row.deps is not None for row in rows)
    dependencies = {row.outputs[0]: tuple(row.deps or ()) for row in rows} if known else None
    critical = schedule.critical_path(edges, dependencies) if dependencies is not None else None
    return EdgeAnalysis(
        edges=edges,
        origin=origin,
        dependencies=dependencies,
        critical=critical,
        usage=schedule.usage(edges, dependencies, jobs),
        peak_rss={row.outputs[0]: row.peak_rss for row in rows if row.peak_rss is not None},
        cpu_s={row.outputs[0]: row.cpu_s for row in rows if row.cpu_s is not None},
    )


def sparkline(values: Sequence[float], full: float) -> str:
    """Values as one line of block characters, `full` the top."""
    if not values or full <= 0:
        return ""
    top = len(_BARS) - 1
    return "".join(_BARS[max(0, min(top, round(value / full * top)))] for value in values)


@dataclass(frozen=True)
class EdgeChange:
    """One output's time in two builds."""

    output: str
    before_s: float | None
    after_s: float | None

    @property
    def change_s(self) -> float:
        """After minus before (0 for an edge in only one build)."""
        if self.before_s is None or self.after_s is None:
            return 0.0
        return self.after_s - self.before_s

    @property
    def status(self) -> str:
        """slower, faster, same, new (only in the second build) or gone (only in the first)."""
        if self.before_s is None:
            return "new"
        if self.after_s is None:
            return "gone"
        # ninja's clock is in milliseconds and the system is noisy: 5% or 50 ms is "same".
        if abs(self.change_s) <= max(0.05, 0.05 * self.before_s):
            return "same"
        return "slower" if self.change_s > 0 else "faster"


def compare(before: EdgeAnalysis, after: EdgeAnalysis) -> list[EdgeChange]:
    """Per output: its time in each build; largest changes first, then new, then gone."""
    a = {edge.output: edge.duration_s for edge in before.edges}
    b = {edge.output: edge.duration_s for edge in after.edges}
    changes = [EdgeChange(output, a.get(output), b.get(output)) for output in {*a, *b}]
    order = {"slower": 0, "faster": 0, "new": 1, "gone": 2, "same": 3}
    changes.sort(
        key=lambda c: (order[c.status], -abs(c.change_s), -(c.after_s or c.before_s or 0.0))
    )
    return changes


def usage_json(usage: schedule.Usage) -> dict[str, Any]:
    """The slot usage as JSON."""
    return {
        "jobs": usage.jobs,
        "wall_s": usage.wall_s,
        "edge_s": usage.edge_s,
        "mean_parallelism": usage.mean_parallelism,
        "most_parallel": usage.most_parallel,
        "idle_slot_s": usage.idle_slot_s,
        "too_few_jobs_s": usage.too_few_jobs_s,
        "waited_edge_s": usage.waited_edge_s,
        "waiting_edges": usage.waiting_edges,
        "tail_s": usage.tail_s,
        "tail_idle_slot_s": usage.tail_idle_slot_s,
        "tail_edges": [edge.output for edge in usage.tail_edges[:5]],
        "dependency_idle_slot_s": usage.dependency_idle_slot_s,
    }

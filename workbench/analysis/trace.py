"""A build as a Chrome trace (the Trace Event Format's JSON), for Perfetto or chrome://tracing.

Each edge is a complete event ("ph": "X") on the job slot that ran it (slots are assigned the
way ninja fills them: an edge takes the lowest slot free at its start), named by its output,
with its target, source, rule and sampled peak RSS as arguments. Counter events ("ph": "C")
carry the build's RSS and CPU from the 1 Hz samples and the edges running at each moment.
Times are microseconds since the build started. Format: "Trace Event Format", Google, the
document linked from https://perfetto.dev/docs/getting-started/other-formats.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.analysis import schedule
from workbench.analysis.edges import Edge
from workbench.atomic_file import replace_file
from workbench.errors import WorkbenchError

_PID = 1
_COUNTERS_PID = 1


@dataclass(frozen=True)
class SamplePoint:
    """One 1 Hz sample, seconds since the build started."""

    t: float
    rss: int
    cpu_cores: float | None
    """None where the sample measured no CPU (`history.records.cpu_measured`): no counter
    point, rather than a 0 that was never measured."""


def slots(edges: Sequence[Edge]) -> list[int]:
    """The job slot (0, 1, ...) each edge ran on, in the order of `edges`."""
    order = sorted(range(len(edges)), key=lambda i: (edges[i].start_s, edges[i].end_s))
    free: list[int] = []
    busy: list[tuple[float, int]] = []  # (end, slot)
    assigned = [0] * len(edges)
    count = 0
    for index in order:
        edge = edges[index]
        while busy and busy[0][0] <= edge.start_s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            slot = heapq.heappop(free)
        else:
            slot = count
            count += 1
        assigned[index] = slot
        heapq.heappush(busy, (edge.end_s, slot))
    return assigned


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def chrome_trace(
    title: str,
    edges: Sequence[Edge],
    offset_s: float = 0.0,
    samples: Sequence[SamplePoint] = (),
    peak_rss: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The trace document. `offset_s`: when the first edge's clock starts, in seconds since the
    build started (so edges and samples share one time axis)."""
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": _PID, "tid": 0, "args": {"name": title}},
    ]
    assigned = slots(edges)
    for slot in sorted(set(assigned)):
        events.append(
            {
                "name": "thread_name",
                "ph": "M",
                "pid": _PID,
                "tid": slot + 1,
                "args": {"name": f"job slot {slot + 1}"},
            }
        )
        events.append(
            {
                "name": "thread_sort_index",
                "ph": "M",
                "pid": _PID,
                "tid": slot + 1,
                "args": {"sort_index": slot + 1},
            }
        )
    for edge, slot in zip(edges, assigned, strict=True):
        arguments: dict[str, Any] = {"outputs": list(edge.outputs), "kind": edge.kind}
        if edge.target:
            arguments["target"] = edge.target
        if edge.source:
            arguments["source"] = edge.source
        if edge.rule:
            arguments["rule"] = edge.rule
        if peak_rss and edge.output in peak_rss:
            arguments["peak_rss_bytes (sampled)"] = peak_rss[edge.output]
        events.append(
            {
                "name": edge.output,
                "cat": edge.kind,
                "ph": "X",
                "ts": _us(offset_s + edge.start_s),
                "dur": _us(edge.duration_s),
                "pid": _PID,
                "tid": slot + 1,
                "args": arguments,
            }
        )
    for t, running in schedule.steps(edges):
        events.append(
            {
                "name": "edges running",
                "ph": "C",
                "ts": _us(offset_s + t),
                "pid": _COUNTERS_PID,
                "tid": 0,
                "args": {"edges": running},
            }
        )
    for sample in samples:
        events.append(
            {
                "name": "build memory (RSS, sampled)",
                "ph": "C",
                "ts": _us(sample.t),
                "pid": _COUNTERS_PID,
                "tid": 0,
                "args": {"MiB": round(sample.rss / 1048576, 1)},
            }
        )
        if sample.cpu_cores is None:
            continue
        events.append(
            {
                "name": "build CPU (cores, sampled)",
                "ph": "C",
                "ts": _us(sample.t),
                "pid": _COUNTERS_PID,
                "tid": 0,
                "args": {"cores": round(sample.cpu_cores, 2)},
            }
        )
    events.sort(key=lambda event: (event["ph"] != "M", event.get("ts", 0)))
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_trace(path: Path, document: dict[str, Any]) -> None:
    """Write the trace atomically (a temporary file renamed over), private to its owner."""
    # sort_keys: as every JSON the CLI writes
    data = json.dumps(document, sort_keys=True).encode("utf-8")
    try:
        replace_file(path, data, mode=0o600)
    except OSError as exc:
        raise WorkbenchError(f"{path}: cannot write the trace ({exc.strerror})") from None

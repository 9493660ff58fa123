"""Per-build measurements and the before/after table of the ninja-jobs report, from real builds.

`workbench report A` lists what build A measured; `workbench report A B` puts two builds side by
side (metric | build A | build B | change), as the seeds' report did by hand for -j1 against
-j4. Markdown for people, JSON (raw numbers beside the text) for scripts.

Where the build ran ninja, its edges come from `.ninja_log` and are exact (workbench.analysis):
the slowest edges, the critical path, parallelism over time and where job slots were left idle,
and between two builds the change per output (slower, faster, new, gone). Figures from the
1 Hz sampler (peak RSS, CPU, processes) are marked "sampled".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbench.analysis.schedule import Usage
from workbench.analysis.summary import (
    EdgeAnalysis,
    EdgeChange,
    analyse,
    compare,
    sparkline,
    usage_json,
)
from workbench.artefacts.sizes import from_json, human_bytes
from workbench.history.records import BuildRecord, Measured, Sampled
from workbench.history.store import History
from workbench.reading.follow import duration, size

_SPARK_COLUMNS = 60

_KIND_LABELS = {"compiler": "C/C++ compile job", "cuda": "CUDA compile job", "linker": "link job"}


@dataclass(frozen=True)
class BuildFacts:
    """A build's row and what it measured (None for a build that never ran)."""

    record: BuildRecord
    measured: Measured | None
    from_samples: bool = False
    """True when `measured` was rebuilt from the 1 Hz samples: the supervisor was lost
    before it wrote the final measurements (per-job figures are then missing)."""
    edges: EdgeAnalysis | None = None
    """Exact edges from the build's .ninja_log, when it had one."""
    ninja_log: str | None = None
    artefacts: dict[str, Any] | None = None
    """What a successful Nix/Flox build produced: outputs with NAR and closure sizes."""

    @property
    def label(self) -> str:
        """The build as the table heads it: "#3 fixture (j2)"."""
        jobs = f" (j{self.record.jobs})" if self.record.jobs else ""
        return f"#{self.record.id} {self.record.name}{jobs}"


@dataclass(frozen=True)
class Row:
    """One metric of the table: raw values, their text, and the change from A to B."""

    key: str
    metric: str
    values: tuple[Any, ...]
    texts: tuple[str, ...]
    change: str


def load(history: History, build_id: int, slowest: int = 10) -> BuildFacts:
    """A build's facts from the history (from its samples when its supervisor was lost); a
    row the history could not be given yet (a full disk) ends with the outcome kept beside
    its log (`liveness.check`)."""
    from workbench.supervision import liveness

    record = liveness.check(history, [history.get(build_id)])[0]
    measured = history.measured(build_id, slowest)
    edges = analyse(history.edges(build_id), record.jobs)
    ninja_log = history.edge_build_info(build_id)[0]
    artefacts = history.artefacts(build_id)
    if measured is not None:
        return BuildFacts(record, measured, edges=edges, ninja_log=ninja_log, artefacts=artefacts)
    rebuilt = from_samples(record, history.samples(build_id))
    return BuildFacts(
        record,
        rebuilt,
        from_samples=rebuilt is not None,
        edges=edges,
        ninja_log=ninja_log,
        artefacts=artefacts,
    )


def from_samples(record: BuildRecord, samples: list[Sampled]) -> Measured | None:
    """What the stored samples say of a build whose final measurements were never written."""
    if not samples:
        return None
    live = record.live_view
    cpus = live.cpus
    if not cpus:
        rates = [s.cpu_cores * 100.0 / s.cpu_percent for s in samples if s.cpu_percent > 0]
        cpus = round(rates[-1]) if rates else 1
    wall = record.duration_s or max(0.0, samples[-1].t - samples[0].t)
    cpu_seconds = max(sample.cpu_seconds for sample in samples)
    return Measured(
        build_id=record.id,
        wall_s=wall,
        cpu_seconds=cpu_seconds,
        cpu_utilisation=100.0 * cpu_seconds / (wall * cpus) if wall > 0 else 0.0,
        cpus=cpus,
        peak_rss=max(sample.rss for sample in samples),
        min_memory_available=min(sample.memory_available for sample in samples),
        memory_total=live.memory_total,
        most_jobs=max(sample.compile_jobs for sample in samples),
        samples=len(samples),
        peak_job_rss={},
        peak_process_rss={},
        census=[],
    )


def _outcome(record: BuildRecord) -> str:
    if record.exit_status is not None:
        return f"{record.state} (exit {record.exit_status})"
    if record.signal is not None:
        return f"{record.state} (signal {record.signal})"
    return record.state


def _ratio_change(a: float | None, b: float | None, lower_is_better: bool = True) -> str:
    if not a or not b:
        return ""
    if lower_is_better:
        if b < a:
            return f"{a / b:.2f}x faster"
        return f"{b / a:.2f}x slower" if b > a else "same"
    return f"{b / a:.2f}x"


def _percent_change(a: float | None, b: float | None) -> str:
    if a is None or b is None or a == 0:
        return ""
    change = 100.0 * (b - a) / a
    return f"{change:+.0f}%"


def _points_change(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return ""
    return f"{b - a:+.0f} points"


def _count_change(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return ""
    return f"{b - a:+g}"


def _release_change(a: str | None, b: str | None) -> str:
    if a is None and b is None:
        return ""
    return "same" if a == b else f"{a or '-'} → {b or '-'}"


def _peak_job_rss(kind: str) -> Callable[[BuildFacts], int | None]:
    """A build's peak RSS of one kind of job, None when not measured."""
    return lambda b: b.measured.peak_job_rss.get(kind) if b.measured else None


def _rows(builds: list[BuildFacts]) -> list[Row]:
    def spec(
        key: str,
        metric: str,
        value: Callable[[BuildFacts], Any],
        text: Callable[[Any, BuildFacts], str],
        change: Callable[[Any, Any], str] | None,
    ) -> Row:
        values = tuple(value(b) for b in builds)
        texts = tuple("-" if v is None else text(v, b) for v, b in zip(values, builds, strict=True))
        delta = change(values[0], values[1]) if change and len(values) == 2 else ""
        return Row(key, metric, values, texts, delta)

    def m(attribute: str) -> Callable[[BuildFacts], Any]:
        return lambda b: getattr(b.measured, attribute) if b.measured else None

    kinds = sorted(
        {kind for b in builds if b.measured for kind in b.measured.peak_job_rss},
        key=lambda kind: list(_KIND_LABELS).index(kind) if kind in _KIND_LABELS else 9,
    )

    def slowest(b: BuildFacts) -> Any:
        if b.edges is not None:
            edge = b.edges.slowest(1)[0]
            return (edge.source or edge.output, edge.duration_s, "exact")
        if not b.measured or not b.measured.slowest:
            return None
        job = b.measured.slowest[0]
        return (job.file or job.tool, job.seconds, "sampled")

    def edge_figure(attribute: str) -> Callable[[BuildFacts], Any]:
        return lambda b: getattr(b.edges.usage, attribute) if b.edges is not None else None

    def critical_s(b: BuildFacts) -> Any:
        return b.edges.critical.seconds if b.edges is not None and b.edges.critical else None

    def produced(attribute: str) -> Callable[[BuildFacts], Any]:
        def value(b: BuildFacts) -> Any:
            found = from_json(b.artefacts)
            return getattr(found, attribute) if found is not None else None

        return value

    rows = [
        spec("command", "Command", lambda b: list(b.record.argv), lambda v, b: _short(v), None),
        spec(
            "ort_version",
            "ONNX Runtime",
            lambda b: (b.record.settings or {}).get("ort_version"),
            lambda v, b: str(v),
            _release_change,
        ),
        spec("jobs", "Jobs (-j / --cores)", lambda b: b.record.jobs, lambda v, b: str(v), None),
        spec("outcome", "Outcome", lambda b: _outcome(b.record), lambda v, b: v, None),
        spec(
            "wall_s",
            "Build time",
            lambda b: b.record.duration_s,
            lambda v, b: duration(v),
            _ratio_change,
        ),
        spec(
            "nar_size",
            "Output size (NAR)",
            produced("nar_size"),
            lambda v, b: human_bytes(v),
            _percent_change,  # a size is not faster or slower
        ),
        spec(
            "closure_size",
            "Closure size",
            produced("closure_size"),
            lambda v, b: human_bytes(v),
            _percent_change,  # a size is not faster or slower
        ),
        spec(
            "cpu_utilisation",
            "CPU usage (share of all cores)",
            m("cpu_utilisation"),
            lambda v, b: f"{v:.0f}% of {b.measured.cpus if b.measured else '?'} cores",
            _points_change,
        ),
        spec(
            "cpu_seconds",
            "CPU time",
            m("cpu_seconds"),
            lambda v, b: duration(v),
            _percent_change,
        ),
        spec("peak_rss", "Memory peak (all processes)", m("peak_rss"), _peak_size, _percent_change),
    ]
    for kind in kinds:
        rows.append(
            spec(
                f"peak_job_rss.{kind}",
                f"Peak RSS per {_KIND_LABELS.get(kind, kind)}",
                _peak_job_rss(kind),
                _size,
                _percent_change,
            )
        )
    rows += [
        spec(
            "most_jobs",
            "Compile jobs at once (most)",
            m("most_jobs"),
            lambda v, b: str(v),
            _count_change,
        ),
        spec(
            "min_memory_available",
            "Least memory available",
            m("min_memory_available"),
            _size,
            _percent_change,
        ),
        spec(
            "slowest_file",
            "Slowest file",
            slowest,
            lambda v, b: f"{os.path.basename(v[0])} ({_exact(v[1])}, {v[2]})",
            None,
        ),
        spec(
            "edges",
            "Edges run (exact, .ninja_log)",
            lambda b: len(b.edges.edges) if b.edges is not None else None,
            lambda v, b: str(v),
            _count_change,
        ),
        spec(
            "critical_path_s",
            "Critical path",
            critical_s,
            lambda v, b: _exact(v),
            _ratio_change,
        ),
        spec(
            "mean_parallelism",
            "Edges running at once (mean / most)",
            edge_figure("mean_parallelism"),
            lambda v, b: f"{v:.2f} / {b.edges.usage.most_parallel if b.edges else '?'}",
            _percent_change,
        ),
        spec(
            "too_few_jobs_s",
            "Time edges waited for a job slot",
            edge_figure("too_few_jobs_s"),
            lambda v, b: _exact(v),
            None,
        ),
        spec("tail_s", "Tail (fewer edges than jobs)", edge_figure("tail_s"), _tail_text, None),
    ]
    # Which ONNX Runtime release: only for builds that know theirs (`workbench build`).
    return [
        row for row in rows if row.key != "ort_version" or any(v is not None for v in row.values)
    ]


def _exact(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds < 60 else duration(seconds)


def _tail_text(value: Any, build: BuildFacts) -> str:
    usage = build.edges.usage if build.edges is not None else None
    if usage is None or not usage.tail_edges:
        return _exact(value)
    return f"{_exact(value)} ({os.path.basename(usage.tail_edges[0].output)})"


def _size(value: Any, _build: BuildFacts) -> str:
    return size(value)


NOT_SAMPLED = "not sampled (it ended before a sample met a process of it)"


def _peak_size(value: Any, _build: BuildFacts) -> str:
    """A build's peak RSS; 0 is no figure but a build no sample saw (a no-op rebuild ends in
    milliseconds, between two samples a second apart): that says so."""
    return size(value) if value else NOT_SAMPLED


def _short(argv: list[str], width: int = 60) -> str:
    from workbench.planning.launch import display

    text = display(argv)
    return text if len(text) <= width else text[: width - 3] + "..."


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(builds: list[BuildFacts]) -> str:
    """The report as Markdown: the table, then each build's slowest files and processes."""
    rows = _rows(builds)
    header = ["Metric", *(b.label for b in builds)]
    if len(builds) == 2:
        header.append("Change")
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |"]
    lines.append("|" + "|".join(" --- " for _ in header) + "|")
    for row in rows:
        cells = [row.metric, *row.texts]
        if len(builds) == 2:
            cells.append(row.change)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    # The table cuts commands to keep its width; here they are whole and shell-quoted, to copy.
    from workbench.planning.launch import display

    lines += ["", "Commands:", "", "```"]
    lines += [f"{facts.label}: {display(facts.record.argv)}" for facts in builds]
    lines += ["```"]
    for facts in builds:
        measured = facts.measured
        if measured is None:
            lines += ["", f"{facts.label}: nothing measured ({facts.record.state})."]
            continue
        if facts.from_samples:
            lines += [
                "",
                f"{facts.label}: measured from its {measured.samples} stored samples; its "
                "supervisor was lost before the final measurements, so per-job peaks and the "
                "slowest files are missing.",
            ]
        if facts.record.note:
            lines += ["", f"{facts.label}: {facts.record.note}"]
        contention = contention_line(facts)
        if contention:
            lines += ["", f"{facts.label}: {contention}"]
        if facts.edges is not None:
            lines += _edge_sections(facts, facts.edges)
        elif measured.slowest:
            lines += [
                "",
                f"Slowest compile jobs of {facts.label} (sampled once a second: a job's time is "
                "exact at its start and within a second at its end; jobs shorter than a second "
                "may be missing):",
                "",
                "| File | Tool | Time | Peak RSS |",
                "| --- | --- | --- | --- |",
            ]
            for job in measured.slowest:
                lines.append(
                    f"| {_cell(job.file or '?')} | {job.tool} | {duration(job.seconds)} | "
                    f"{size(job.peak_rss)} |"
                )
    if len(builds) == 2 and builds[0].edges is not None and builds[1].edges is not None:
        lines += _change_section(builds, compare(builds[0].edges, builds[1].edges))
    return "\n".join(lines) + "\n"


def _edge_row(analysis: EdgeAnalysis, edge: Any) -> str:
    peak = analysis.peak_rss.get(edge.output)
    cpu = analysis.cpu_s.get(edge.output)
    return (
        f"| {_cell(edge.output)} | {_cell(edge.target or '-')} | {edge.kind} | "
        f"{_exact(edge.duration_s)} | {'-' if cpu is None else _exact(cpu)} | "
        f"{size(peak) if peak else '-'} |"
    )


# The host counts as busy when the build and everything else kept this share of its cores.
BUSY_HOST_SHARE = 0.8


def contention_line(facts: BuildFacts) -> str:
    """What else used the host's cores over the build's life (sampled), in words; "" when the
    supervisor recorded nothing (an older build)."""
    live = facts.record.live_view
    other = live.other
    cpus = live.cpus or (facts.measured.cpus if facts.measured else 0)
    if other is None or not other.samples or not cpus:
        return ""
    builds = ""
    if other.build_processes:
        # The launch's census line says what runs now and warns of what will compete; here
        # the build has ended: what ran beside it (at the last census), in the past tense.
        from workbench.planning import preflight

        detail = preflight.census_detail(other.summary)
        builds = f"; {preflight.counted(other.build_processes)} ran on this host"
        builds += f" {detail}" if detail else ""
    return (
        f"Host contention (sampled over the build): other processes used "
        f"{other.mean_cpu_cores:.1f} of {cpus} cores on average{builds}."
    )


def waiting_words(usage: Usage) -> str:
    """Which edges waited for a slot and for how long, in words a reader can weigh against the
    build's time: "467 edges waited, 30.2 s each on average" (their sum, "3h57m waited in all",
    read as the build's own time beside a build of a minute)."""
    count = usage.waiting_edges
    if not count:
        return "no edge waited"
    mean = usage.waited_edge_s / count
    return f"{count} edge{'s' if count != 1 else ''} waited, {_exact(mean)} each on average"


def more_jobs_advice(facts: BuildFacts) -> str:
    """The advice after "an edge waited for a free slot": more jobs, unless the host's cores
    were already busy with this build and others (recorded contention)."""
    live = facts.record.live_view
    other = live.other
    measured = facts.measured
    cpus = live.cpus or (measured.cpus if measured else 0)
    if other is not None and other.samples and cpus and measured is not None:
        own = measured.cpu_utilisation / 100.0 * cpus
        if own + other.mean_cpu_cores >= BUSY_HOST_SHARE * cpus:
            return (
                f"; but the host was busy (this build {own:.1f} and other processes "
                f"{other.mean_cpu_cores:.1f} of {cpus} cores on average): more jobs would only "
                "compete with them"
            )
    return "; more jobs would help where cores and memory allow"


def _edge_sections(facts: BuildFacts, analysis: EdgeAnalysis) -> list[str]:
    """Exact edges: parallelism over time, where slots went idle, critical path, slowest."""
    from workbench.analysis.schedule import series

    usage = analysis.usage
    source = f" from {facts.ninja_log}" if facts.ninja_log else ""
    lines = [
        "",
        f"Exact edges of {facts.label}{source}: {len(analysis.edges)} edges, "
        f"{_exact(usage.edge_s)} of edge time in {_exact(usage.wall_s)} "
        f"(mean {usage.mean_parallelism:.2f} running, most {usage.most_parallel}, "
        f"{usage.jobs} jobs).",
    ]
    values = series(analysis.edges, _SPARK_COLUMNS)
    if values:
        step = usage.wall_s / len(values)
        lines += [
            "",
            f"Edges running over time (one column per {step:.2f} s; full height = "
            f"{usage.jobs} jobs):",
            "",
            "```",
            sparkline(values, float(usage.jobs)),
            "```",
        ]
    idle_share = 100.0 * usage.idle_slot_s / (usage.jobs * usage.wall_s) if usage.wall_s else 0.0
    lines += [
        "",
        f"Job slots left idle: {_exact(usage.idle_slot_s)} slot-time ({idle_share:.0f}% of "
        f"{usage.jobs} x {_exact(usage.wall_s)}):",
    ]
    if analysis.dependencies is None:
        lines.append("- too few jobs: not known (the ninja graph could not be read)")
    else:
        advice = more_jobs_advice(facts)
        lines.append(
            f"- too few jobs: for {_exact(usage.too_few_jobs_s)} an edge was ready and waited "
            f"for a free slot ({waiting_words(usage)})"
            + (advice if usage.too_few_jobs_s > 0 else "")
        )
    tail = ", ".join(
        f"{os.path.basename(edge.output)} {_exact(edge.duration_s)}"
        for edge in usage.tail_edges[:3]
    )
    lines.append(
        f"- the tail: the last {_exact(usage.tail_s)} ran fewer than {usage.jobs} edges "
        f"({_exact(usage.tail_idle_slot_s)} slot-time idle)" + (f": {tail}" if tail else "")
    )
    lines.append(
        f"- waiting for dependencies before the tail: {_exact(usage.dependency_idle_slot_s)} "
        "slot-time (nothing was ready)"
    )
    critical = analysis.critical
    if critical is not None and critical.edges:
        share = 100.0 * critical.seconds / usage.wall_s if usage.wall_s else 0.0
        lines += [
            "",
            f"Critical path of {facts.label}: {len(critical.edges)} edges, "
            f"{_exact(critical.seconds)} ({share:.0f}% of the edges' wall time); no number of "
            "jobs makes the build shorter than this chain:",
            "",
            "| Output | Target | Kind | Time | CPU (sampled) | Peak RSS (sampled) |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        lines += [_edge_row(analysis, edge) for edge in critical.edges]
    lines += [
        "",
        f"Slowest edges of {facts.label} (exact, from .ninja_log; CPU and peak RSS sampled at "
        "1 Hz, CPU at least what the last sample of each process saw, '-' where no sample saw "
        "the job):",
        "",
        "| Output | Target | Kind | Time | CPU (sampled) | Peak RSS (sampled) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [_edge_row(analysis, edge) for edge in analysis.slowest(10)]
    return lines


def _change_section(builds: list[BuildFacts], changes: list[EdgeChange]) -> list[str]:
    counts: dict[str, int] = {}
    for change in changes:
        counts[change.status] = counts.get(change.status, 0) + 1
    order = ("slower", "faster", "new", "gone", "same")
    said = ", ".join(f"{counts[key]} {key}" for key in order if key in counts)
    shown = [change for change in changes if change.status != "same"][:15]
    lines = ["", f"Per output, {builds[0].label} -> {builds[1].label} (exact edges): {said}."]
    if shown:
        lines += ["", "| Output | Before | After | Change |", "| --- | --- | --- | --- |"]
        for change in shown:
            before = "-" if change.before_s is None else _exact(change.before_s)
            after = "-" if change.after_s is None else _exact(change.after_s)
            if change.status in ("new", "gone"):
                delta = change.status
            else:
                delta = f"{change.change_s:+.2f} s ({change.status})"
            lines.append(f"| {_cell(change.output)} | {before} | {after} | {delta} |")
    return lines


def _edges_json(facts: BuildFacts) -> dict[str, Any] | None:
    analysis = facts.edges
    if analysis is None:
        return None

    def edge(e: Any) -> dict[str, Any]:
        return {
            "output": e.output,
            "outputs": list(e.outputs),
            "target": e.target,
            "source": e.source,
            "kind": e.kind,
            "rule": e.rule,
            "start_s": e.start_s,
            "end_s": e.end_s,
            "seconds": e.duration_s,
            "peak_rss_sampled": analysis.peak_rss.get(e.output),
            "cpu_s_sampled": analysis.cpu_s.get(e.output),
        }

    critical = analysis.critical
    return {
        "ninja_log": facts.ninja_log,
        "count": len(analysis.edges),
        "usage": usage_json(analysis.usage),
        "critical_path": None
        if critical is None
        else {"seconds": critical.seconds, "edges": [edge(e) for e in critical.edges]},
        "slowest": [edge(e) for e in analysis.slowest(10)],
    }


def to_json(builds: list[BuildFacts]) -> dict[str, Any]:
    """The report as one JSON document."""
    rows = _rows(builds)
    return {
        "builds": [
            {
                **facts.record.to_json(),
                "measurements": facts.measured.to_json() if facts.measured else None,
                "measurements_from": (
                    None if facts.measured is None else "samples" if facts.from_samples else "end"
                ),
                "edges": _edges_json(facts),
                "artefacts": facts.artefacts,
            }
            for facts in builds
        ],
        "edge_changes": (
            [
                {
                    "output": change.output,
                    "before_s": change.before_s,
                    "after_s": change.after_s,
                    "status": change.status,
                }
                for change in compare(builds[0].edges, builds[1].edges)
            ]
            if len(builds) == 2 and builds[0].edges is not None and builds[1].edges is not None
            else None
        ),
        "table": [
            {
                "key": row.key,
                "metric": row.metric,
                "values": list(row.values),
                "texts": list(row.texts),
                "change": row.change or None,
            }
            for row in rows
        ],
    }

"""Per-build measurements and the before/after table of the ninja-jobs report, from real builds.

`workbench report A` lists what build A measured; `workbench report A B` puts two builds side by
side (metric | build A | build B | change), as the seeds' report did by hand for -j1 against
-j4. Markdown for people, JSON (raw numbers beside the text) for scripts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbench.supervision.follow import duration, size
from workbench.supervision.history import BuildRecord, History, Measured, Sampled

_KIND_LABELS = {"compiler": "C/C++ compile job", "cuda": "CUDA compile job", "linker": "link job"}


@dataclass(frozen=True)
class BuildFacts:
    """A build's row and what it measured (None for a build that never ran)."""

    record: BuildRecord
    measured: Measured | None
    from_samples: bool = False
    """True when `measured` was rebuilt from the 1 Hz samples: the supervisor was lost
    before it wrote the final measurements (per-job figures are then missing)."""

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
    """A build's facts from the history (from its samples when its supervisor was lost)."""
    record = history.get(build_id)
    measured = history.measured(build_id, slowest)
    if measured is not None:
        return BuildFacts(record, measured)
    rebuilt = from_samples(record, history.samples(build_id))
    return BuildFacts(record, rebuilt, from_samples=rebuilt is not None)


def from_samples(record: BuildRecord, samples: list[Sampled]) -> Measured | None:
    """What the stored samples say of a build whose final measurements were never written."""
    if not samples:
        return None
    live = record.live or {}
    cpus = int(live.get("cpus") or 0)
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
        memory_total=int(live.get("memory_total") or 0),
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
        if not b.measured or not b.measured.slowest:
            return None
        job = b.measured.slowest[0]
        return (job.file or job.tool, job.seconds)

    rows = [
        spec("command", "Command", lambda b: list(b.record.argv), lambda v, b: _short(v), None),
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
        spec("peak_rss", "Memory peak (all processes)", m("peak_rss"), _size, _percent_change),
    ]
    for kind in kinds:
        rows.append(
            spec(
                f"peak_job_rss.{kind}",
                f"Peak RSS per {_KIND_LABELS.get(kind, kind)}",
                lambda b, kind=kind: b.measured.peak_job_rss.get(kind) if b.measured else None,
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
            lambda v, b: f"{os.path.basename(v[0])} ({duration(v[1])})",
            None,
        ),
    ]
    return rows


def _size(value: Any, _build: BuildFacts) -> str:
    return size(value)


def _short(argv: list[str], width: int = 60) -> str:
    from workbench.supervision.launch import display

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
    from workbench.supervision.launch import display

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
        if measured.slowest:
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
    return "\n".join(lines) + "\n"


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
            }
            for facts in builds
        ],
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

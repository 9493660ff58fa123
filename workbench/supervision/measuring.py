"""The supervisor's glue to `workbench.analysis`: exact edges and the cgroup's OOM kills."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.history.records import BuildRecord
    from workbench.history.store import History

# What analysis needs is imported inside each function, as it was in the supervisor: only once
# the build has started (see "What follows the build" in supervisor.py).


def start_edges(record: BuildRecord) -> Any:
    from workbench.analysis.recorder import EdgeRecorder

    return EdgeRecorder(record.argv, Path(record.cwd))


def cgroup_oom_before(record: BuildRecord) -> Any:
    from workbench.analysis import oom

    # The build inherits this process's cgroups; a nix-daemon's builders, the daemon's.
    cgroup = oom.build_cgroup(record.nix, os.environ)
    return None if cgroup is None else (cgroup, oom.oom_kills(cgroup))


def cgroup_oom_note(cgroup_oom: Any, summary: Any) -> str | None:
    if not cgroup_oom or cgroup_oom[1] is None:
        return None
    from workbench.analysis import oom

    cgroup, before = cgroup_oom
    after = oom.oom_kills(cgroup)
    if after is None or after <= before:
        return None
    compiling = [job for job in summary.last_jobs if job.kind in ("compiler", "cuda")]
    files = [job.file or job.tool for job in compiling]
    peak = max(
        [job.peak_rss for job in compiling] or [max(summary.peak_job_rss.values(), default=0)]
    )
    # The jobs that ran together before the kills began, not the survivors at the end.
    jobs = max(len(compiling), summary.most_jobs, 1)
    return oom.oom_note(after - before, files, jobs, peak, cgroup)


def record_edges(
    edge_recorder: Any,
    say: Callable[[str], None],
    history: History,
    record: BuildRecord,
    summary: Any,
) -> None:
    if edge_recorder is None:
        return
    from workbench.analysis.recorder import SampledJob
    from workbench.history.records import EdgeRow
    from workbench.supervision import live_eta

    jobs = [
        SampledJob(job.file, job.started, job.seconds, job.peak_rss, job.cpu_seconds)
        for job in summary.jobs
        if job.kind in ("compiler", "cuda")
    ]
    stored = edge_recorder.finish(jobs)
    for problem in edge_recorder.graph_problems():
        say(f"no critical path: {problem}")
    work_key = live_eta.work_key_of(edge_recorder)  # a found ninja's too: the ETA's key
    if not stored and work_key is None:
        return
    log = edge_recorder.log_path
    history.record_edges(
        record.id,
        str(log) if log is not None and stored else None,
        [EdgeRow(**vars(edge)) for edge in stored],
        work_key,
    )

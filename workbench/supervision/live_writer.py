"""The supervisor's side of the live view: one `LiveView` per sample, from the sampler's
`Sample`, the ETA and what the rest of the host is doing.

What it adds to the sample:
- the jobs: one row per compile or link job, its driver (`c++`, `nvcc`) folded into the pass
  that does the work (`cc1plus`, `cicc`), CPU and RSS summed over the job's processes;
- the running edges: what each job compiles or links now (from the compilers the sampler
  sees), and the derivations a daemon's builders work for: never ninja's last finished line;
- the build's own peaks, over every sample since it started;
- contention: CPU the host's other processes used (host busy time from /proc/stat less the
  build's own), now and averaged over the build's life, and the other build processes on the
  host (a census every `CENSUS_EVERY_S`: one pass over /proc).

Per sample this costs O(the build's processes); the census costs one /proc pass, rarely.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from workbench.progress.live_view import (
    Contention,
    EtaView,
    LiveView,
    Peaks,
    ProcessView,
    RunningEdge,
)

if TYPE_CHECKING:
    from workbench.monitor import Sample
    from workbench.monitor.sampler import ProcessSample

# The busiest jobs the live view keeps: a screenful, whatever the build's size.
LIVE_JOBS = 24
CENSUS_EVERY_S = 10.0
_JOB_KINDS = ("compiler", "cuda", "linker")
# A job's driver: what the user typed or CMake ran, not what does the work.
_DRIVERS = frozenset(("gcc", "g++", "cc", "c++", "clang", "clang++", "nvcc", "ccache", "sccache"))


def host_busy_ticks(stat_path: str = "/proc/stat") -> tuple[int, int] | None:
    """(busy, total) CPU ticks of the whole host since boot, from /proc/stat's `cpu` line."""
    try:
        with open(stat_path, "rb") as handle:
            first = handle.readline().split()
    except OSError:
        return None
    if not first or first[0] != b"cpu":
        return None
    try:
        values = [int(value) for value in first[1:]]
    except ValueError:
        return None
    # user nice system idle iowait irq softirq steal (guest is already in user)
    total = sum(values[:8])
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return total - idle, total


def fold_jobs(
    processes: Sequence[ProcessSample], now: float, users: Mapping[int, str]
) -> list[ProcessView]:
    """One row per job (driver folded into its busiest pass), and one per Nix builder process
    outside any job; busiest first."""
    groups: dict[int, list[ProcessSample]] = {}
    rows: list[ProcessView] = []
    for process in processes:
        if process.job and (process.job_kind in _JOB_KINDS or process.kind in _JOB_KINDS):
            groups.setdefault(process.job, []).append(process)
        elif process.kind in _JOB_KINDS or process.derivation:
            rows.append(_row([process], process, now, users))
    for job, members in groups.items():
        top = next((p for p in members if p.pid == job), members[0])
        rows.append(_row(members, top, now, users))
    rows.sort(key=lambda row: (-row.cpu_percent, -row.rss))
    return rows


def _row(
    members: Sequence[ProcessSample],
    top: ProcessSample,
    now: float,
    users: Mapping[int, str],
) -> ProcessView:
    workers = [p for p in members if p.tool not in _DRIVERS] or list(members)
    worker = max(workers, key=lambda p: (p.cpu_percent, p.rss))
    drivers = [p.tool for p in members if p is not worker and p.tool in _DRIVERS]
    return ProcessView(
        pid=worker.pid,
        tool=worker.tool,
        kind=top.job_kind or worker.kind,
        file=worker.file or top.file or next((p.file for p in members if p.file), None),
        cpu_percent=round(sum(p.cpu_percent for p in members), 1),
        rss=sum(p.rss for p in members),
        running_s=round(top.running_s(now), 1),
        user=users.get(worker.pid, "?"),
        derivation=worker.derivation or top.derivation,
        driver=drivers[0] if drivers else None,
    )


def running_edges(jobs: Sequence[ProcessView]) -> tuple[RunningEdge, ...]:
    """What the build works on now, longest running first: each job's file (or tool), and each
    derivation a builder outside a job works for."""
    edges: dict[str, RunningEdge] = {}
    for job in jobs:
        what = job.file or (job.derivation if job.kind not in _JOB_KINDS else None) or job.tool
        known = edges.get(what)
        if known is None or job.running_s > known.running_s:
            edges[what] = RunningEdge(what, job.tool, job.kind, job.running_s)
    return tuple(sorted(edges.values(), key=lambda edge: -edge.running_s))


class LiveWriter:
    """Makes the build's `LiveView` once a sample; keeps the peaks and the contention."""

    def __init__(
        self,
        census: Callable[[set[int]], tuple[int, str]] | None = None,
        ticks: Callable[[], tuple[int, int] | None] = host_busy_ticks,
        peak: Peaks | None = None,
    ) -> None:
        self._census = census if census is not None else other_build_census
        self._ticks = ticks
        self._last_ticks = ticks()
        self._peak = peak if peak is not None else Peaks()
        self._other_core_s = 0.0
        self._other_s = 0.0
        self._samples = 0
        self._census_at: float | None = None
        self._census_found: tuple[int, str] = (0, "")

    def view(
        self,
        sample: Sample,
        eta: EtaView | None,
        users: Mapping[int, str],
        cpu_measured: bool = True,
    ) -> LiveView:
        """The live view of one sample. `cpu_measured`: False where the sample measured no CPU
        (the sampler's first reading, the exit sample): its CPU is then None, not 0%."""
        build = sample.build
        cpu_measured = cpu_measured and build.interval > 0
        peak = self._peak
        if build.rss > peak.rss or peak.rss_at is None:
            peak = Peaks(build.rss, build.t, peak.cpu_cores, peak.compile_jobs)
        self._peak = Peaks(
            peak.rss,
            peak.rss_at,
            max(peak.cpu_cores, round(build.cpu_cores, 2)) if cpu_measured else peak.cpu_cores,
            max(peak.compile_jobs, build.compile_jobs),
        )
        jobs = fold_jobs(sample.processes, build.t, users)
        return LiveView(
            t=build.t,
            cpus=build.cpus,
            cpu_percent=round(build.cpu_percent, 1) if cpu_measured else None,
            cpu_cores=round(build.cpu_cores, 2) if cpu_measured else None,
            rss=build.rss,
            memory_available=build.memory_available,
            memory_total=build.memory_total,
            processes=build.processes,
            compile_jobs=build.compile_jobs,
            cuda_jobs=build.cuda_jobs,
            link_jobs=build.link_jobs,
            running=running_edges(jobs),
            peak=self._peak,
            eta=eta,
            other=self._contention(sample),
            jobs=tuple(jobs[:LIVE_JOBS]),
        )

    def _contention(self, sample: Sample) -> Contention | None:
        build = sample.build
        ticks = self._ticks()
        before, self._last_ticks = self._last_ticks, ticks
        other_cores: float | None = None
        if ticks is not None and before is not None and ticks[1] > before[1]:
            busy = (ticks[0] - before[0]) / (ticks[1] - before[1]) * max(build.cpus, 1)
            # The build's share is measured over its own interval: never below nothing.
            other_cores = max(0.0, busy - build.cpu_cores)
            if build.interval > 0:
                self._other_core_s += other_cores * build.interval
                self._other_s += build.interval
                self._samples += 1
        if self._census_at is None or build.t - self._census_at >= CENSUS_EVERY_S:
            self._census_at = build.t
            own = {process.pid for process in sample.processes}
            self._census_found = self._census(own)
        if other_cores is None and self._samples == 0:
            count, summary = self._census_found
            if not count:
                return None
            return Contention(0.0, 0.0, count, summary, 0)
        mean = self._other_core_s / self._other_s if self._other_s else 0.0
        count, summary = self._census_found
        return Contention(
            round(other_cores or 0.0, 2), round(mean, 2), count, summary, self._samples
        )


def other_build_census(own: set[int]) -> tuple[int, str]:
    """(count, summary) of the build processes on the host that are not the build's own (nor
    in its session: a compiler started since the sample) nor this supervisor's lineage."""
    from workbench.planning import preflight

    # The build leads its own session: its processes the sample missed are still in it.
    others = [
        process
        for process in preflight.other_build_processes(exclude=own)
        if not _in_build_session(process.pid, own)
    ]
    lines = preflight.describe(others)
    return len(others), (lines[0] if lines else "")


def _in_build_session(pid: int, own: set[int]) -> bool:
    try:
        session = os.getsid(pid)
    except OSError:
        return True  # gone
    return session in own

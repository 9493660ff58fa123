"""A build's measurements in one record: peaks, jobs at once, per-file compile times.

`PeakTracker.add(sample)` folds each `Sample` in (O(processes) per sample, nothing kept per
sample); `summary()` gives the `BuildSummary` the history stores and the report compares. A
summary can also be rebuilt later from stored samples by folding them in again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.host.units import byte_size
from workbench.monitor.sampler import ProcessSample, Sample


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One compile or link job (a g++/nvcc/ld and the processes under it) from start to end."""

    file: str | None
    """Compile jobs: the source file; link jobs: the output; None if the argv did not say."""
    kind: str
    """The job's kind: "compiler", "cuda" or "linker"."""
    tool: str
    """The job's top program: "g++", "nvcc", "ld", ..."""
    job: int
    """PID of the job's top process."""
    started: float
    """Epoch seconds the top process started (exact, from the kernel)."""
    last_seen: float
    """The last sample that saw the job: its end is between this and the next sample."""
    peak_rss: int
    """The most RSS the job's processes held together at a sample, bytes."""
    running: bool
    """True if the job was still running at the latest sample."""
    cpu_seconds: float = 0.0
    """User + system CPU its processes had used at the last sample that saw each (at least:
    the time after a process's last sample is not seen)."""

    @property
    def seconds(self) -> float:
        """How long the job ran (at least; sampling may miss up to one interval of its end)."""
        return max(0.0, self.last_seen - self.started)


@dataclass(frozen=True, slots=True)
class BuildSummary:
    """What one build measured, for the history and the before/after report."""

    samples: int
    started: float
    """Epoch seconds of the first sample."""
    ended: float
    """Epoch seconds of the last sample."""
    cpus: int
    cpu_seconds: float
    """CPU used by the build, seconds (see `PeakTracker.summary` for the root's share)."""
    cpu_utilisation: float
    """cpu_seconds as a share of all cores over the wall time, 0–100."""
    peak_rss: int
    """The most RSS the build's processes held together at a sample, bytes."""
    peak_rss_at: float
    min_memory_available: int
    """The least memory that was available to the build at a sample, bytes."""
    memory_total: int
    peak_job_rss: dict[str, int]
    """Per job kind ("compiler", "cuda", "linker"): the most RSS one job held, bytes."""
    peak_process_rss: dict[str, int]
    """Per program ("cc1plus", "cicc", "ld", ...): the most RSS one process held, bytes."""
    most_jobs: int
    """The most compile jobs (C/C++ and CUDA) seen running at once."""
    most_jobs_at: float
    jobs: tuple[JobRecord, ...]
    """Every compile and link job seen, slowest first."""
    last_jobs: tuple[JobRecord, ...]
    """The compile/link jobs running at the latest sample that had any: what an OOM kill hit."""

    @property
    def wall_s(self) -> float:
        """Seconds from the first sample to the last."""
        return max(0.0, self.ended - self.started)

    def slowest(
        self, count: int = 10, kinds: tuple[str, ...] = ("compiler", "cuda")
    ) -> list[JobRecord]:
        """The `count` slowest jobs of the given kinds (compile jobs by default)."""
        return [job for job in self.jobs if job.kind in kinds][:count]


class PeakTracker:
    """Folds samples into a `BuildSummary`."""

    def __init__(self) -> None:
        self._samples = 0
        self._started = 0.0
        self._ended = 0.0
        self._cpus = 1
        self._cpu_seconds = 0.0
        self._peak_rss = 0
        self._peak_rss_at = 0.0
        self._min_available: int | None = None
        self._memory_total = 0
        self._peak_job: dict[str, int] = {}
        self._peak_process: dict[str, int] = {}
        self._most_jobs = 0
        self._most_jobs_at = 0.0
        self._open: dict[int, JobRecord] = {}
        self._job_cpu: dict[int, dict[int, float]] = {}  # open job -> its processes' CPU seconds
        self._closed: list[JobRecord] = []
        self._last_jobs: tuple[int, ...] = ()

    def add(self, sample: Sample) -> None:
        """Fold one sample in."""
        build = sample.build
        if self._samples == 0:
            self._started = build.t
        self._samples += 1
        self._ended = build.t
        self._cpus = build.cpus
        self._cpu_seconds = build.cpu_seconds
        self._memory_total = build.memory_total
        if build.rss > self._peak_rss:
            self._peak_rss, self._peak_rss_at = build.rss, build.t
        if self._min_available is None or build.memory_available < self._min_available:
            self._min_available = build.memory_available
        if build.compile_jobs > self._most_jobs:
            self._most_jobs, self._most_jobs_at = build.compile_jobs, build.t

        peak_process = self._peak_process
        jobs: dict[int, list[Any]] = {}  # job pid -> [rss, top process, file, kind, {pid: CPU s}]
        for process in sample.processes:
            if process.rss > peak_process.get(process.tool, 0):
                peak_process[process.tool] = process.rss
            if not process.job:
                continue
            entry = jobs.get(process.job)
            if entry is None:
                entry = jobs[process.job] = [0, None, None, process.job_kind or process.kind, {}]
            entry[0] += process.rss
            entry[4][process.pid] = process.cpu_seconds
            if process.pid == process.job:
                entry[1] = process
            if entry[2] is None and process.file is not None:
                entry[2] = process.file
        for job, (rss, top, file, kind, cpu) in jobs.items():
            if rss > self._peak_job.get(kind, 0):
                self._peak_job[kind] = rss
            self._update_job(job, rss, top, file, kind, build.t, cpu)
        for job in [job for job in self._open if job not in jobs]:
            self._closed.append(_with(self._open.pop(job), running=False))
            self._job_cpu.pop(job, None)
        if jobs:
            self._last_jobs = tuple(jobs)

    def _update_job(
        self,
        job: int,
        rss: int,
        top: ProcessSample | None,
        file: str | None,
        kind: str,
        t: float,
        cpu: dict[int, float],
    ) -> None:
        started = top.started if top is not None else t
        record = self._open.get(job)
        if record is not None and top is not None and abs(record.started - started) > 0.5:
            # The PID came back as another job between two samples.
            self._closed.append(_with(record, running=False))
            record = None
        # A process's CPU only grows; one that exited keeps what it had at its last sample.
        seen = self._job_cpu.setdefault(job, {}) if record is not None else {}
        for pid, seconds in cpu.items():
            seen[pid] = max(seen.get(pid, 0.0), seconds)
        self._job_cpu[job] = seen
        cpu_seconds = sum(seen.values())
        if record is None:
            self._open[job] = JobRecord(
                file=file if file is not None else (top.file if top else None),
                kind=kind,
                tool=top.tool if top is not None else "?",
                job=job,
                started=started,
                last_seen=t,
                peak_rss=rss,
                running=True,
                cpu_seconds=cpu_seconds,
            )
            return
        self._open[job] = JobRecord(
            file=record.file if record.file is not None else file,
            kind=record.kind,
            tool=record.tool if top is None else top.tool,
            job=job,
            started=record.started,
            last_seen=t,
            peak_rss=max(record.peak_rss, rss),
            running=True,
            cpu_seconds=cpu_seconds,
        )

    def summary(self, root_cpu_seconds: float | None = None) -> BuildSummary:
        """The build so far.

        `root_cpu_seconds`: user + system CPU from the launched process's rusage (wait4), which
        includes every descendant it reaped, also the last second the sampler cannot see. The
        summary takes the larger of that and the sampled figure (which alone sees daemon
        builders).
        """
        cpu = self._cpu_seconds
        if root_cpu_seconds is not None:
            cpu = max(cpu, root_cpu_seconds)
        wall = max(0.0, self._ended - self._started)
        jobs = sorted([*self._closed, *self._open.values()], key=lambda job: -job.seconds)
        last = tuple(self._open[job] for job in self._last_jobs if job in self._open)
        if not last:
            wanted = set(self._last_jobs)
            last = tuple(job for job in reversed(self._closed) if job.job in wanted)
        return BuildSummary(
            samples=self._samples,
            started=self._started,
            ended=self._ended,
            cpus=self._cpus,
            cpu_seconds=cpu,
            cpu_utilisation=(100.0 * cpu / (wall * self._cpus)) if wall > 0 else 0.0,
            peak_rss=self._peak_rss,
            peak_rss_at=self._peak_rss_at,
            min_memory_available=self._min_available or 0,
            memory_total=self._memory_total,
            peak_job_rss=dict(self._peak_job),
            peak_process_rss=dict(self._peak_process),
            most_jobs=self._most_jobs,
            most_jobs_at=self._most_jobs_at,
            jobs=tuple(jobs),
            last_jobs=last,
        )


def _with(record: JobRecord, *, running: bool) -> JobRecord:
    return JobRecord(
        record.file,
        record.kind,
        record.tool,
        record.job,
        record.started,
        record.last_seen,
        record.peak_rss,
        running,
        record.cpu_seconds,
    )


def oom_note(summary: BuildSummary) -> str:
    """The line for a build killed by SIGKILL (exit 137), e.g.
    "killed (OOM?) while compiling conv.cc, peak 11.20 GiB"."""
    parts = []
    for kind, verb in (("compiler", "compiling"), ("cuda", "compiling"), ("linker", "linking")):
        names = [
            job.file or f"{job.tool} (pid {job.job})"
            for job in summary.last_jobs
            if job.kind == kind
        ]
        if names:
            shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            parts.append(f"{verb} {shown}")
    what = " while " + "; ".join(parts) if parts else ""
    return f"killed (OOM?){what}, peak {byte_size(summary.peak_rss)}"

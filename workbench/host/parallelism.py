"""How many compile jobs and nvcc threads this host can take, from cores and memory."""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 1024**3
# Leave room for the OS, the linker and the page cache: a build that fills memory to the brim
# ends in swapping or an OOM kill (exit 137).
MEMORY_HEADROOM = 0.85


@dataclass(frozen=True)
class JobMemory:
    """Peak memory of one compile job and where the figure comes from."""

    gb: float
    source: str  # "default from settings.toml" or "measured: ..."


def estimated_peak_gb(jobs: int, nvcc_threads: int, job_memory_gb: float) -> float:
    """Peak memory when every job compiles a heavy file at once: jobs x threads x per-thread."""
    return jobs * max(1, nvcc_threads) * job_memory_gb


@dataclass(frozen=True)
class MemoryEstimate:
    """The memory a build may take at peak: jobs × nvcc threads × one job's peak, beside the
    memory available, with where the per-job figure comes from (its basis). The one estimate
    and the one wording of it: the recommendation, the planner (`planning.tuning`), its
    warning and every screen that shows a planned build's peak say it through this."""

    jobs: int
    nvcc_threads: int
    """1 for a build that compiles no CUDA."""
    per_job: JobMemory
    available_bytes: int

    @property
    def peak_gib(self) -> float:
        return estimated_peak_gb(self.jobs, self.nvcc_threads, self.per_job.gb)

    @property
    def available_gib(self) -> float:
        return self.available_bytes / GIB

    @property
    def exceeds(self) -> bool:
        """Whether the peak is more than the memory available."""
        return self.peak_gib > self.available_gib

    def figure(self) -> str:
        """ "8 jobs × 0.30 GiB = 2.4 GiB"; nvcc threads are a factor only where there are
        some: "2 jobs × 2 nvcc threads × 5.00 GiB = 20.0 GiB"."""
        unit = "nvcc thread" if self.nvcc_threads == 1 else "nvcc threads"
        threads = f" × {self.nvcc_threads} {unit}" if self.nvcc_threads > 1 else ""
        jobs = "job" if self.jobs == 1 else "jobs"
        return f"{self.jobs} {jobs}{threads} × {self.per_job.gb:.2f} GiB = {self.peak_gib:.1f} GiB"

    def line(self) -> str:
        """The figure beside the memory available, and its basis."""
        return f"{self.figure()} of {self.available_gib:.1f} GiB available ({self.per_job.source})"

    @property
    def warning(self) -> str | None:
        """memory_warning's line when the peak is more than the memory available."""
        return memory_warning(self.jobs, self.nvcc_threads, self.per_job, self.available_bytes)


def memory_warning(
    jobs: int, nvcc_threads: int, job_memory: JobMemory, available_bytes: int
) -> str | None:
    """A warning with the numbers when jobs x per-job peak exceeds the memory available."""
    estimate = MemoryEstimate(jobs, max(1, nvcc_threads), job_memory, available_bytes)
    if not estimate.exceeds:
        return None
    fit = math.floor(
        estimate.available_gib * MEMORY_HEADROOM / (estimate.nvcc_threads * job_memory.gb)
    )
    advice = f"at most {fit} jobs fit (--jobs {fit})" if fit >= 1 else "not even one job fits"
    return (
        f"memory at peak: {estimate.figure()} ({job_memory.source}), more than the "
        f"{estimate.available_gib:.1f} GiB available now: expect swapping or an OOM kill "
        f"(exit 137); {advice}"
    )


@dataclass(frozen=True)
class ParallelismAdvice:
    """Recommended ninja jobs and nvcc threads, the peak they imply, and why."""

    jobs: int
    nvcc_threads: int
    memory: MemoryEstimate
    """The peak the recommendation implies: the planner's estimate, in its words."""
    memory_budget_gb: float
    limited_by: str  # "cores", "memory", or "settings" when the jobs were given
    reasons: tuple[str, ...]

    @property
    def peak_memory_gb(self) -> float:
        return self.memory.peak_gib


def recommend(
    cores: int,
    available_bytes: int,
    job_memory: JobMemory,
    cuda: bool,
    cuda_architectures: int = 1,
    jobs: int | None = None,
    nvcc_threads: int | None = None,
) -> ParallelismAdvice:
    """Jobs and nvcc threads that keep every core busy without running out of memory.

    nvcc's --threads only parallelises across architectures, so more threads than
    architectures buy nothing; threads are spent only where cores and memory are left after
    the jobs. `jobs` fixes the job count (the user's ninja_jobs) and recommends threads for it;
    `nvcc_threads` fixes the threads (the user's nvcc_threads) and sizes the jobs for them, so
    that jobs x threads fit the cores and the memory.
    """
    budget_gb = available_bytes / GIB * MEMORY_HEADROOM
    per_job = max(job_memory.gb, 0.01)
    threads_given = max(1, nvcc_threads) if cuda and nvcc_threads else 1
    by_memory = math.floor(budget_gb / (per_job * threads_given))
    by_cores = max(1, cores // threads_given)
    if jobs is None:
        jobs = max(1, min(by_cores, by_memory))
        limited_by = "cores" if by_cores <= by_memory else "memory"
    else:
        limited_by = "settings"
    reasons = [
        f"{cores} cores usable",
        f"{budget_gb:.1f} GiB of memory to spend ({MEMORY_HEADROOM:.0%} of "
        f"{available_bytes / GIB:.1f} GiB available)",
    ]
    if by_memory < 1:
        reasons.append(
            "less memory than one job needs: expect swapping or an OOM kill (exit 137); "
            "free memory or build on a bigger host"
        )
    if cuda and nvcc_threads:
        reasons.append(
            f"{threads_given} nvcc thread(s) per job from settings.toml: jobs sized so that "
            "jobs x threads fit the cores and the memory"
        )
        nvcc_threads = threads_given
    elif cuda and cuda_architectures > 1:
        spare_cores = cores // jobs
        spare_memory = math.floor(budget_gb / (jobs * per_job)) if jobs else 1
        nvcc_threads = max(1, min(cuda_architectures, spare_cores, spare_memory))
        if nvcc_threads > 1:
            reasons.append(
                f"{nvcc_threads} nvcc threads: {cuda_architectures} architectures and cores and "
                "memory to spare"
            )
        else:
            reasons.append("1 nvcc thread: no cores or memory to spare for more")
    else:
        nvcc_threads = 1
    memory = MemoryEstimate(
        jobs, nvcc_threads, JobMemory(per_job, job_memory.source), available_bytes
    )
    reasons.append(f"memory at peak: {memory.line()}; limited by {limited_by}")
    return ParallelismAdvice(
        jobs=jobs,
        nvcc_threads=nvcc_threads,
        memory=memory,
        memory_budget_gb=budget_gb,
        limited_by=limited_by,
        reasons=tuple(reasons),
    )

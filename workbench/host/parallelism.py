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


@dataclass(frozen=True)
class ParallelismAdvice:
    """Recommended ninja jobs and nvcc threads, the peak they imply, and why."""

    jobs: int
    nvcc_threads: int
    peak_memory_gb: float
    memory_budget_gb: float
    limited_by: str  # "cores", "memory", or "settings" when the jobs were given
    reasons: tuple[str, ...]


def estimated_peak_gb(jobs: int, nvcc_threads: int, job_memory_gb: float) -> float:
    """Peak memory when every job compiles a heavy file at once: jobs x threads x per-thread."""
    return jobs * max(1, nvcc_threads) * job_memory_gb


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
        f"{per_job:.2f} GiB per {'nvcc thread' if cuda else 'compile job'} ({job_memory.source})",
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
    reasons.append(
        f"{jobs} jobs x {nvcc_threads} nvcc thread(s) x {per_job:.2f} GiB = "
        f"{estimated_peak_gb(jobs, nvcc_threads, per_job):.1f} GiB peak "
        f"(limited by {limited_by})"
    )
    return ParallelismAdvice(
        jobs=jobs,
        nvcc_threads=nvcc_threads,
        peak_memory_gb=estimated_peak_gb(jobs, nvcc_threads, per_job),
        memory_budget_gb=budget_gb,
        limited_by=limited_by,
        reasons=tuple(reasons),
    )

"""How many jobs a build gets, from settings, the host and what earlier builds measured, and
the one estimate of the memory they take at peak (`MemoryEstimate`): every screen and command
that shows a peak figure for a planned build shows this one (`planning.plan` builds the rest).

The foundation's recommendation (`parallelism.recommend`) divides the memory available by the
peak memory of one compile job. Until this host has built a variant that figure is a default
from settings.toml; afterwards it is the largest job the supervisor measured in the latest
builds of that variant (per nvcc thread for CUDA builds), and the reason says which build.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

from workbench.configs.settings import BuildSettings
from workbench.history.store import History
from workbench.host.parallelism import (
    GIB,
    MEMORY_HEADROOM,
    JobMemory,
    estimated_peak_gb,
    recommend,
)


@dataclass(frozen=True)
class MemoryEstimate:
    """The memory a build may take at peak: jobs × nvcc threads × one job's peak, beside the
    memory available, with where the per-job figure comes from (its basis)."""

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


@dataclass(frozen=True)
class JobsChoice:
    """The jobs a build runs with, where the number comes from, and the memory they take."""

    jobs: int
    source: str
    """"--jobs", "settings.toml (ninja_jobs)", or "auto (...)"."""
    reasons: tuple[str, ...]
    memory: MemoryEstimate

    @property
    def job_memory(self) -> JobMemory:
        return self.memory.per_job

    @property
    def nvcc_threads(self) -> int:
        return self.memory.nvcc_threads

    @property
    def warning(self) -> str | None:
        return self.memory.warning


def default_job_memory(settings: BuildSettings, cuda: bool) -> JobMemory:
    """The per-job figure of settings.toml, used until a build of the variant is measured."""
    if cuda:
        return JobMemory(
            settings.cuda_job_memory_gb, "default from settings.toml (cuda_job_memory_gb)"
        )
    return JobMemory(settings.cxx_job_memory_gb, "default from settings.toml (cxx_job_memory_gb)")


def measured_job_memory(history: History, name: str, cuda: bool) -> JobMemory | None:
    """The largest compile job of the latest builds called `name`, per nvcc thread for CUDA."""
    peaks = history.job_memory_peaks(name, "cuda" if cuda else "compiler")
    if not peaks:
        return None
    top = peaks[0]
    threads = top.nvcc_threads if cuda else 1
    per_job = top.peak_rss / GIB / max(1, threads)
    when = time.strftime("%Y-%m-%d", time.localtime(top.ended)) if top.ended else "unfinished"
    what = top.file or top.tool
    per_thread = f", {threads} nvcc threads" if cuda and threads > 1 else ""
    return JobMemory(
        per_job,
        f"measured: build #{top.build_id} of {name} on {when}, largest job {what} "
        f"({top.tool}) peaked at {top.peak_rss / GIB:.2f} GiB{per_thread}",
    )


def memory_warning(
    jobs: int, nvcc_threads: int, job_memory: JobMemory, available_bytes: int
) -> str | None:
    """A warning with the numbers when jobs x per-job peak exceeds the memory available."""
    peak_gb = estimated_peak_gb(jobs, nvcc_threads, job_memory.gb)
    available_gb = available_bytes / GIB
    if peak_gb <= available_gb:
        return None
    fit = math.floor(available_gb * MEMORY_HEADROOM / (max(1, nvcc_threads) * job_memory.gb))
    threads = f" x {nvcc_threads} nvcc threads" if nvcc_threads > 1 else ""
    advice = f"at most {fit} jobs fit (--jobs {fit})" if fit >= 1 else "not even one job fits"
    return (
        f"{jobs} jobs{threads} x {job_memory.gb:.2f} GiB per job ({job_memory.source}) = "
        f"{peak_gb:.1f} GiB at peak, more than the {available_gb:.1f} GiB available now: expect "
        f"swapping or an OOM kill (exit 137); {advice}"
    )


def choose_jobs(
    settings: BuildSettings,
    explicit: int | None,
    job_memory: JobMemory,
    cores: int,
    available_bytes: int,
    cuda: bool,
) -> JobsChoice:
    """`--jobs`, else settings.toml's ninja_jobs, else ("auto") the recommendation."""
    threads = settings.nvcc_threads if cuda else 1
    reasons: tuple[str, ...]
    if explicit is not None:
        jobs, source, reasons = explicit, "--jobs", ()
    elif settings.ninja_jobs != "auto":
        from workbench.configs.settings import origin

        jobs, source, reasons = int(settings.ninja_jobs), f"{origin('ninja_jobs')} (ninja_jobs)", ()
    else:
        architectures = len(settings.cuda_architectures) or 1
        # Sized for the nvcc threads the build will run with (settings.toml's), not the ones
        # the recommendation would pick: else "auto" plans jobs that then do not fit.
        advice = recommend(
            cores, available_bytes, job_memory, cuda, architectures, nvcc_threads=threads
        )
        jobs = advice.jobs
        source = f"auto (limited by {advice.limited_by})"
        reasons = advice.reasons
    memory = MemoryEstimate(jobs, max(1, threads), job_memory, available_bytes)
    return JobsChoice(jobs, source, tuple(reasons), memory)


def job_memory_for(measured: JobMemory | None, settings: BuildSettings, cuda: bool) -> JobMemory:
    """The per-job figure a plan uses: measured in earlier builds of the target when there are
    some, else the settings' default."""
    return measured or default_job_memory(settings, cuda)


def choose_jobs_for(
    history: History,
    settings: BuildSettings,
    name: str,
    cuda: bool,
    explicit: int | None,
    nix: bool = False,
) -> JobsChoice:
    """choose_jobs with this host's cores and memory and the best per-job figure for `name`:
    measured in earlier builds of it when there are some, else the settings' default. `nix`: a
    Nix build, whose builders run in a nix-daemon's cgroups when one serves this client."""
    from workbench.analysis.oom import nix_daemon_pid
    from workbench.host.hardware import detect_memory, usable_cores

    job_memory = job_memory_for(measured_job_memory(history, name, cuda), settings, cuda)
    memory = detect_memory(nix_daemon_pid(os.environ) if nix else None)
    return choose_jobs(settings, explicit, job_memory, usable_cores(), memory.available, cuda)

"""How many jobs a build gets, from settings, the host and what earlier builds measured, and
the one estimate of the memory they take at peak (`MemoryEstimate`, from host/parallelism.py,
whose recommendation words its peak through it too): every screen and command
that shows a peak figure for a planned build shows this one (`planning.plan` builds the rest).

The foundation's recommendation (`parallelism.recommend`) divides the memory available by the
peak memory of one compile job. Until this host has built a variant that figure is a default
from settings.toml; afterwards it is the largest job the supervisor measured in the latest
builds of that variant (per nvcc thread for CUDA builds), and the reason says which build.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from workbench.configs.settings import BuildSettings
from workbench.history.store import History
from workbench.host.parallelism import (
    GIB,
    JobMemory,
    recommend,
)
from workbench.host.parallelism import MemoryEstimate as MemoryEstimate
from workbench.host.parallelism import memory_warning as memory_warning


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

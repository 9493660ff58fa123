"""Ended builds written into a History through its own API, as the supervisor writes them
(created, marked running, finished), for the tests that read a history: screens, reports,
sizes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from workbench.history.records import SUCCEEDED, BuildRecord, Measured, NewBuild
from workbench.history.store import History
from workbench.host.parallelism import GIB


def ended_build(
    history: History,
    name: str = "fixture",
    *,
    backend: str = "run",
    argv: Sequence[str] = ("true",),
    cwd: str = "/tmp",
    variant: str | None = None,
    eta_key: str = "k",
    settings: dict[str, Any] | None = None,
    state: str = SUCCEEDED,
    duration_s: float = 60.0,
    ended: float | None = None,
    exit_status: int | None = None,
    lines: int = 1,
    progress: dict[str, Any] | None = None,
) -> BuildRecord:
    """A build of `name` that ran `duration_s` and ended at `ended` (now) in `state`; a
    variant's build is a Nix build of that variant. Its exit status is 0 when it succeeded and
    1 otherwise unless given. Its PID and group are 1: nothing of it runs."""
    record = history.create(
        NewBuild(
            name=name,
            backend=backend,
            argv=tuple(argv),
            cwd=cwd,
            checkout=cwd,
            settings=dict(settings or {}),
            eta_key=eta_key,
            nix=backend == "nix",
            variant=variant,
            target=variant,
        )
    )
    ended = time.time() if ended is None else ended
    history.mark_running(record.id, 1, 1, ended - duration_s)
    if exit_status is None:
        exit_status = 0 if state == SUCCEEDED else 1
    history.finish(
        record.id, state, ended, duration_s, exit_status, None, None, lines, progress or {}
    )
    return history.get(record.id)


def job_peak_measured(build_id: int, job_peak: int) -> Measured:
    """What build `build_id` measured, its largest compile job peaking at `job_peak` bytes
    (two jobs at once, 100 s, 8 GiB of 16 left): what the tuning learns a job's memory from."""
    return Measured(
        build_id=build_id,
        wall_s=100.0,
        cpu_seconds=150.0,
        cpu_utilisation=75.0,
        cpus=2,
        peak_rss=2 * job_peak,
        min_memory_available=8 * GIB,
        memory_total=16 * GIB,
        most_jobs=2,
        samples=100,
        peak_job_rss={"compiler": job_peak},
        peak_process_rss={"cc1plus": job_peak},
        census=[],
    )

"""Builds written into a History through its own API, as the supervisor writes them (created,
marked running, finished), for the tests that read a history: screens, reports, sizes, the
store itself. One helper for each step, so that no test spells out `NewBuild(...)` or
`finish(...)`'s nine positional fields again:

- `new_build`: what is known before a build starts (a `workbench run` of `true` in /tmp unless
  told otherwise);
- `running_build`: created and marked running;
- `end`: `History.finish` with its fields named;
- `ended_build`: all three, for a build that ran and ended.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from workbench.history.records import SUCCEEDED, BuildRecord, Measured, NewBuild
from workbench.history.store import History
from workbench.host.parallelism import GIB


class _Usual:
    """The usual exit status for the state (end's default)."""


USUAL = _Usual()


def new_build(
    name: str = "fixture",
    *,
    backend: str = "run",
    argv: Sequence[str] = ("true",),
    cwd: str = "/tmp",
    checkout: str | None = None,
    settings: dict[str, Any] | None = None,
    eta_key: str = "k",
    nix: bool | None = None,
    variant: str | None = None,
    target: str | None = None,
    jobs: int | None = None,
) -> NewBuild:
    """A build before it starts: its checkout is `cwd` and it is a Nix build when its backend
    is "nix", unless told otherwise."""
    return NewBuild(
        name=name,
        backend=backend,
        argv=tuple(argv),
        cwd=cwd,
        checkout=cwd if checkout is None else checkout,
        settings=dict(settings or {}),
        eta_key=eta_key,
        nix=backend == "nix" if nix is None else nix,
        variant=variant,
        target=target,
        jobs=jobs,
    )


def running_build(
    history: History,
    plan: NewBuild | None = None,
    *,
    pid: int = 1,
    pgid: int | None = None,
    started: float | None = None,
    created: float | None = None,
) -> BuildRecord:
    """`plan` (new_build()'s by default) created (at `created`, now by default) and marked
    running as process `pid` (its group `pgid`, `pid` by default) since `started` (now)."""
    record = history.create(plan or new_build(), now=created)
    started = time.time() if started is None else started
    history.mark_running(record.id, pid, pid if pgid is None else pgid, started)
    return history.get(record.id)


def end(
    history: History,
    build_id: int,
    state: str = SUCCEEDED,
    *,
    ended: float | None = None,
    duration_s: float = 60.0,
    exit_status: int | _Usual | None = USUAL,
    signal: int | None = None,
    note: str | None = None,
    lines: int = 1,
    progress: dict[str, Any] | None = None,
) -> BuildRecord:
    """`History.finish` with its fields named: the build ended at `ended` (now) in `state`
    after `duration_s`; its exit status 0 when it succeeded and 1 otherwise unless given (None:
    none, as a build killed by a signal)."""
    if isinstance(exit_status, _Usual):
        exit_status = 0 if state == SUCCEEDED else 1
    history.finish(
        build_id,
        state,
        time.time() if ended is None else ended,
        duration_s,
        exit_status,
        signal,
        note,
        lines,
        progress if progress is not None else {},
    )
    return history.get(build_id)


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
    plan = new_build(
        name,
        backend=backend,
        argv=argv,
        cwd=cwd,
        settings=settings,
        eta_key=eta_key,
        variant=variant,
        target=variant,
    )
    ended = time.time() if ended is None else ended
    record = running_build(history, plan, started=ended - duration_s)
    return end(
        history,
        record.id,
        state,
        ended=ended,
        duration_s=duration_s,
        exit_status=USUAL if exit_status is None else exit_status,
        lines=lines,
        progress=progress,
    )


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

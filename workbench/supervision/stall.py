"""Stall detection, from plain values (no Textual): a build whose progress has not moved for far
longer than the slowest job of earlier builds of the same target took, while a process of it
spins (CPU ≥ 90 % the whole time) or is blocked (disk wait, or every job idle at 0 %).

`StallWatch` decides from the `ProcessRow`s of each poll (one process of a running build, or
one finished job), so it is tested without a screen; the build screen shows its verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from workbench.history.records import BuildRecord, JobRow, Sampled
from workbench.history.store import History
from workbench.host.units import duration
from workbench.progress.live_view import ProcessView

POLL_INTERVAL_S = 1.0  # how often the build screen polls its build: the streaks' slack counts in it


@dataclass(frozen=True)
class ProcessRow:
    """One process of a running build, or one finished job (then `pid` and CPU are None)."""

    pid: int | None
    kind: str
    tool: str
    file: str | None
    cpu_percent: float | None
    rss: int | None
    running_s: float | None
    state: str | None = None
    """The kernel's state letter when it was read (R, S, D, ...), else None."""

    @classmethod
    def from_view(cls, job: ProcessView, state: str | None = None) -> ProcessRow:
        """A job of the supervisor's live view (`LiveView.jobs`): its driver folded in, shown
        as "cc1plus←c++"."""
        tool = f"{job.tool}←{job.driver}" if job.driver else job.tool
        return cls(
            pid=job.pid,
            kind=job.kind,
            tool=tool,
            file=job.file or job.derivation,
            cpu_percent=job.cpu_percent,
            rss=job.rss,
            running_s=job.running_s,
            state=state,
        )

    @classmethod
    def from_job(cls, job: JobRow) -> ProcessRow:
        """A finished build's job: its peak RSS and how long it ran."""
        return cls(None, job.kind, job.tool, job.file, None, job.peak_rss, job.seconds)


STALL_FACTOR = 3.0  # "far longer": three times the slowest job of earlier builds
STALL_FLOOR_S = 120.0  # never sooner than this, however quick the earlier jobs were
STALL_DEFAULT_S = 600.0  # no earlier build of this target to compare with
SPIN_PERCENT = 90.0
IDLE_PERCENT = 1.0
# A streak must span the stall but for this much: the first poll may come a little late.
STREAK_SLACK_S = 2.5 * POLL_INTERVAL_S


def stall_threshold(slowest_earlier_s: float | None) -> float:
    """Seconds without progress after which a build may be stalled."""
    if slowest_earlier_s is None or slowest_earlier_s <= 0:
        return STALL_DEFAULT_S
    return max(STALL_FLOOR_S, STALL_FACTOR * slowest_earlier_s)


def slowest_earlier_job(history: History, record: BuildRecord) -> float | None:
    """The longest job (compile or link) of the latest earlier successful builds like this one."""
    slowest: float | None = None
    for run in history.earlier_runs(record.eta_key, record.id):
        jobs = history.jobs(run.build_id)  # slowest first
        if jobs and (slowest is None or jobs[0].seconds > slowest):
            slowest = jobs[0].seconds
    return slowest


def last_progress_change(samples: Sequence[Sampled]) -> float | None:
    """When the stored samples' progress fraction last changed (None: no samples)."""
    if not samples:
        return None
    changed = samples[0].t
    for before, after in pairwise(samples):
        if after.fraction != before.fraction:
            changed = after.t
    return changed


@dataclass(frozen=True)
class Stall:
    """A build that stopped moving, and the process that looks responsible."""

    pid: int
    tool: str
    file: str | None
    how: str  # "spinning", "blocked" or "idle"
    stalled_s: float
    threshold_s: float

    def describe(self, debug_hint: str) -> str:
        """The warning line the screen shows."""
        what = {
            "spinning": f"has used ≥{SPIN_PERCENT:.0f}% CPU the whole time (a loop?)",
            "blocked": "has been in disk wait (state D) the whole time",
            "idle": "and every other job have used no CPU the whole time (waiting on a lock?)",
        }[self.how]
        file = f" ({self.file.rsplit('/', 1)[-1]})" if self.file else ""
        return (
            f"⚠ Stalled? No progress for {duration(self.stalled_s)} (flagged after "
            f"{duration(self.threshold_s)}): {self.tool} {self.pid}{file} {what}. {debug_hint}"
        )


class StallWatch:
    """Follows progress and each process's CPU across polls; says when the build looks stuck."""

    def __init__(self, threshold_s: float, changed_at: float | None = None) -> None:
        self.threshold_s = threshold_s
        self.changed_at = changed_at
        self.key: tuple[Any, ...] | None = None
        self.started: float | None = None
        self.streaks: dict[int, tuple[str, float]] = {}  # pid -> (condition, since)

    def observe(
        self, now: float, key: tuple[Any, ...], processes: Iterable[ProcessRow]
    ) -> Stall | None:
        """Take one poll in; the stall it shows, if any."""
        if self.started is None:
            self.started = now
            if self.changed_at is None:
                self.changed_at = now
        elif key != self.key:
            self.changed_at = now
        self.key = key
        rows = [row for row in processes if row.pid is not None]
        streaks: dict[int, tuple[str, float]] = {}
        for row in rows:
            cpu = row.cpu_percent or 0.0
            if cpu >= SPIN_PERCENT:
                condition = "spinning"
            elif row.state == "D":
                condition = "blocked"
            elif cpu < IDLE_PERCENT:
                condition = "idle"
            else:
                continue
            assert row.pid is not None  # rows are the processes with a pid
            before = self.streaks.get(row.pid)
            since = before[1] if before and before[0] == condition else now
            streaks[row.pid] = (condition, since)
        self.streaks = streaks
        assert self.changed_at is not None
        stalled = now - self.changed_at
        if stalled < self.threshold_s or not rows:
            return None
        # Processes are watched from when this screen opened: a streak counts if it covers
        # the stall as far as it was seen.
        seen_from = max(self.changed_at, self.started) + STREAK_SLACK_S
        whole = {pid: c for pid, (c, since) in streaks.items() if since <= seen_from}
        by_pid = {row.pid: row for row in rows}
        for how in ("spinning", "blocked"):
            chosen = [by_pid[pid] for pid, condition in whole.items() if condition == how]
            if chosen:
                row = max(chosen, key=lambda r: (r.cpu_percent or 0.0, r.running_s or 0.0))
                return Stall(row.pid or 0, row.tool, row.file, how, stalled, self.threshold_s)
        if len(whole) == len(rows) and all(c == "idle" for c in whole.values()):
            row = max(rows, key=lambda r: r.running_s or 0.0)
            return Stall(row.pid or 0, row.tool, row.file, "idle", stalled, self.threshold_s)
        return None


def read_states(pids: Iterable[int]) -> dict[int, str]:
    """The kernel's state letter of each process still there."""
    from workbench.monitor import procfs

    states: dict[int, str] = {}
    for pid in pids:
        found = procfs.read_stat(pid)
        if found is not None:
            states[pid] = found[1].state
    return states

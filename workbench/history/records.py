"""The build history's records: the build states and one dataclass for each kind of row.

A build before it starts and its row, samples, jobs, measurements, earlier runs, edges, matrix
targets and pushes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from workbench.progress.live_view import LiveView, ProgressView


class BuildState(str, Enum):
    """A build's state. A `str` (the project supports 3.10, before enum.StrEnum), so that the
    history's rows, --json and the outcome file hold its value ("running"), as they did before."""

    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    KILLED = "killed"
    STOPPED = "stopped"
    LOST = "lost"

    @classmethod
    def _missing_(cls, value: object) -> BuildState | None:
        """A state this version does not know (a history written by a newer workbench): kept
        as written, so that `history` and `status` still list the build and say its state as
        the newer version does; it counts as neither running nor ended (not in ACTIVE_STATES
        or FINAL_STATES), so nothing here acts on the build or rewrites its row."""
        if not isinstance(value, str):
            return None
        unknown = str.__new__(cls, value)
        unknown._name_ = "UNKNOWN"
        unknown._value_ = value
        return unknown

    @property
    def known(self) -> bool:
        """Whether this version knows the state (False: written by a newer workbench)."""
        return self._name_ != "UNKNOWN"

    # str() and format() give the value, as StrEnum's do: f"{record.state}" reads "running" on
    # every Python (3.12 made format() of a mixed-in enum follow its str(), "BuildState.RUNNING").
    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


# The states by their old names (34 modules and tests use them).
STARTING = BuildState.STARTING
RUNNING = BuildState.RUNNING
STOPPING = BuildState.STOPPING
SUCCEEDED = BuildState.SUCCEEDED
FAILED = BuildState.FAILED
KILLED = BuildState.KILLED
STOPPED = BuildState.STOPPED
LOST = BuildState.LOST
ACTIVE_STATES = (STARTING, RUNNING, STOPPING)
# A running build's supervisor reports at least once a second (a sample); after this long
# without a report it is "not responding" (stopped, starved, or unable to write the history),
# and what it last reported (an ETA above all) is no longer shown as live.
REPORT_STALE_S = 5.0
FINAL_STATES = (SUCCEEDED, FAILED, KILLED, STOPPED, LOST)


@dataclass(frozen=True)
class Push:
    """One output of a build copied (with its closure) to a store or binary cache."""

    output: str
    store: str
    pushed: float
    push_build: int | None  # the supervised `nix copy` that did it
    signed_by: str | None  # the secret key file it was signed with, if any

    def to_json(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "store": self.store,
            "pushed": self.pushed,
            "push_build": self.push_build,
            "signed_by": self.signed_by,
        }


@dataclass(frozen=True)
class NewBuild:
    """What is known of a build before it starts; `History.create` stores it."""

    name: str
    backend: str  # "nix", "flox" or "run"
    argv: tuple[str, ...]
    cwd: str
    checkout: str
    settings: dict[str, Any]
    eta_key: str
    nix: bool
    variant: str | None = None
    target: str | None = None
    jobs: int | None = None
    forced: bool = False


@dataclass(frozen=True)
class BuildRecord:
    """One row of `builds`."""

    id: int
    name: str
    backend: str
    variant: str | None
    target: str | None
    argv: tuple[str, ...]
    cwd: str
    checkout: str
    settings: dict[str, Any]
    jobs: int | None
    eta_key: str
    nix: bool
    forced: bool
    state: BuildState
    host: str | None
    user: str | None
    created: float
    started: float | None
    ended: float | None
    duration_s: float | None
    exit_status: int | None
    signal: int | None
    note: str | None
    log_path: str
    supervisor_pid: int | None
    supervisor_started: float | None
    build_pid: int | None
    pgid: int | None
    lines: int
    progress: dict[str, Any]
    live: dict[str, Any]
    updated: float | None
    stop_requested: float | None
    stop_grace: float | None
    outlived: tuple[dict[str, Any], ...] = ()
    """Processes that outlived the build (pid, started, name), recorded by its supervisor."""
    adopted: tuple[dict[str, Any], ...] = ()
    """Each time its supervisor was lost and a new one adopted the running build: the lost
    supervisor's pid (`lost_pid`), when its keeper saw it gone (`lost_at`), when the new one
    (`pid`) took over (`adopted_at`), and the seconds nobody observed the build
    (`unobserved_s`: from the lost one's last report to the adoption). Empty when one
    supervisor saw the whole build."""

    def silent_s(self, now: float | None = None) -> float | None:
        """Seconds since its supervisor last reported, while it runs (None when ended or not
        yet reporting)."""
        if not self.active or self.updated is None or self.state != RUNNING:
            return None
        return max(0.0, (time.time() if now is None else now) - self.updated)

    def responding(self, now: float | None = None) -> bool:
        """Whether its supervisor reported within REPORT_STALE_S (True when not running)."""
        silent = self.silent_s(now)
        return silent is None or silent < REPORT_STALE_S

    @property
    def unobserved_s(self) -> float:
        """Seconds of the build no supervisor observed (sampled figures miss them)."""
        return sum(float(entry.get("unobserved_s") or 0.0) for entry in self.adopted)

    @property
    def active(self) -> bool:
        """Whether the build has not ended (as far as the history knows)."""
        return self.state in ACTIVE_STATES

    @property
    def progress_view(self) -> ProgressView:
        """The build's progress as its supervisor last wrote it, typed."""
        return ProgressView.from_json(self.progress)

    @property
    def live_view(self) -> LiveView:
        """The build's live view (measurements, peaks, ETA, contention) as last written."""
        return LiveView.from_json(self.live)

    def elapsed(self, now: float | None = None) -> float | None:
        """Seconds it ran: the duration when it ended, else the time since it started."""
        if self.duration_s is not None:
            return self.duration_s
        if self.started is None:
            return None
        return max(0.0, (now if now is not None else time.time()) - self.started)

    def to_json(self) -> dict[str, Any]:
        """The row as `status --json` and `history --json` print it."""
        return {
            "id": self.id,
            "name": self.name,
            "backend": self.backend,
            "variant": self.variant,
            "target": self.target,
            "argv": list(self.argv),
            "cwd": self.cwd,
            "checkout": self.checkout,
            "settings": self.settings,
            "jobs": self.jobs,
            "state": self.state,
            "host": self.host,
            "user": self.user,
            "created": self.created,
            "started": self.started,
            "ended": self.ended,
            "duration_s": self.duration_s,
            "elapsed_s": self.elapsed(),
            "exit_status": self.exit_status,
            "signal": self.signal,
            "note": self.note,
            "log": self.log_path,
            "supervisor_pid": self.supervisor_pid,
            "build_pid": self.build_pid,
            "pgid": self.pgid,
            "lines": self.lines,
            "progress": self.progress_view.to_json(),
            "live": self.live_view.to_json() if self.live else {},
            "forced": self.forced,
            "outlived": list(self.outlived),
            "adopted": list(self.adopted),
            "unobserved_s": round(self.unobserved_s, 3),
            "silent_s": None if (silent := self.silent_s()) is None else round(silent, 1),
            "responding": self.responding(),
        }


@dataclass(frozen=True)
class Sampled:
    """One row of `samples`: the whole build at one second."""

    t: float
    cpu_percent: float
    cpu_cores: float
    cpu_seconds: float
    rss: int
    memory_available: int
    processes: int
    compile_jobs: int
    cuda_jobs: int
    link_jobs: int
    fraction: float | None
    cpu_interval: float | None = None
    """Seconds of CPU use the CPU figures cover: 0 where they measured none (the sampler's
    first reading, with no interval behind it; the supervisor's exit sample, taken with no
    process left, which missed what the last ones used); None in histories from before it was
    kept (`cpu_measured` then tells those two apart as it can)."""


def cpu_measured(samples: Sequence[Sampled]) -> list[bool]:
    """Whether each of a build's samples (in time order) measured its CPU: where the history
    kept `cpu_interval`, it says; in an older history, the first sample is the sampler's first
    reading when it counted no CPU yet, and the last is the exit sample when no process was
    left. Their 0% is no measurement: a graph or a trace leaves it out (its RSS is one)."""
    found = [sample.cpu_interval is None or sample.cpu_interval > 0 for sample in samples]
    if len(samples) > 1:
        first, last = samples[0], samples[-1]
        if first.cpu_interval is None and first.cpu_seconds == 0.0:
            found[0] = False
        if last.cpu_interval is None and last.processes == 0:
            found[-1] = False
    return found


@dataclass(frozen=True)
class JobRow:
    """One compile or link job of a build."""

    file: str | None
    kind: str
    tool: str
    seconds: float
    peak_rss: int
    started: float


@dataclass(frozen=True)
class Measured:
    """What one build measured, as stored when it ended."""

    build_id: int
    wall_s: float
    cpu_seconds: float
    cpu_utilisation: float
    cpus: int
    peak_rss: int
    min_memory_available: int
    memory_total: int
    most_jobs: int
    samples: int
    peak_job_rss: dict[str, int]
    peak_process_rss: dict[str, int]
    census: list[dict[str, Any]]
    slowest: list[JobRow] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The measurements as JSON (`report --format json`, `history --json`)."""
        return {
            "wall_s": self.wall_s,
            "cpu_seconds": self.cpu_seconds,
            "cpu_utilisation": self.cpu_utilisation,
            "cpus": self.cpus,
            "peak_rss": self.peak_rss,
            "min_memory_available": self.min_memory_available,
            "memory_total": self.memory_total,
            "most_jobs": self.most_jobs,
            "samples": self.samples,
            "peak_job_rss": self.peak_job_rss,
            "peak_process_rss": self.peak_process_rss,
            "processes_seen": self.census,
            "slowest": [
                {
                    "file": job.file,
                    "kind": job.kind,
                    "tool": job.tool,
                    "seconds": job.seconds,
                    "peak_rss": job.peak_rss,
                }
                for job in self.slowest
            ],
        }


# A run this short that never showed work in progress had nothing to do.
NO_OP_S = 5.0


@dataclass(frozen=True)
class EarlierRun:
    """A finished earlier build with the same ETA key: how long it took and its progress curve."""

    build_id: int
    duration_s: float
    curve: tuple[tuple[float, float], ...]
    """(seconds since start, fraction done so far) per sample, in time order; never falls."""
    ran_steps: bool = False
    """Its log counted finished steps (ninja's `[f/t]`, Nix's built derivations)."""

    def did_work(self) -> bool:
        """Whether it built something: it took longer than a no-op could, its log counted
        finished steps, or its progress was seen below complete ("ninja: no work to do" and a
        Nix build found in the store did none of these, and say nothing about how long
        building takes)."""
        if self.duration_s >= NO_OP_S or self.ran_steps:
            return True
        return any(fraction < 1.0 for _, fraction in self.curve) and self.duration_s >= 1.0


@dataclass(frozen=True)
class EdgeRow:
    """One exact edge of a build as stored: epoch start and end, from `.ninja_log`."""

    outputs: tuple[str, ...]
    started: float
    ended: float
    session: int
    command_hash: str
    rule: str | None = None
    deps: tuple[str, ...] | None = None
    """The executed edges (first outputs) it waited for; None when the graph was not read."""
    peak_rss: int | None = None
    """Sampled: the most RSS its compiler held at a 1 Hz sample; None when never sampled."""
    cpu_s: float | None = None
    """Sampled: CPU its compiler's processes used, at least (their last samples' CPU times)."""


@dataclass(frozen=True)
class BuildTarget:
    """One target of one matrix build, as the history keeps it (workbench.remote)."""

    name: str
    attr: str
    drv_path: str
    out_path: str
    host: str
    outcome: str  # built, failed, in store (skipped: resume), not built (the build ended first)
    tried_on: str  # hosts tried before the one that built it, comma-separated
    started: float | None
    ended: float | None
    nar_size: int | None
    closure_size: int | None
    first_error: str

    def to_json(self) -> dict[str, Any]:
        """The row as JSON (`--json`, the matrix screen)."""
        return asdict(self)


@dataclass(frozen=True)
class JobMemoryPeak:
    """The largest compile job an earlier build measured."""

    build_id: int
    ended: float | None
    peak_rss: int
    file: str | None
    tool: str
    nvcc_threads: int

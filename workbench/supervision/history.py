"""The build history: one SQLite database (WAL) in the state directory.

Tables:
- `builds`: one row per build: what ran (name, backend, variant, argv, cwd, checkout, settings,
  jobs), its state (`starting` → `running` → `stopping` → a final state), the supervisor's and
  the build's PIDs, start, end, duration, exit status, signal, a note for the user ("killed
  (OOM?) while compiling ..."), and the live view (`progress`, `live`: JSON the supervisor
  rewrites about once a second for `status` and `attach`).
- `samples`: the whole build once a second (CPU, RSS, memory available, jobs, progress).
- `measurements`: what one build measured (wall time, CPU, peaks, most jobs at once, which
  processes were seen), written when it ends.
- `jobs`: every compile and link job the sampler saw (file, kind, tool, seconds, peak RSS).
- `derivations`: every Nix derivation built, with start and end.
- `edges`: every edge ninja ran, timed exactly from `.ninja_log` (epoch start and end), with the
  executed edges it waited for (from the ninja graph) and its sampled peak RSS when seen.

Writers are the supervisors (a few short transactions a second each) and the CLI (a row when a
build is created, a state change when one is lost); readers never block them (WAL). Every
connection waits up to 10 s for a lock instead of failing at once.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.progress.live_view import LiveView, ProgressView
from workbench.supervision import private_state

DB_NAME = "history.sqlite3"
SCHEMA_VERSION = 4  # 4: build_targets (one row per target of a matrix build)
# Columns added after a table was first created: (table, column, declaration). A history of an
# older schema gets them on opening (ALTER TABLE ... ADD COLUMN), so adding one is one line here.
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # What outlived the build (daemons, orphans): [{"pid", "started", "name"}], for `stop`.
    ("builds", "outlived", "TEXT"),
    # The build's .ninja_log, when one was found (its edges are in `edges`).
    ("builds", "ninja_log", "TEXT"),
    # What was built (build tree and targets): the ETA matches earlier runs by this, not by name.
    ("builds", "work_key", "TEXT"),
    # What a successful Nix/Flox build produced: out-links, store paths, NAR and closure sizes,
    # CUDA architectures inside (workbench.artefacts.sizes).
    ("builds", "artefacts", "TEXT"),
    # Sampled CPU seconds of an edge's compiler processes (a lower bound), beside its peak RSS.
    ("edges", "cpu_s", "REAL"),
    # Supervisors that were lost and replaced while the build ran (keeper.py): [{"lost_pid",
    # "lost_at", "adopted_at", "pid", "unobserved_s"}]; [] or NULL when its first one saw it all.
    ("builds", "adopted", "TEXT"),
)

STARTING = "starting"
RUNNING = "running"
STOPPING = "stopping"
SUCCEEDED = "succeeded"
FAILED = "failed"
KILLED = "killed"
STOPPED = "stopped"
LOST = "lost"
ACTIVE_STATES = (STARTING, RUNNING, STOPPING)
# A running build's supervisor reports at least once a second (a sample); after this long
# without a report it is "not responding" (stopped, starved, or unable to write the history),
# and what it last reported (an ETA above all) is no longer shown as live.
REPORT_STALE_S = 5.0
FINAL_STATES = (SUCCEEDED, FAILED, KILLED, STOPPED, LOST)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS builds (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    backend TEXT NOT NULL,
    variant TEXT,
    target TEXT,
    argv TEXT NOT NULL,
    cwd TEXT NOT NULL,
    checkout TEXT NOT NULL,
    settings TEXT NOT NULL,
    jobs INTEGER,
    eta_key TEXT NOT NULL,
    nix INTEGER NOT NULL,
    forced INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL,
    host TEXT,
    user TEXT,
    created REAL NOT NULL,
    started REAL,
    ended REAL,
    duration_s REAL,
    exit_status INTEGER,
    signal INTEGER,
    note TEXT,
    log_path TEXT NOT NULL,
    supervisor_pid INTEGER,
    supervisor_started REAL,
    build_pid INTEGER,
    pgid INTEGER,
    lines INTEGER NOT NULL DEFAULT 0,
    progress TEXT,
    live TEXT,
    updated REAL,
    stop_requested REAL,
    stop_grace REAL
);
CREATE INDEX IF NOT EXISTS builds_state ON builds(state);
CREATE INDEX IF NOT EXISTS builds_eta ON builds(eta_key, state);
CREATE INDEX IF NOT EXISTS builds_name ON builds(name, state);
CREATE TABLE IF NOT EXISTS samples (
    build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    t REAL NOT NULL,
    cpu_percent REAL NOT NULL,
    cpu_cores REAL NOT NULL,
    cpu_seconds REAL NOT NULL,
    rss INTEGER NOT NULL,
    memory_available INTEGER NOT NULL,
    processes INTEGER NOT NULL,
    compile_jobs INTEGER NOT NULL,
    cuda_jobs INTEGER NOT NULL,
    link_jobs INTEGER NOT NULL,
    fraction REAL
);
CREATE INDEX IF NOT EXISTS samples_build ON samples(build_id, t);
CREATE TABLE IF NOT EXISTS measurements (
    build_id INTEGER PRIMARY KEY REFERENCES builds(id) ON DELETE CASCADE,
    wall_s REAL NOT NULL,
    cpu_seconds REAL NOT NULL,
    cpu_utilisation REAL NOT NULL,
    cpus INTEGER NOT NULL,
    peak_rss INTEGER NOT NULL,
    min_memory_available INTEGER NOT NULL,
    memory_total INTEGER NOT NULL,
    most_jobs INTEGER NOT NULL,
    samples INTEGER NOT NULL,
    peak_job_rss TEXT NOT NULL,
    peak_process_rss TEXT NOT NULL,
    census TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    file TEXT,
    kind TEXT NOT NULL,
    tool TEXT NOT NULL,
    seconds REAL NOT NULL,
    peak_rss INTEGER NOT NULL,
    started REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_build ON jobs(build_id, kind, peak_rss);
CREATE TABLE IF NOT EXISTS edges (
    build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    output TEXT NOT NULL,
    outputs TEXT,
    started REAL NOT NULL,
    ended REAL NOT NULL,
    session INTEGER NOT NULL,
    command_hash TEXT NOT NULL,
    rule TEXT,
    deps TEXT,
    peak_rss INTEGER
);
CREATE INDEX IF NOT EXISTS edges_build ON edges(build_id);
CREATE TABLE IF NOT EXISTS derivations (
    build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    drv_path TEXT NOT NULL,
    name TEXT NOT NULL,
    started REAL NOT NULL,
    ended REAL NOT NULL,
    failed INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS build_targets (
    build_id INTEGER NOT NULL REFERENCES builds(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    attr TEXT NOT NULL,
    drv_path TEXT,
    out_path TEXT,
    host TEXT,
    outcome TEXT NOT NULL,
    tried_on TEXT,
    started REAL,
    ended REAL,
    nar_size INTEGER,
    closure_size INTEGER,
    first_error TEXT,
    PRIMARY KEY (build_id, name)
);
"""


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


class HistoryError(WorkbenchError):
    """The history database cannot be opened or has an unknown layout."""


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
    state: str
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
    """One target of one matrix build, as the history keeps it (workbench.hosts)."""

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


def database_path(state_directory: Path) -> Path:
    """Where the history lives in a state directory."""
    return state_directory / DB_NAME


def build_directory(state_directory: Path, build_id: int) -> Path:
    """The per-build folder: `build.log` and the supervisor's own `supervisor.log`."""
    return state_directory / "builds" / str(build_id)


_COLUMNS = (
    "id, name, backend, variant, target, argv, cwd, checkout, settings, jobs, eta_key, nix, "
    "forced, state, host, user, created, started, ended, duration_s, exit_status, signal, note, "
    "log_path, supervisor_pid, supervisor_started, build_pid, pgid, lines, progress, live, "
    "updated, stop_requested, stop_grace, outlived, adopted"
)


def _loads(text: str | None, default: Any) -> Any:
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def _record(row: Sequence[Any]) -> BuildRecord:
    (
        id_,
        name,
        backend,
        variant,
        target,
        argv,
        cwd,
        checkout,
        settings,
        jobs,
        eta_key,
        nix,
        forced,
        state,
        host,
        user,
        created,
        started,
        ended,
        duration_s,
        exit_status,
        signal,
        note,
        log_path,
        supervisor_pid,
        supervisor_started,
        build_pid,
        pgid,
        lines,
        progress,
        live,
        updated,
        stop_requested,
        stop_grace,
        outlived,
        adopted,
    ) = row
    return BuildRecord(
        id=id_,
        name=name,
        backend=backend,
        variant=variant,
        target=target,
        argv=tuple(_loads(argv, [])),
        cwd=cwd,
        checkout=checkout,
        settings=_loads(settings, {}),
        jobs=jobs,
        eta_key=eta_key,
        nix=bool(nix),
        forced=bool(forced),
        state=state,
        host=host,
        user=user,
        created=created,
        started=started,
        ended=ended,
        duration_s=duration_s,
        exit_status=exit_status,
        signal=signal,
        note=note,
        log_path=log_path,
        supervisor_pid=supervisor_pid,
        supervisor_started=supervisor_started,
        build_pid=build_pid,
        pgid=pgid,
        lines=lines,
        progress=_loads(progress, {}),
        live=_loads(live, {}),
        updated=updated,
        stop_requested=stop_requested,
        stop_grace=stop_grace,
        outlived=tuple(_loads(outlived, [])),
        adopted=tuple(_loads(adopted, [])),
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _disk_full(directory: Path) -> bool:
    """Whether the file system holding `directory` has no block left (SQLite reports a WAL
    that cannot grow as a "disk I/O error", not as SQLITE_FULL)."""
    try:
        return os.statvfs(directory).f_bavail == 0
    except OSError:
        return False


def _advice(path: Path, exc: sqlite3.Error) -> str:
    """What a SQLite failure means for the user, and what to do about it."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if (
        name == "SQLITE_FULL"
        or "disk is full" in str(exc)
        or (name.startswith("SQLITE_IOERR") and _disk_full(path.parent))
    ):
        return (
            f"{path}: the disk holding the build history is full ({exc}); free space there "
            f"(`df -h {path.parent}`) and run the command again, or choose another --state-dir"
        )
    if name.startswith("SQLITE_READONLY"):
        return (
            f"{path}: the build history is read-only ({exc}); make it and its folder writable "
            f"(`chmod u+w {path} {path.parent}`), or choose another --state-dir"
        )
    damaged = "malformed" in str(exc) or "not a database" in str(exc)
    if name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or damaged:
        return (
            f"{path}: the build history is damaged ({exc}); move it aside "
            f"(`mv {path} {path}.damaged`) to start a new one: the logs in builds/ are kept "
            "and new build ids continue after them"
        )
    if name.startswith("SQLITE_IOERR"):
        return f"{path}: the disk reported an error reading or writing the build history ({exc})"
    if name in ("SQLITE_BUSY", "SQLITE_LOCKED"):
        return (
            f"{path}: the build history stayed locked by another process for 10 s ({exc}); "
            "try again"
        )
    return f"{path}: the build history cannot be used ({exc}); choose another --state-dir"


class _Rows:
    """A statement's rows, read at once so that a damaged page fails inside `_Connection`."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self.rows = cursor.fetchall()
        self.lastrowid = cursor.lastrowid
        self.rowcount = cursor.rowcount

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[Any]:
        return self.rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)


class _Connection:
    """The database connection; every SQLite failure becomes a HistoryError that says what to do
    (a full disk, a read-only or damaged file), never a traceback."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self.connection = connection

    def execute(self, statement: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> _Rows:
        try:
            return _Rows(self.connection.execute(statement, parameters))
        except sqlite3.Error as exc:
            raise HistoryError(_advice(self.path, exc)) from None

    def executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            self.connection.executemany(statement, rows)
        except sqlite3.Error as exc:
            raise HistoryError(_advice(self.path, exc)) from None

    def close(self) -> None:
        self.connection.close()


def _highest_log_directory(builds: Path) -> int:
    """The highest N of an existing builds/N/ (0 if none)."""
    try:
        names = os.listdir(builds)
    except FileNotFoundError:
        return 0
    return max((int(name) for name in names if name.isdigit() and len(name) < 19), default=0)


class History:
    """The history database of one state directory. One instance per thread."""

    def __init__(self, state_directory: Path) -> None:
        """Open (and create on first use) `history.sqlite3` in `state_directory`."""
        self.state_directory = private_state.ensure_state_directory(Path(state_directory))
        self.path = database_path(self.state_directory)
        try:
            # SQLite opens by name and follows links: the file (and the two it keeps beside
            # it in WAL mode) is checked first, made 0600 here so theirs follow its mode.
            private_state.check_private_file(self.path, create=True)
            for suffix in ("-wal", "-shm"):
                private_state.check_private_file(Path(f"{self.path}{suffix}"), create=False)
            connection = sqlite3.connect(str(self.path), timeout=10.0, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise HistoryError(
                f"{self.path}: cannot open the build history ({reason}); check that the state "
                "directory is writable, or choose another with --state-dir"
            ) from None
        self._db = _Connection(self.path, connection)
        self.full = ""
        """Why this history is open read-only ("" when it is not): its disk was full."""
        try:
            self._db.execute("PRAGMA busy_timeout = 10000")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except HistoryError as error:
            if "is full" not in str(error):
                raise
            self._open_read_only(str(error))

    def _open_read_only(self, why: str) -> None:
        """A full disk refused what even reading needs (WAL mode sizes its -shm file): open the
        history read-only, so that `status`, `history` and `logs` still answer; every write
        then fails saying the disk is full. With its -wal empty or gone (the last writer
        checkpointed it) the file alone is the whole history, read as immutable; otherwise
        (the -wal holds commits) the ordinary read-only mode reads them through the -shm."""
        with suppress(Exception):
            self._db.close()
        wal = Path(f"{self.path}-wal")
        try:
            complete = not wal.exists() or wal.stat().st_size == 0
            mode = "immutable=1" if complete else "mode=ro"
            connection = sqlite3.connect(
                f"file:{self.path}?{mode}", uri=True, timeout=10.0, isolation_level=None
            )
        except (OSError, sqlite3.Error):
            raise HistoryError(why) from None
        self._db = _Connection(self.path, connection)
        self._db.execute("SELECT count(*) FROM builds")  # raises the advice if even this fails
        self.full = why

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[_Connection]:
        if self.full:  # opened read-only: see `_open_read_only`
            raise HistoryError(self.full)
        # IMMEDIATE takes the write lock up front: two writers wait for each other (busy
        # timeout) instead of one failing half way with "database is locked".
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            with suppress(HistoryError):  # SQLite may have rolled back already (a full disk)
                self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _migrate(self) -> None:
        try:
            mode = self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            # NORMAL is safe with WAL: a power cut may lose the last transactions, never corrupt.
            self._db.execute("PRAGMA synchronous = NORMAL")
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            # A column added to ADDED_COLUMNS reaches a history of this schema version too
            # (it costs one PRAGMA per table here): no version bump is needed for one.
            if version == SCHEMA_VERSION and not self._missing_columns():
                return
            if version > SCHEMA_VERSION:
                raise HistoryError(
                    f"{self.path}: written by a newer workbench (schema {version}, this one "
                    f"knows {SCHEMA_VERSION}); upgrade, or use another --state-dir"
                )
            with self._write() as db:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                for table, column, declaration in ADDED_COLUMNS:
                    present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                    if column not in present:
                        db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except HistoryError:
            self._db.close()
            raise
        if mode.lower() != "wal":
            raise HistoryError(f"{self.path}: SQLite refused WAL mode (got {mode!r})")

    def _missing_columns(self) -> list[tuple[str, str, str]]:
        missing = []
        for table, column, declaration in ADDED_COLUMNS:
            present = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            if present and column not in present:
                missing.append((table, column, declaration))
        return missing

    # -- builds -------------------------------------------------------------------------------

    def create(self, build: NewBuild, now: float | None = None) -> BuildRecord:
        """Add a build in state `starting`; its log goes to builds/ID/build.log."""
        created = time.time() if now is None else now
        builds = private_state.private_directory(self.state_directory / "builds")
        with self._write() as db:
            # A history that was moved aside (or lost) starts again at 1, but the logs of its
            # builds are still in builds/N/: ids continue after the highest one, and the new
            # build's folder is made here, exclusively, so no build ever writes into another's.
            last = db.execute("SELECT max(id) FROM builds").fetchone()[0] or 0
            build_id = max(last, _highest_log_directory(builds)) + 1
            while True:
                try:
                    private_state.make_directory(build_directory(self.state_directory, build_id))
                    break
                except FileExistsError:
                    build_id += 1
                except OSError as exc:
                    raise private_state.StateError(
                        f"{builds}: cannot create the folder of build #{build_id} "
                        f"({exc.strerror}); free space there or choose another --state-dir"
                    ) from None
            log_path = build_directory(self.state_directory, build_id) / "build.log"
            db.execute(
                "INSERT INTO builds (id, name, backend, variant, target, argv, cwd, checkout, "
                "settings, jobs, eta_key, nix, forced, state, host, user, created, log_path) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    build_id,
                    build.name,
                    build.backend,
                    build.variant,
                    build.target,
                    _dumps(list(build.argv)),
                    build.cwd,
                    build.checkout,
                    _dumps(build.settings),
                    build.jobs,
                    build.eta_key,
                    int(build.nix),
                    int(build.forced),
                    STARTING,
                    socket.gethostname(),
                    _user(),
                    created,
                    str(log_path),
                ),
            )
        return self.get(build_id)

    def get(self, build_id: int) -> BuildRecord:
        """The build with this id, or a WorkbenchError naming the ids there are."""
        row = self._db.execute(
            f"SELECT {_COLUMNS} FROM builds WHERE id = ?", (build_id,)
        ).fetchone()
        if row is None:
            first, last = self._db.execute("SELECT min(id), max(id) FROM builds").fetchone()
            known = f"ids go from {first} to {last}" if last else "the history is empty"
            raise WorkbenchError(
                f"no build #{build_id} in {self.path} ({known}); `workbench history` lists them"
            )
        return _record(row)

    def builds(
        self, states: Iterable[str] | None = None, limit: int | None = None
    ) -> list[BuildRecord]:
        """Builds, newest first, optionally only in the given states."""
        query = f"SELECT {_COLUMNS} FROM builds"
        params: list[Any] = []
        if states is not None:
            wanted = list(states)
            query += f" WHERE state IN ({', '.join('?' * len(wanted))})"
            params += wanted
        query += " ORDER BY id DESC"
        if limit is not None:
            query += " LIMIT ?"
            params.append(limit)
        return [_record(row) for row in self._db.execute(query, params)]

    def active(self) -> list[BuildRecord]:
        """Builds that have not ended, newest first."""
        return self.builds(ACTIVE_STATES)

    def set_supervisor(self, build_id: int, pid: int, started: float) -> None:
        """Record the supervisor's PID and start time (its identity, against PID reuse), unless
        the supervisor recorded its own: the process the CLI started forks, and goes on as the
        build's keeper (keeper.py), while its child supervises and says so (`claim_supervisor`).
        """
        with self._write() as db:
            db.execute(
                "UPDATE builds SET supervisor_pid = ?, supervisor_started = ? "
                "WHERE id = ? AND supervisor_pid IS NULL",
                (pid, started, build_id),
            )

    def claim_supervisor(
        self, build_id: int, pid: int, started: float, adopted: dict[str, Any] | None = None
    ) -> None:
        """The supervisor records itself; `adopted`: it took over a running build whose
        supervisor was lost (appended to `adopted`)."""
        with self._write() as db:
            db.execute(
                "UPDATE builds SET supervisor_pid = ?, supervisor_started = ? WHERE id = ?",
                (pid, started, build_id),
            )
            if adopted is not None:
                row = db.execute("SELECT adopted FROM builds WHERE id = ?", (build_id,)).fetchone()
                entries = _loads(row[0] if row else None, [])
                entries.append(adopted)
                db.execute(
                    "UPDATE builds SET adopted = ? WHERE id = ?", (_dumps(entries), build_id)
                )

    def mark_running(self, build_id: int, build_pid: int, pgid: int, started: float) -> None:
        """The build command runs now."""
        with self._write() as db:
            db.execute(
                "UPDATE builds SET state = ?, build_pid = ?, pgid = ?, started = ?, updated = ? "
                "WHERE id = ? AND state = ?",
                (RUNNING, build_pid, pgid, started, started, build_id, STARTING),
            )

    def update_live(
        self,
        build_id: int,
        lines: int,
        progress: dict[str, Any],
        live: dict[str, Any] | None = None,
        sample: Sampled | None = None,
        state: str | None = None,
    ) -> None:
        """The supervisor's periodic write: progress, live view, one sample, in one transaction."""
        now = time.time()
        with self._write() as db:
            if live is None:
                db.execute(
                    "UPDATE builds SET lines = ?, progress = ?, updated = ? WHERE id = ?",
                    (lines, _dumps(progress), now, build_id),
                )
            else:
                db.execute(
                    "UPDATE builds SET lines = ?, progress = ?, live = ?, updated = ? WHERE id = ?",
                    (lines, _dumps(progress), _dumps(live), now, build_id),
                )
            if state is not None:
                db.execute(
                    "UPDATE builds SET state = ? WHERE id = ? AND state IN (?, ?, ?)",
                    (state, build_id, *ACTIVE_STATES),
                )
            if sample is not None:
                db.execute(
                    "INSERT INTO samples VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        build_id,
                        sample.t,
                        sample.cpu_percent,
                        sample.cpu_cores,
                        sample.cpu_seconds,
                        sample.rss,
                        sample.memory_available,
                        sample.processes,
                        sample.compile_jobs,
                        sample.cuda_jobs,
                        sample.link_jobs,
                        sample.fraction,
                    ),
                )

    def request_stop(self, build_id: int, grace_s: float) -> None:
        """Tell the supervisor how long to wait between TERM and KILL (it reads this on TERM)."""
        with self._write() as db:
            db.execute(
                "UPDATE builds SET stop_requested = ?, stop_grace = ? WHERE id = ?",
                (time.time(), grace_s, build_id),
            )

    def finish(
        self,
        build_id: int,
        state: str,
        ended: float,
        duration_s: float | None,
        exit_status: int | None,
        signal: int | None,
        note: str | None,
        lines: int,
        progress: dict[str, Any],
        only_active: bool = False,
    ) -> None:
        """The build ended: its final state, exit status or signal, and duration.

        `only_active`: unless the row says it ended already (a reader recording the outcome a
        supervisor kept beside the log, outcome.py)."""
        unless = (
            f" AND state IN ({', '.join(repr(s) for s in ACTIVE_STATES)})" if only_active else ""
        )
        with self._write() as db:
            db.execute(
                "UPDATE builds SET state = ?, ended = ?, duration_s = ?, exit_status = ?, "
                "signal = ?, note = ?, lines = ?, progress = ?, updated = ? WHERE id = ?" + unless,
                (
                    state,
                    ended,
                    duration_s,
                    exit_status,
                    signal,
                    note,
                    lines,
                    _dumps(progress),
                    ended,
                    build_id,
                ),
            )

    def record_artefacts(self, build_id: int, artefacts: dict[str, Any]) -> None:
        """What the build produced (workbench.artefacts.sizes.Artefacts.to_json())."""
        with self._write() as db:
            db.execute(
                "UPDATE builds SET artefacts = ? WHERE id = ?", (_dumps(artefacts), build_id)
            )

    def artefacts(self, build_id: int) -> dict[str, Any] | None:
        """The recorded artefacts of a build, or None (not a Nix build, failed, or older)."""
        row = self._db.execute("SELECT artefacts FROM builds WHERE id = ?", (build_id,)).fetchone()
        return _loads(row[0], None) if row else None

    def mark_lost(self, build_id: int, note: str, now: float | None = None) -> bool:
        """Mark a build whose supervisor vanished; False if it ended meanwhile (nothing done)."""
        ended = time.time() if now is None else now
        with self._write() as db:
            cursor = db.execute(
                "UPDATE builds SET state = ?, note = ?, ended = ?, "
                "duration_s = CASE WHEN started IS NULL THEN NULL ELSE ? - started END "
                f"WHERE id = ? AND state IN ({', '.join('?' * len(ACTIVE_STATES))})",
                (LOST, note, ended, ended, build_id, *ACTIVE_STATES),
            )
            return cursor.rowcount == 1

    def set_outlived(
        self, build_id: int, members: Iterable[dict[str, Any]], note: str | None = None
    ) -> None:
        """Record the processes that outlived a build, and with `note` its note that says so
        (or says so no more)."""
        with self._write() as db:
            db.execute(
                "UPDATE builds SET outlived = ? WHERE id = ?", (_dumps(list(members)), build_id)
            )
            if note is not None:
                db.execute("UPDATE builds SET note = ? WHERE id = ?", (note or None, build_id))

    # -- measurements -------------------------------------------------------------------------

    def record_measurements(
        self,
        build_id: int,
        measured: Measured,
        jobs: Iterable[JobRow],
        derivations: Iterable[tuple[str, str, float, float, bool]] = (),
    ) -> None:
        """Store what a build measured, its jobs and its derivations (once, when it ends)."""
        with self._write() as db:
            db.execute(
                "INSERT OR REPLACE INTO measurements VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    build_id,
                    measured.wall_s,
                    measured.cpu_seconds,
                    measured.cpu_utilisation,
                    measured.cpus,
                    measured.peak_rss,
                    measured.min_memory_available,
                    measured.memory_total,
                    measured.most_jobs,
                    measured.samples,
                    _dumps(measured.peak_job_rss),
                    _dumps(measured.peak_process_rss),
                    _dumps(measured.census),
                ),
            )
            db.execute("DELETE FROM jobs WHERE build_id = ?", (build_id,))
            db.executemany(
                "INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    (build_id, job.file, job.kind, job.tool, job.seconds, job.peak_rss, job.started)
                    for job in jobs
                ),
            )
            db.execute("DELETE FROM derivations WHERE build_id = ?", (build_id,))
            db.executemany(
                "INSERT INTO derivations VALUES (?, ?, ?, ?, ?, ?)",
                ((build_id, path, name, s, e, int(f)) for path, name, s, e, f in derivations),
            )

    def measured(self, build_id: int, slowest: int = 10) -> Measured | None:
        """What a build measured, with its `slowest` slowest compile jobs; None if nothing."""
        row = self._db.execute(
            "SELECT wall_s, cpu_seconds, cpu_utilisation, cpus, peak_rss, min_memory_available, "
            "memory_total, most_jobs, samples, peak_job_rss, peak_process_rss, census "
            "FROM measurements WHERE build_id = ?",
            (build_id,),
        ).fetchone()
        if row is None:
            return None
        jobs = [
            JobRow(*job)
            for job in self._db.execute(
                "SELECT file, kind, tool, seconds, peak_rss, started FROM jobs "
                "WHERE build_id = ? AND kind IN ('compiler', 'cuda') "
                "ORDER BY seconds DESC, peak_rss DESC LIMIT ?",
                (build_id, slowest),
            )
        ]
        return Measured(
            build_id,
            *row[:9],
            peak_job_rss=_loads(row[9], {}),
            peak_process_rss=_loads(row[10], {}),
            census=_loads(row[11], []),
            slowest=jobs,
        )

    def jobs(self, build_id: int) -> list[JobRow]:
        """Every job of a build, slowest first."""
        return [
            JobRow(*row)
            for row in self._db.execute(
                "SELECT file, kind, tool, seconds, peak_rss, started FROM jobs "
                "WHERE build_id = ? ORDER BY seconds DESC",
                (build_id,),
            )
        ]

    def samples(self, build_id: int) -> list[Sampled]:
        """A build's samples in time order."""
        return [
            Sampled(*row)
            for row in self._db.execute(
                "SELECT t, cpu_percent, cpu_cores, cpu_seconds, rss, memory_available, processes, "
                "compile_jobs, cuda_jobs, link_jobs, fraction FROM samples WHERE build_id = ? "
                "ORDER BY t",
                (build_id,),
            )
        ]

    def derivations(self, build_id: int) -> list[tuple[str, str, float, float, bool]]:
        """(drv path, name, started, ended, failed) of every derivation a build built."""
        return [
            (path, name, started, ended, bool(failed))
            for path, name, started, ended, failed in self._db.execute(
                "SELECT drv_path, name, started, ended, failed FROM derivations "
                "WHERE build_id = ? ORDER BY started",
                (build_id,),
            )
        ]

    # -- pushes: where a build's outputs were copied (workbench push) ---------------------------

    _PUSHES = (
        "CREATE TABLE IF NOT EXISTS pushes (build_id INTEGER NOT NULL REFERENCES builds(id) "
        "ON DELETE CASCADE, output TEXT NOT NULL, store TEXT NOT NULL, pushed REAL NOT NULL, "
        "push_build INTEGER, signed_by TEXT)"
    )

    def record_pushes(
        self,
        build_id: int,
        outputs: Iterable[str],
        store: str,
        push_build: int | None,
        signed_by: str | None,
        now: float | None = None,
    ) -> None:
        """That `outputs` of build `build_id` (with their closures) are now in `store`."""
        when = time.time() if now is None else now
        with self._write() as db:
            db.execute(self._PUSHES)  # made on first use: older histories have no such table
            db.executemany(
                "INSERT INTO pushes VALUES (?, ?, ?, ?, ?, ?)",
                ((build_id, output, store, when, push_build, signed_by) for output in outputs),
            )

    def pushes(self, build_id: int) -> list[Push]:
        """Where each output of a build was pushed, oldest first."""
        exists = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pushes'"
        ).fetchone()
        if not exists:
            return []
        return [
            Push(output, store, pushed, push_build, signed_by)
            for output, store, pushed, push_build, signed_by in self._db.execute(
                "SELECT output, store, pushed, push_build, signed_by FROM pushes "
                "WHERE build_id = ? ORDER BY pushed",
                (build_id,),
            )
        ]

    # -- what earlier builds tell ------------------------------------------------------------

    def last_derivation_times(self, names: Iterable[str]) -> dict[str, tuple[float, int]]:
        """Derivation name -> (seconds, build id) of its latest successful build here."""
        wanted = list(dict.fromkeys(names))
        found: dict[str, tuple[float, int]] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for name, seconds, build_id in self._db.execute(
                "SELECT name, ended - started, build_id FROM derivations "
                f"WHERE failed = 0 AND name IN ({marks}) ORDER BY ended",
                chunk,
            ):
                found[name] = (float(seconds), int(build_id))  # the latest one wins
        return found

    def earlier_runs(self, eta_key: str, before_id: int, limit: int = 5) -> list[EarlierRun]:
        """The latest `limit` successful builds with this ETA key (same target and settings)
        that did work: no-ops are passed over before the limit counts, so a streak of them
        (an iterate loop's unchanged cycles) never pushes the real builds out."""
        runs: list[EarlierRun] = []
        rows = self._db.execute(
            "SELECT id, started, duration_s, progress FROM builds "
            "WHERE eta_key = ? AND id < ? AND state = ? AND duration_s IS NOT NULL "
            "ORDER BY id DESC",
            (eta_key, before_id, SUCCEEDED),
        )  # read lazily: only as far back as it takes to find `limit` runs that did work
        for build_id, started, duration, progress in rows:
            # A Nix build that found everything in the store took seconds: it says nothing
            # about how long building takes.
            final = ProgressView.from_json(_loads(progress, {}))
            if final.nix and not final.done:
                continue
            ran_steps = bool(final.done or (final.step is not None and final.step.done))
            curve: list[tuple[float, float]] = []
            reached = 0.0
            for t, fraction in self._db.execute(
                "SELECT t, fraction FROM samples WHERE build_id = ? AND fraction IS NOT NULL "
                "ORDER BY t",
                (build_id,),
            ):
                # Kept monotonic (a ninja total that grows makes the fraction dip) so the ETA
                # can search it by bisection.
                reached = max(reached, fraction)
                curve.append((t - started, reached))
            run = EarlierRun(build_id, duration, tuple(curve), ran_steps)
            if not run.did_work():
                continue
            runs.append(run)
            if len(runs) == limit:
                break
        return runs

    def job_memory_peaks(self, name: str, kind: str, limit: int = 5) -> list[JobMemoryPeak]:
        """Per recent finished build called `name`: its largest job of `kind`, largest first."""
        peaks: list[JobMemoryPeak] = []
        rows = self._db.execute(
            "SELECT id, ended, settings FROM builds WHERE name = ? AND state IN (?, ?, ?) "
            "ORDER BY id DESC LIMIT ?",
            (name, SUCCEEDED, FAILED, KILLED, limit),
        ).fetchall()
        for build_id, ended, settings in rows:
            job = self._db.execute(
                "SELECT file, tool, peak_rss FROM jobs WHERE build_id = ? AND kind = ? "
                "ORDER BY peak_rss DESC LIMIT 1",
                (build_id, kind),
            ).fetchone()
            if job is None:
                continue
            threads = _loads(settings, {}).get("nvcc_threads") or 1
            peaks.append(JobMemoryPeak(build_id, ended, job[2], job[0], job[1], int(threads)))
        peaks.sort(key=lambda peak: -peak.peak_rss)
        return peaks

    # -- matrix builds' targets (workbench.hosts) -------------------------------------------------

    def record_targets(self, build_id: int, targets: Iterable[BuildTarget]) -> None:
        """Store (or replace) the per-target rows of one matrix build, in one transaction."""
        fields = [f.name for f in dataclasses.fields(BuildTarget)]
        with self._write() as db:
            db.execute("DELETE FROM build_targets WHERE build_id = ?", (build_id,))
            db.executemany(
                f"INSERT INTO build_targets (build_id, {', '.join(fields)}) "
                f"VALUES (?, {', '.join('?' for _ in fields)})",
                [(build_id, *dataclasses.astuple(target)) for target in targets],
            )

    def targets(self, build_id: int) -> list[BuildTarget]:
        """The per-target rows stored for a build, in the order stored (empty if none)."""
        fields = [f.name for f in dataclasses.fields(BuildTarget)]
        rows = self._db.execute(
            f"SELECT {', '.join(fields)} FROM build_targets WHERE build_id = ? ORDER BY rowid",
            (build_id,),
        ).fetchall()
        return [BuildTarget(*row) for row in rows]

    # -- exact edges (workbench.analysis) -------------------------------------------------------

    def record_edges(
        self, build_id: int, ninja_log: str | None, edges: Iterable[EdgeRow], work_key: str | None
    ) -> None:
        """Store a build's exact edges (replacing any stored before) and where they came from."""
        with self._write() as db:
            db.execute(
                "UPDATE builds SET ninja_log = ?, work_key = ? WHERE id = ?",
                (ninja_log, work_key, build_id),
            )
            db.execute("DELETE FROM edges WHERE build_id = ?", (build_id,))
            db.executemany(
                "INSERT INTO edges (build_id, output, outputs, started, ended, session, "
                "command_hash, rule, deps, peak_rss, cpu_s) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    (
                        build_id,
                        edge.outputs[0],
                        _dumps(list(edge.outputs)) if len(edge.outputs) > 1 else None,
                        edge.started,
                        edge.ended,
                        edge.session,
                        edge.command_hash,
                        edge.rule,
                        None if edge.deps is None else _dumps(list(edge.deps)),
                        edge.peak_rss,
                        edge.cpu_s,
                    )
                    for edge in edges
                ),
            )

    def edges(self, build_id: int) -> list[EdgeRow]:
        """A build's exact edges in start order (empty when no ninja log was found)."""
        rows = self._db.execute(
            "SELECT output, outputs, started, ended, session, command_hash, rule, deps, peak_rss, "
            "cpu_s FROM edges WHERE build_id = ? ORDER BY started, ended",
            (build_id,),
        )
        return [
            EdgeRow(
                outputs=tuple(_loads(outputs, [output])),
                started=started,
                ended=ended,
                session=session,
                command_hash=command_hash,
                rule=rule,
                deps=None if deps is None else tuple(_loads(deps, [])),
                peak_rss=peak_rss,
                cpu_s=cpu_s,
            )
            for (
                output,
                outputs,
                started,
                ended,
                session,
                command_hash,
                rule,
                deps,
                peak_rss,
                cpu_s,
            ) in rows
        ]

    def edge_build_info(self, build_id: int) -> tuple[str | None, str | None]:
        """(ninja_log, work_key) of a build."""
        row = self._db.execute(
            "SELECT ninja_log, work_key FROM builds WHERE id = ?", (build_id,)
        ).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def runs_of_work(self, work_key: str, before_id: int, limit: int = 10) -> list[int]:
        """The latest successful builds that built the same tree and targets, newest first."""
        return [
            row[0]
            for row in self._db.execute(
                "SELECT id FROM builds WHERE work_key = ? AND id < ? AND state = ? "
                "AND duration_s IS NOT NULL ORDER BY id DESC LIMIT ?",
                (work_key, before_id, SUCCEEDED, limit),
            )
        ]


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "?"

"""The build history store: `History`, one SQLite database (WAL) in the state directory.

Its tables are in `workbench.history.schema`, its rows in `workbench.history.records`.
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
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.history import private_state
from workbench.history.connection import Connection, HistoryError
from workbench.history.records import (
    ACTIVE_STATES,
    FAILED,
    KILLED,
    LOST,
    RUNNING,
    STARTING,
    SUCCEEDED,
    BuildRecord,
    BuildState,
    BuildTarget,
    EarlierRun,
    EdgeRow,
    JobMemoryPeak,
    JobRow,
    Measured,
    NewBuild,
    Push,
    Sampled,
)
from workbench.history.schema import ADDED_COLUMNS, DB_NAME, SCHEMA, SCHEMA_VERSION
from workbench.progress.live_view import ProgressView


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
        state=BuildState(state),
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
        self._db = Connection(self.path, connection)
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
        self._db = Connection(self.path, connection)
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
    def _write(self) -> Iterator[Connection]:
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
                for statement in SCHEMA.split(";"):
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
        state: BuildState | None = None,
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
                    "INSERT INTO samples (build_id, t, cpu_percent, cpu_cores, cpu_seconds, "
                    "rss, memory_available, processes, compile_jobs, cuda_jobs, link_jobs, "
                    "fraction, cpu_interval) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                        sample.cpu_interval,
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
        state: BuildState,
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
        active = ", ".join(repr(s.value) for s in ACTIVE_STATES)  # 'starting', ...
        unless = f" AND state IN ({active})" if only_active else ""
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
        # row[:9] fills the nine fields before these (the SELECT's order); mypy cannot count a
        # slice of a row, so it thinks the keywords might be given twice.
        return Measured(  # type: ignore[misc]
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
                "compile_jobs, cuda_jobs, link_jobs, fraction, cpu_interval FROM samples "
                "WHERE build_id = ? "
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

    # A push hosts.toml's push_to asks for after a build: claimed once (by the build's
    # supervisor, before the build's end is recorded), then the push build that does it (or why
    # none could start), so that nothing pushes a build twice and a follower finds the push.
    _PUSH_REQUESTS = (
        "CREATE TABLE IF NOT EXISTS push_requests (build_id INTEGER PRIMARY KEY REFERENCES "
        "builds(id) ON DELETE CASCADE, store TEXT NOT NULL, requested REAL NOT NULL, "
        "push_build INTEGER, note TEXT)"
    )

    def claim_push(self, build_id: int, store: str, now: float | None = None) -> bool:
        """Claim the push after build `build_id`: True for the one caller that claimed it."""
        when = time.time() if now is None else now
        with self._write() as db:
            db.execute(self._PUSH_REQUESTS)
            done = db.execute(
                "INSERT OR IGNORE INTO push_requests VALUES (?, ?, ?, NULL, NULL)",
                (build_id, store, when),
            )
            return done.rowcount == 1

    def push_started(self, build_id: int, push_build: int | None, note: str | None) -> None:
        """The claimed push's build (or, when none started, why not)."""
        with self._write() as db:
            db.execute(self._PUSH_REQUESTS)
            db.execute(
                "UPDATE push_requests SET push_build = ?, note = ? WHERE build_id = ?",
                (push_build, note, build_id),
            )

    def unstarted_push_claims(self) -> list[tuple[int, str, str | None]]:
        """(build id, store, note) of each claimed push not started yet and with no reason why
        not: a note is only a taker's mark there (`supervision.pushing.take_over_lost_claims`)."""
        exists = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'push_requests'"
        ).fetchone()
        if not exists:
            return []
        return [
            (int(row[0]), str(row[1]), row[2])
            for row in self._db.execute(
                "SELECT build_id, store, note FROM push_requests WHERE push_build IS NULL "
                "AND (note IS NULL OR note LIKE 'taken over by pid %') ORDER BY build_id"
            )
        ]

    def take_push_claim(self, build_id: int, seen_note: str | None, note: str) -> bool:
        """Take over an unstarted claimed push whose note is still `seen_note` (None: its
        claimant's): True for the one caller that took it."""
        with self._write() as db:
            db.execute(self._PUSH_REQUESTS)
            done = db.execute(
                "UPDATE push_requests SET note = ? WHERE build_id = ? AND push_build IS NULL "
                "AND note IS ?",
                (note, build_id, seen_note),
            )
            return done.rowcount == 1

    def push_request(self, build_id: int) -> tuple[str, int | None, str | None] | None:
        """(store, push build, note) of the push claimed after build `build_id`, else None."""
        exists = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'push_requests'"
        ).fetchone()
        if not exists:
            return None
        row = self._db.execute(
            "SELECT store, push_build, note FROM push_requests WHERE build_id = ?", (build_id,)
        ).fetchone()
        return None if row is None else (str(row[0]), row[1], row[2])

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

    # -- matrix builds' targets (workbench.remote) -------------------------------------------------

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

    def edge_seconds(self, build_id: int) -> list[tuple[str, float]]:
        """A build's edges as (first output, seconds), in no order: what another build's ETA
        reads of it (`LiveEta.find_other_tree`), without decoding the rest of each row
        (`edges`: 0.26 s a 12,000-edge build on the 2-core VM, this a tenth of it)."""
        return [
            (output, seconds)
            for output, seconds in self._db.execute(
                "SELECT output, ended - started FROM edges WHERE build_id = ?", (build_id,)
            )
        ]

    def last_edge_end(self, build_id: int) -> float | None:
        """When a build's last edge ended (epoch), None when it has none."""
        row = self._db.execute(
            "SELECT MAX(ended) FROM edges WHERE build_id = ?", (build_id,)
        ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

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

    def runs_of_other_work(self, work_key: str, before_id: int, limit: int = 10) -> list[int]:
        """For each other tree or targets built on this host (its latest 50 successful runs
        with edges), the run of it that ran the most edges (its full build, not a rebuild of
        one file); newest first, at most `limit`."""
        rows = self._db.execute(
            "SELECT b.id, b.work_key, (SELECT COUNT(*) FROM edges e WHERE e.build_id = b.id) "
            "FROM builds b WHERE b.work_key IS NOT NULL AND b.work_key != ? AND b.id < ? "
            "AND b.state = ? AND b.duration_s IS NOT NULL AND b.host IS ? "
            "ORDER BY b.id DESC LIMIT 50",
            (work_key, before_id, SUCCEEDED, socket.gethostname()),
        )
        fullest: dict[str, tuple[int, int]] = {}
        for build_id, key, edges in rows:
            if edges and edges > fullest.get(key, (0, 0))[0]:
                fullest[key] = (edges, build_id)
        return sorted((build_id for _, build_id in fullest.values()), reverse=True)[:limit]


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "?"

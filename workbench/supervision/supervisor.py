"""The process that owns one build: `python -m workbench.supervision.supervisor --build-id N`.

The CLI creates the build's history row, takes the checkout's lock and starts this process in
its own session and process group (stdin /dev/null, output to builds/N/supervisor.log), handing
it the lock's descriptor. Nothing ties it to the terminal: a SIGHUP from a dropped SSH link
cannot reach it, and `kill -9` of the CLI leaves it running. It then:

1. starts the build command in a session and process group of its own, stdout and stderr
   merged into one pipe, and becomes the child subreaper, so processes that the build orphans
   are re-parented to it and stay findable;
2. pumps the pipe into builds/N/build.log as it comes and feeds the lines to the progress
   tracker (`pipeline.LogPipeline`);
3. samples the build's processes once a second (`monitor.Sampler`, which also finds a
   nix-daemon's `nixbld*` builders), folds the samples into peaks (`monitor.PeakTracker`) and
   writes state, progress, the live view and one sample row to the history;
4. on SIGTERM (what `workbench stop` sends) ends the whole tree: TERM to the build's group and
   every process found, KILL after the grace period the stop asked for;
5. when the build ends, records exit status or signal, duration, the measurements and a note
   (an OOM kill is told apart: "killed (OOM?) while compiling X, peak Y GiB").

The log pump is the part that must never stop: if it did, the build would die of SIGPIPE on its
next write. So everything else (sampling, the database) is guarded, and a failure there is
written to supervisor.log and skipped, never allowed to end the loop. A full disk under the
state directory is the likeliest such failure: the pipeline counts the output it could not
write (`pipeline.OutputLoss`, kept in the build's progress as "output_lost" and in its note),
the database writes are skipped until there is room, and the build's final row is retried for a
while rather than lost.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.history import private_state
from workbench.history.connection import HistoryError
from workbench.history.records import (
    FAILED,
    STOPPING,
    SUCCEEDED,
    BuildRecord,
    EarlierRun,
    JobRow,
    Measured,
    Sampled,
)
from workbench.history.store import History, build_directory
from workbench.supervision import build_cgroup, ending, measuring, stopping, tree
from workbench.supervision.keeper import Link

if TYPE_CHECKING:
    from workbench.analysis.build_peaks import PeakTracker
    from workbench.logs.readable_map import ReadableMapWriter
    from workbench.monitor import Sample, Sampler
    from workbench.progress import Progress, ProgressTracker
    from workbench.supervision.live_eta import LiveEta
    from workbench.supervision.live_writer import LiveWriter
    from workbench.supervision.outcome import Outcome
    from workbench.supervision.pipeline import LogPipeline

# What follows the build (the progress tracker, the sampler, the ETA, the log pipeline and its
# readable form) is imported once the build has started, in `Supervisor._start_following` and
# the methods that run after it: importing it first put about 35 ms (a third of the supervisor's
# start) between `workbench iterate` and its build tool (benchmarks/iterate_cycle.py).

SAMPLE_INTERVAL_S = 1.0
# Progress reaches the history at most this often between samples: a few writes a second.
FLUSH_INTERVAL_S = 0.5
DEFAULT_GRACE_S = 10.0
# After the build's root process exits, processes it left behind may hold the pipe open;
# their output is still read for this long before the supervisor stops waiting for it.
DRAIN_S = 5.0
_PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031
_CENSUS_FILES = 5
# How long the build's final row is retried when the database cannot be written (a full disk):
# the build is over, so waiting costs nothing but the lock, and the row is what `status` reads.
FINISH_RETRY_S = 300.0
# The loop turns at least once a second; a longer pause means this process did not run (stopped
# with SIGSTOP, or starved): that time was not observed, and the note says so.
GAP_S = 3.0
FINISH_RETRY_EVERY_S = 2.0


def progress_json(
    progress: Progress, fraction: float | None, output_lost: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A progress snapshot as the history stores it (`progress.live_view.ProgressView`).

    `output_lost`: what the log pump could not write (`OutputLoss.to_json()`), when anything.
    """
    from workbench.progress.live_view import ProgressView

    return ProgressView.of(progress, fraction, output_lost).to_json()


def _readable(record: BuildRecord, log_size: int) -> tuple[ReadableMapWriter, tuple[int, int]]:
    """The writer of the log's readable form, and its two files (0600, never through links)."""
    from workbench.logs.readable_map import ReadableMapWriter, readable_paths

    readable_path, map_path = readable_paths(Path(record.log_path))
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    readable_fd = private_state.open_private(readable_path, flags)
    try:
        map_fd = private_state.open_private(map_path, flags)
    except BaseException:
        os.close(readable_fd)
        raise
    return ReadableMapWriter(readable_fd, map_fd, log_size), (readable_fd, map_fd)


class Census:
    """Which processes the build ran: per (kind, tool, user) a count and a few files."""

    def __init__(self) -> None:
        self._seen: dict[int, float] = {}
        self._groups: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.users: dict[int, str] = {}

    def add(self, sample: Sample) -> None:
        """Count the processes of a sample that were not seen before."""
        from workbench.monitor import procfs

        for process in sample.processes:
            if self._seen.get(process.pid) == process.started:
                continue
            self._seen[process.pid] = process.started
            uid = procfs.uid_of(process.pid)
            user = procfs.user_name(uid) if uid is not None else "?"
            self.users[process.pid] = user
            key = (process.kind, process.tool, user)
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = {
                    "kind": process.kind,
                    "tool": process.tool,
                    "user": user,
                    "count": 0,
                    "files": [],
                    "derivations": [],
                }
            group["count"] += 1
            files = group["files"]
            if process.file and len(files) < _CENSUS_FILES and process.file not in files:
                files.append(process.file)
            if process.derivation and process.derivation not in group["derivations"]:
                group["derivations"].append(process.derivation)

    def groups(self) -> list[dict[str, Any]]:
        """The census, most numerous first."""
        return sorted(self._groups.values(), key=lambda group: (-group["count"], group["tool"]))


def _oom_kills() -> int | None:
    """The OOM kills counted in this process's cgroup (v2 memory.events), None if unknown."""
    try:
        with open("/proc/self/cgroup") as handle:
            for line in handle:
                if line.startswith("0::"):
                    path = "/sys/fs/cgroup" + line[3:].strip()
                    break
            else:
                return None
        with open(os.path.join(path, "memory.events")) as handle:
            for line in handle:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class Supervisor:
    """Runs one build to its end; see the module docstring."""

    def __init__(self, history: History, record: BuildRecord, log: Callable[[str], None]) -> None:
        self.history = history
        self.record = record
        self.say = log
        # Made by `_start_following`, once the build has started.
        self.tracker: ProgressTracker
        self.peaks: PeakTracker
        self.eta: LiveEta
        self.live_writer: LiveWriter
        self.census = Census()
        self.sampler: Sampler | None = None
        self.last_sample: Sample | None = None
        self.earlier: list[EarlierRun] = []
        self.process: subprocess.Popen[bytes] | None = None
        self.root: tree.Member | None = None
        self.pgid: int | None = None
        self.started_wall = 0.0
        self.started_mono = 0.0
        self.root_status: int | None = None
        self.root_cpu_s: float | None = None
        self.stop_reason: str | None = None
        self.stop_phase: str | None = None
        self.kill_at: float | None = None
        self.signalled: dict[int, tree.Member] = {}
        self.stop_problems: list[str] = []
        self.errors: set[str] = set()
        self.pipeline: LogPipeline | None = None
        # The tree locks' descriptors: passed on to the build, so that the locks stay held
        # while any process of it lives, even after this supervisor (see lock.py).
        self.lock_fds: tuple[int, ...] = ()
        # The CLI's wake-up (control.wait_started): closed once the row says started or failed.
        self.started_fd: int | None = None
        self.outlived: list[tree.Member] = []
        self.cgroup: Path | None = None
        self._flushed_lines = -1
        self._flushed_lost = 0
        # Exact edges from the build's .ninja_log (workbench.analysis), when it has one.
        self.edge_recorder: Any = None
        self.cgroup_oom: Any = None
        # The keeper (keeper.py): this process's parent, which keeps the build when it dies.
        self.keeper: Link | None = None
        self.push_claimed = False  # this supervisor claimed the push hosts.toml asks for
        # The build's root: our child, or (adopted) the keeper's, which tells us its end.
        self.root_pid: int | None = None
        self.adopted_from: dict[str, Any] | None = None
        # Adopted, and the keeper died too: the build's end is known only by its absence.
        self.root_unknown = False
        from workbench.supervision.outcome import OutcomeFile

        # The outcome beside the log, for a history that cannot be written (outcome.py).
        self.outcome = OutcomeFile(
            history.state_directory,
            build_directory(history.state_directory, record.id),
            record.id,
            record.created,
        )
        self.samples_taken = 0
        self.samples_lost = 0
        self.gaps: list[tuple[float, float]] = []
        """(wall time it began, seconds) of each time this process did not run (GAP_S)."""
        self.ended_in_gap = 0.0
        """The length of the gap the build's root ended in (its end is known only within it)."""
        self._last_turn: float | None = None
        self.history_failure = ""
        """Why the history could not be written (the first such failure), "" while it could."""

    def _progress_json(self, progress: Progress, fraction: float | None) -> dict[str, Any]:
        loss = self.pipeline.loss if self.pipeline is not None else None
        return progress_json(progress, fraction, loss.to_json() if loss and loss.bytes else None)

    def _lost_bytes(self) -> int:
        return self.pipeline.loss.bytes if self.pipeline is not None else 0

    # -- guarded side work --------------------------------------------------------------------

    def _guarded(self, what: str, action: Callable[[], Any]) -> Any:
        try:
            return action()
        except HistoryError as error:  # a full disk, said in one line (no traceback)
            self._history_failed(error)
            if what not in self.errors:
                self.errors.add(what)
                self.say(f"{what} failed (carrying on without it): {error}")
            return None
        except Exception:  # the pump must go on whatever happens here; see the docstring
            if what not in self.errors:
                self.errors.add(what)
                self.say(f"{what} failed (carrying on without it):\n{traceback.format_exc()}")
            return None

    # -- main ---------------------------------------------------------------------------------

    def run(self) -> int:
        """Start the build, pump, sample, record; returns when the build has ended."""
        record = self.record
        self._claim(None)
        log_fd, wake_r, oom_before = self._prepare()
        self.edge_recorder = self._guarded(
            "finding the ninja log", lambda: measuring.start_edges(self.record)
        )
        self.cgroup_oom = self._guarded(
            "reading the memory cgroup", lambda: measuring.cgroup_oom_before(self.record)
        )

        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        with contextlib.suppress(OSError):
            fcntl.fcntl(out_w, _F_SETPIPE_SZ, _PIPE_SIZE)  # slack for bursts of output
        if self.keeper is not None:
            # Before the build can write: from now on a reader of the pipe outlives us.
            self.keeper.pipe(out_r)
        environment = dict(os.environ)
        # Python build scripts (ORT's build.py) block-buffer a pipe: their lines would arrive
        # minutes late without this.
        environment.setdefault("PYTHONUNBUFFERED", "1")
        # Every process of the build inherits this marker: `stop` finds by it what escaped the
        # group and session and was re-parented away (tree.marked).
        environment[tree.BUILD_MARKER] = record.log_path
        self.cgroup = self._guarded("making the build's cgroup", self._make_cgroup)
        inside = build_cgroup.entered(self.cgroup) if self.cgroup else contextlib.nullcontext()
        try:
            with inside:
                self.process = self._spawn(record, out_w, environment)
        except OSError as exc:
            os.close(out_w)
            message = f"cannot start {record.argv[0]}: {exc.strerror or exc} (in {record.cwd})"
            os.write(log_fd, f"workbench: {message}\n".encode())
            build_cgroup.remove(self.cgroup, Path(record.log_path))
            now = time.time()
            self.history.finish(record.id, FAILED, now, 0.0, None, None, message, 1, {})
            self._tell_started()
            return 1
        os.close(out_w)
        pid = self.process.pid
        self.root_pid = pid
        if self.keeper is not None:
            self.keeper.build(pid)
        self.pgid = pid  # start_new_session: the build leads its own session and group
        if self.cgroup is not None:
            self._guarded("checking the build's cgroup", lambda: self._check_cgroup(pid))
        self.started_wall = time.time()
        self.started_mono = time.monotonic()
        self.root = self._member(pid)
        try:
            self.history.mark_running(record.id, pid, pid, self.started_wall)
        except HistoryError as error:  # a full disk: its outcome is kept beside the log
            self._history_failed(error)
        self._tell_started()
        self.say(f"build #{record.id}: started pid {pid}: {record.argv}")
        return self._follow(pid, log_fd, out_r, wake_r, oom_before)

    def _prepare(self) -> tuple[int, int, int | None]:
        """The log's descriptor, the signals' wake-up pipe and the OOM count before the build."""
        # The build's folder was made (0700) when its row was; the log is 0600 and never
        # opened through a link planted in its place.
        log_fd = private_state.open_private(
            Path(self.record.log_path), os.O_WRONLY | os.O_CREAT | os.O_APPEND
        )
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake select() via wake_w
        if not tree.set_child_subreaper():
            self.say("could not become child subreaper: orphans of the build go to init")
        if not self.outcome.reserve():
            self.say(
                f"cannot reserve {self.outcome.path} (the disk is full?): the outcome goes "
                "to the history, or off the state disk"
            )
        return log_fd, wake_r, _oom_kills()

    def _claim(self, adopted: dict[str, Any] | None) -> None:
        """Record this process as the build's supervisor (the CLI knew only the keeper)."""
        import psutil

        started = psutil.Process().create_time()
        try:
            self.history.claim_supervisor(self.record.id, os.getpid(), started, adopted)
        except HistoryError as error:  # a full disk: the keeper's file keeps the build alive
            self._history_failed(error)

    def adopt(self, pipe_fd: int, lost_at: float) -> int:
        """Take over a running build whose supervisor was lost (started by its keeper, which
        holds the build's pipe, `pipe_fd`, and tells the build's end); returns when it ended."""
        record = self.record = self.history.get(self.record.id)
        if not record.active or record.build_pid is None or record.started is None:
            self.say(f"build #{record.id} is {record.state}: nothing to adopt")
            if not record.active:
                # Lost after recording the end and before starting the push it claimed: the
                # push is this process's to start (once: a command may have taken it first).
                from workbench.supervision.pushing import take_over_lost_claims

                self._guarded(
                    "starting the push its lost supervisor claimed",
                    lambda: take_over_lost_claims(self.history, self.say, only=record.id),
                )
            return 0
        now = time.time()
        last_seen = record.updated or record.started
        self.adopted_from = {
            "lost_pid": record.supervisor_pid,
            "lost_at": lost_at,
            "adopted_at": now,
            "pid": os.getpid(),
            "unobserved_s": round(max(0.0, now - last_seen), 3),
        }
        self._claim(self.adopted_from)
        log_fd, wake_r, oom_before = self._prepare()
        self.root_pid = record.build_pid
        self.pgid = record.pgid
        self.root = self._member(record.build_pid)
        self.started_wall = record.started
        self.started_mono = time.monotonic() - (now - record.started)
        self.cgroup = build_cgroup.recorded(Path(record.log_path))
        if record.stop_requested is not None and record.state == STOPPING:
            self.stop_reason = "stop requested (SIGTERM to the supervisor)"
        self.say(
            f"build #{record.id}: adopted (pid {record.build_pid}); its supervisor "
            f"{record.supervisor_pid} was lost, "
            f"{self.adopted_from['unobserved_s']:.1f} s unobserved"
        )
        return self._follow(record.build_pid, log_fd, pipe_fd, wake_r, oom_before)

    def _follow(
        self, pid: int, log_fd: int, out_r: int, wake_r: int, oom_before: int | None
    ) -> int:
        """Pump, sample and record until the build ended; then record its end."""
        record = self.record
        pipeline, readable = self._start_following(pid, log_fd)
        self._loop(pipeline, out_r, wake_r)
        pipeline.close()
        if readable:
            for fd in readable[1]:
                os.close(fd)
            if readable[0].failure:
                self.say(f"the log's readable form stops early: {readable[0].failure}")
        os.close(out_r)
        self._guarded("the last sample", lambda: self._sample(final=True))
        self._sweep_leftovers()
        if self.sampler is not None:
            self._guarded("closing the sampler", self.sampler.close)
        if self.outlived:
            self._guarded("recording what outlived the build", self._record_outlived)
        elif self.cgroup is not None:
            # Kept while something of the build runs: `stop` finds it there and removes it.
            self._guarded(
                "removing the build's cgroup",
                lambda: build_cgroup.remove(self.cgroup, Path(record.log_path)),
            )
        # The log is on disk before the row says the build ended (and the CLI, woken by this
        # process's exit, finds both done).
        with contextlib.suppress(OSError):  # a full disk may refuse even this; the data is in
            os.fsync(log_fd)
        self._finish(pipeline, oom_before)
        os.close(log_fd)
        if self.push_claimed:
            from workbench.supervision.pushing import start_push

            self._guarded("starting the push", lambda: start_push(self.history, record, self.say))
        # Only now: lost before the claimed push started, this process is replaced by its
        # keeper, and the one that adopts the ended build starts the push (adopt).
        if self.keeper is not None:
            self.keeper.done()
        return 0

    def _start_following(
        self, pid: int, log_fd: int
    ) -> tuple[LogPipeline, tuple[ReadableMapWriter, tuple[int, int]] | None]:
        """What follows the started build: the tracker, ETA and sampler, the log's pipeline."""
        from workbench.analysis.build_peaks import PeakTracker
        from workbench.monitor import Sampler
        from workbench.progress import ProgressTracker
        from workbench.supervision.live_eta import LiveEta
        from workbench.supervision.live_writer import LiveWriter
        from workbench.supervision.pipeline import LogPipeline

        record = self.record
        self.tracker = ProgressTracker(ninja_status=os.environ.get("NINJA_STATUS") or None)
        self.peaks = PeakTracker()
        self.eta = LiveEta(self.history, record.id, jobs=record.jobs, nix=record.nix)
        self.earlier = (
            self._guarded(
                "reading earlier builds",
                lambda: self.history.earlier_runs(record.eta_key, record.id),
            )
            or []
        )
        self.eta.earlier = self.earlier
        # An adopting supervisor goes on from the peaks its lost predecessor wrote.
        self.live_writer = LiveWriter(peak=record.live_view.peak)
        self.sampler = self._guarded(
            "starting the sampler",
            lambda: Sampler(root_pid=pid, daemon=record.nix, names_to_come=record.nix),
        )
        log_size = os.fstat(log_fd).st_size
        readable = None
        if self.adopted_from is None:
            readable = self._guarded(
                "keeping the log's readable form", lambda: _readable(record, log_size)
            )
        # (Adopted: the lost supervisor's readable form stops where it was lost, as after a
        # failed write; readers take the rest from the log itself.)
        pipeline = LogPipeline(
            log_fd, self.tracker, self.say, log_size, readable[0] if readable else None
        )
        self.pipeline = pipeline
        if self.adopted_from is not None:
            # Progress resumes where the log is: its lines so far go to the tracker again.
            self._guarded("reading the log so far", lambda: self._replay(record.log_path, pipeline))
        return pipeline, readable

    def _replay(self, path: str, pipeline: LogPipeline) -> None:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                pipeline.replay(chunk)
        pipeline.replay_end()

    def _tell_started(self) -> None:
        if self.started_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.started_fd)
            self.started_fd = None

    def _loop(self, pipeline: LogPipeline, out_r: int, wake_r: int) -> None:
        from workbench.supervision.pipeline import READ_SIZE

        eof = False
        next_sample = time.monotonic()
        next_flush = next_sample + FLUSH_INTERVAL_S
        drain_until: float | None = None
        while True:
            now = time.monotonic()
            if self._last_turn is not None and now - self._last_turn > GAP_S:
                self._not_observed(now - self._last_turn)
            self._last_turn = now
            if self.stop_reason is not None and self.stop_phase is None:
                self._begin_stop()
            if self.stop_phase == "term" and self.kill_at is not None and now >= self.kill_at:
                self._kill_all()
            if now >= next_sample:
                self._guarded("sampling", self._sample)
                if self.stop_phase == "term":
                    self._guarded("signalling new processes", self._term_new)
                next_sample += SAMPLE_INTERVAL_S
                if next_sample <= now:
                    next_sample = now + SAMPLE_INTERVAL_S
                next_flush = now + FLUSH_INTERVAL_S
            elif now >= next_flush:
                if (
                    self.tracker.lines != self._flushed_lines
                    or self._lost_bytes() != self._flushed_lost
                ):
                    self._guarded("recording progress", self._flush_progress)
                next_flush = now + FLUSH_INTERVAL_S
            self._reap()
            if (
                self.adopted_from is not None
                and self.keeper is None
                and self.root_status is None
                and (self.root is None or not tree.is_alive(self.root))
            ):
                self.root_unknown = True
            if self.root_status is not None or self.root_unknown:
                if eof:
                    return
                if drain_until is None:
                    drain_until = now + DRAIN_S
                elif now >= drain_until:
                    self.say("the build's output pipe is still open after it exited; stop reading")
                    return
            deadlines = [next_sample, next_flush]
            if self.kill_at is not None and self.stop_phase == "term":
                deadlines.append(self.kill_at)
            if drain_until is not None:
                deadlines.append(drain_until)
            timeout = max(0.0, min(deadlines) - time.monotonic())
            watched = [wake_r] if eof else [out_r, wake_r]
            if self.adopted_from is not None and self.keeper is not None:
                watched.append(self.keeper.fileno())
            try:
                ready, _, _ = select.select(watched, [], [], timeout)
            except InterruptedError:
                continue
            if wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 4096):
                        pass
            if self.keeper is not None and self.keeper.fileno() in ready:
                self._hear_keeper()
            if out_r in ready:
                try:
                    chunk = os.read(out_r, READ_SIZE)
                except OSError as exc:
                    if exc.errno == errno.EINTR:
                        continue
                    raise
                if chunk:
                    pipeline.feed(chunk)
                else:
                    eof = True

    # -- children -----------------------------------------------------------------------------

    def _member(self, pid: int) -> tree.Member | None:
        import psutil

        try:
            process = psutil.Process(pid)
            return tree.Member(pid, process.create_time(), process.name())
        except psutil.Error:
            return None

    def _reap(self) -> None:
        """Reap the build's root and any orphan re-parented to us (we are the subreaper)."""
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.process is not None and pid == self.process.pid:
                self.root_status = status
                self.root_cpu_s = usage.ru_utime + usage.ru_stime
                # Tell Popen the child is gone, so it never waits for a reused PID.
                self.process.returncode = os.waitstatus_to_exitcode(status)
                if self.keeper is not None:  # should we be lost before recording it
                    self.keeper.exited(status, self.root_cpu_s)
                if self._gap_just_ended:  # reaped as a pause ended: it ended within it
                    self.ended_in_gap = self.gaps[-1][1]

    _gap_just_ended = False

    def _not_observed(self, seconds: float) -> None:
        """This process did not run for `seconds` (stopped, starved): nothing was observed."""
        self.gaps.append((time.time() - seconds, seconds))
        self._gap_just_ended = True
        self.say(f"did not run for {seconds:.1f} s (stopped or starved): not observed then")
        self._reap()
        self._gap_just_ended = False

    def _hear_keeper(self) -> None:
        """Adopted: the keeper reaped the build's root (it is its child now) and says how it
        ended; or the keeper is gone, and with it the build's exit status."""
        assert self.keeper is not None
        said = self.keeper.receive()
        if said is False:
            self.keeper.close()
            self.keeper = None
            self.say("the keeper is gone: the build's exit status cannot be learnt")
            return  # the loop ends the build once its root is gone (root_unknown)
        if said:
            self.root_status, self.root_cpu_s = said

    # -- sampling and recording ---------------------------------------------------------------

    def _sample(self, final: bool = False) -> None:
        """Sample the build, store the sample and the live view. `final`: the exit sample, taken
        once the build ended: its RSS (nothing left) is a measurement, its CPU none (the CPU
        its last processes used since the sample before went with them)."""
        from workbench.supervision import live_eta

        progress = self.tracker.snapshot()
        fraction = live_eta.progress_fraction(progress)
        live: dict[str, Any] | None = None
        sampled: Sampled | None = None
        if self.sampler is not None:
            drv_paths = self.tracker.derivation_paths()
            if drv_paths:
                self.sampler.add_derivations(drv_paths=drv_paths)
            sample = self.sampler.sample()
            self.last_sample = sample
            self._guarded("reading the ninja log", lambda: self._follow_edges(sample))
            self.peaks.add(sample)
            self.census.add(sample)
            build = sample.build
            sampled = Sampled(
                t=build.t,
                cpu_percent=build.cpu_percent,
                cpu_cores=build.cpu_cores,
                cpu_seconds=build.cpu_seconds,
                rss=build.rss,
                memory_available=build.memory_available,
                processes=build.processes,
                compile_jobs=build.compile_jobs,
                cuda_jobs=build.cuda_jobs,
                link_jobs=build.link_jobs,
                fraction=fraction,
                cpu_interval=0.0 if final else build.interval,
            )
            live = self._live(sample, progress, cpu_measured=not final)
        if sampled is not None:
            self.samples_taken += 1
        try:
            self.history.update_live(
                self.record.id,
                self.tracker.lines,
                self._progress_json(progress, fraction),
                live,
                sampled,
            )
        except HistoryError as error:  # a full disk: the peaks keep it, the row cannot
            self.samples_lost += sampled is not None
            self._history_failed(error)
            return
        self._flushed_lines = self.tracker.lines
        self._flushed_lost = self._lost_bytes()

    def _history_failed(self, error: Exception) -> None:
        """The history refused a write (said once, in one line: no traceback for a full disk)."""
        if not self.history_failure:
            self.history_failure = str(error)
            self.say(f"cannot write the history ({error}); the build goes on, losses are counted")

    def _live(self, sample: Sample, progress: Progress, cpu_measured: bool) -> dict[str, Any]:
        # The view itself is made in live_writer.py (the jobs folded, the running edges, the
        # build's peaks, contention): this only hands it what the supervisor knows.
        elapsed = time.monotonic() - self.started_mono
        estimate = self._guarded(
            "estimating the time left", lambda: self.eta.estimate(elapsed, progress)
        )
        eta = None if estimate is None else estimate.view()
        view = self.live_writer.view(sample, eta, self.census.users, cpu_measured)
        # Other builds' CPU, so far and now, and the edges running: inputs of the next estimate.
        self.eta.observe(sample.build.t, view.cpus, view.other, view.running)
        return view.to_json()

    def _flush_progress(self) -> None:
        from workbench.supervision import live_eta

        progress = self.tracker.snapshot()
        fraction = live_eta.progress_fraction(progress)
        try:
            self.history.update_live(
                self.record.id, self.tracker.lines, self._progress_json(progress, fraction)
            )
        except HistoryError as error:
            self._history_failed(error)
            return
        self._flushed_lines = self.tracker.lines
        self._flushed_lost = self._lost_bytes()

    # -- stopping -----------------------------------------------------------------------------

    def _on_term(self, signum: int, _frame: Any) -> None:
        if self.stop_reason is None:
            self.stop_reason = "stop requested (SIGTERM to the supervisor)"

    def _make_cgroup(self) -> Path | None:
        directory, why = build_cgroup.create(Path(self.record.log_path))
        if directory is None:
            self.say(
                f"no cgroup of its own for the build ({why}): what outlives it is found "
                "by its group, session, environment marker and this subreaper"
            )
        return directory

    def _spawn(
        self, record: BuildRecord, out_w: int, environment: dict[str, str]
    ) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            list(record.argv),
            cwd=record.cwd,
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=out_w,
            start_new_session=True,
            env=environment,
            pass_fds=self.lock_fds,
        )

    def _check_cgroup(self, pid: int) -> None:
        """The root started inside its cgroup (its children follow it); if it is not there, the
        cgroup would miss processes and is not used."""
        assert self.cgroup is not None
        if pid not in build_cgroup.members(self.cgroup):
            self.say(f"the build could not join {self.cgroup}; not using it")
            build_cgroup.remove(self.cgroup, Path(self.record.log_path))
            self.cgroup = None

    def _begin_stop(self) -> None:
        grace = DEFAULT_GRACE_S
        with contextlib.suppress(Exception):
            fresh = self.history.get(self.record.id)
            if fresh.stop_grace is not None:
                grace = fresh.stop_grace
        if self.root_status is not None:
            # It ended on its own before the stop arrived: keep its real outcome.
            self.say(f"{self.stop_reason}, but the build had already ended")
            self.stop_reason = None
            return
        self.stop_phase = "term"
        self.kill_at = time.monotonic() + grace
        self._guarded(
            "recording the stop",
            lambda: self.history.update_live(
                self.record.id,
                self.tracker.lines,
                self._progress_json(self.tracker.snapshot(), None),
                state=STOPPING,
            ),
        )
        members = stopping.collect(self.cgroup, self.record, self.root, self.pgid, self.last_sample)
        self.signalled.update(members)
        self.stop_problems += tree.signal_all(members.values(), self.pgid, signal.SIGTERM)
        self.say(f"{self.stop_reason}: TERM to group {self.pgid} and {len(members)} processes")

    def _term_new(self) -> None:
        members = stopping.collect(self.cgroup, self.record, self.root, self.pgid, self.last_sample)
        new = [m for pid, m in members.items() if pid not in self.signalled]
        if new:
            self.signalled.update({m.pid: m for m in new})
            self.stop_problems += tree.signal_all(new, None, signal.SIGTERM)

    def _kill_all(self) -> None:
        self.stop_phase = "kill"
        members = stopping.collect(self.cgroup, self.record, self.root, self.pgid, self.last_sample)
        left = {pid: m for pid, m in members.items()}
        left.update({pid: m for pid, m in self.signalled.items() if tree.is_alive(m)})
        if left or self.root_status is None:
            self.say(f"grace period over: KILL to group {self.pgid} and {len(left)} processes")
            self.stop_problems += tree.signal_all(left.values(), self.pgid, signal.SIGKILL)
            self.signalled.update(left)

    def _sweep_leftovers(self) -> None:
        """After the root exited: end what a stopped build left; note what a finished one left."""
        members = (
            self._guarded(
                "finding leftover processes",
                lambda: stopping.collect(
                    self.cgroup, self.record, self.root, self.pgid, self.last_sample
                ),
            )
            or {}
        )
        if not members:
            return
        if self.stop_reason is None:
            names = ", ".join(f"{m.name} ({m.pid})" for m in list(members.values())[:5])
            self.say(f"{len(members)} processes outlived the build: {names}")
            self.outlived = list(members.values())  # recorded after the outcome, for `stop`
            return
        tree.signal_all(members.values(), self.pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            self._reap()
            if not any(tree.is_alive(m) for m in members.values()):
                return
            time.sleep(0.05)
        left = [m for m in members.values() if tree.is_alive(m)]
        self.stop_problems.append(
            "still running after KILL: " + ", ".join(f"{m.name} ({m.pid})" for m in left)
        )

    def _record_outlived(self) -> None:
        """Write what outlived the build into its row (its note says so in `_finish`)."""
        from workbench.supervision import liveness

        self.outlived = [member for member in self.outlived if tree.is_alive(member)]
        self.history.set_outlived(self.record.id, liveness.outlived_json(self.outlived))

    # -- the end ------------------------------------------------------------------------------

    def _finish(self, pipeline: LogPipeline, oom_before: int | None) -> None:
        from workbench.supervision import live_eta

        ended = time.time()
        duration = time.monotonic() - self.started_mono
        status = self.root_status
        exit_status: int | None = None
        signum: int | None = None
        if status is not None:
            if os.WIFSIGNALED(status):
                signum = os.WTERMSIG(status)
            elif os.WIFEXITED(status):
                exit_status = os.WEXITSTATUS(status)
        summary = self.peaks.summary(root_cpu_seconds=self.root_cpu_s)
        oom_after = _oom_kills()
        progress = self.tracker.snapshot()
        state, note = ending.outcome(
            self.stop_reason,
            self.stop_phase,
            self.root_unknown,
            exit_status,
            signum,
            summary,
            pipeline,
            progress,
        )
        said = self._guarded(
            "naming the OOM kill", lambda: measuring.cgroup_oom_note(self.cgroup_oom, summary)
        )
        if said:
            # The cgroup counted kills: the OOM is a fact, said with its numbers (and the
            # sampled guess "killed (OOM?) while compiling ..." is not said again after it).
            if note and "killed (OOM?)" in note:
                note = note[: note.index("killed (OOM?)")].rstrip(": ") or None
            note = said + (f"; {note}" if note else "")
        elif oom_before is not None and oom_after is not None and oom_after > oom_before:
            note = (note + "; " if note else "") + (
                f"the cgroup's OOM killer killed {oom_after - oom_before} process(es) meanwhile"
            )
        if self.stop_problems:
            note = (note + "; " if note else "") + "; ".join(self.stop_problems[:3])
        if pipeline.loss.bytes:
            note = (note + "; " if note else "") + pipeline.loss.describe()
        if self.samples_lost:
            note = (note + "; " if note else "") + ending.samples_note(
                self.samples_lost, self.samples_taken
            )
        if self.gaps:
            note = (note + "; " if note else "") + ending.gaps_note(self.gaps, self.ended_in_gap)
        adopted = self._guarded("naming the adoptions", self._adoption_note)
        if adopted:
            note = (note + "; " if note else "") + adopted
        if self.outlived:  # last, so that it can be dropped once they have exited (liveness)
            from workbench.supervision import liveness

            note = liveness.with_outlived(
                note, "", liveness.outlived_text(self.record.id, self.outlived)
            )
        cpus = summary.cpus or 1
        measured = Measured(
            build_id=self.record.id,
            wall_s=duration,
            cpu_seconds=summary.cpu_seconds,
            cpu_utilisation=100.0 * summary.cpu_seconds / (duration * cpus) if duration else 0.0,
            cpus=cpus,
            peak_rss=summary.peak_rss,
            min_memory_available=summary.min_memory_available,
            memory_total=summary.memory_total,
            most_jobs=summary.most_jobs,
            samples=summary.samples,
            peak_job_rss=summary.peak_job_rss,
            peak_process_rss=summary.peak_process_rss,
            census=self.census.groups(),
        )
        jobs = [
            JobRow(job.file, job.kind, job.tool, job.seconds, job.peak_rss, job.started)
            for job in summary.jobs
        ]
        derivations = [
            (d.drv_path, d.name, d.started, d.ended, d.failed) for d in self.tracker.finished()
        ]

        def record_measurements() -> bool:
            self.history.record_measurements(self.record.id, measured, jobs, derivations)
            return True

        recorded = self._guarded("recording measurements", record_measurements)
        if not recorded:
            note = (note + "; " if note else "") + (
                "measurements lost: they could not be written to the history"
                + (f" ({self.history_failure})" if self.history_failure else "")
            )
        self._guarded(
            "recording exact edges",
            lambda: measuring.record_edges(
                self.edge_recorder, self.say, self.history, self.record, summary
            ),
        )
        if state == SUCCEEDED and self.record.backend in ("nix", "flox"):
            self._guarded("recording what the build produced", self._record_artefacts)
        self._guarded("recording the push", lambda: self._before_end_pushes(state))
        fraction = live_eta.progress_fraction(progress)
        final: Outcome = {
            "state": state,
            "ended": ended,
            "duration_s": duration,
            "exit_status": exit_status,
            "signal": signum,
            "note": note,
            "lines": self.tracker.lines,
            "progress": self._progress_json(progress, fraction),
        }
        # First beside the log, where a full disk cannot refuse it (outcome.py); then the row.
        where = self.outcome.write(final)

        def finish() -> bool:
            self.history.finish(self.record.id, **final)
            return True

        done = self._retried("recording how the build ended", finish, kept=where)
        if done:
            from workbench.supervision.outcome import discard

            discard(self.history.state_directory, self.record.id)
        self.outcome.close()
        self.say(f"build #{self.record.id}: {state} ({note or 'no note'})")

    def _before_end_pushes(self, state: str) -> None:
        """Before the end is recorded: a push build's pushes; a build's push claimed (started
        once the end is recorded, `pushing` says why in that order)."""
        from workbench.supervision import pushing

        if state == SUCCEEDED:
            pushing.record_done(self.history, self.record)
        asked = pushing.requested(self.record)
        if asked is not None and pushing.wants_push(self.record, state):
            self.push_claimed = self.history.claim_push(self.record.id, asked[0]) or (
                # A lost predecessor claimed it and was lost before recording the end.
                self.adopted_from is not None
                and pushing.predecessors_claim(self.history, self.record.id)
            )

    def _adoption_note(self) -> str | None:
        """What the note says of lost supervisors: the gaps nobody observed."""
        from workbench.supervision.ending import adoption_text

        return adoption_text(self.history.get(self.record.id)) or None

    def _record_artefacts(self) -> None:
        """The result's store paths and sizes (nix path-info), for history, report and TUI."""
        from workbench.artefacts.sizes import collect

        target = self.record.target
        if not target or " " in target:  # several targets: Nix's own result* links
            return
        asked = tuple(self.record.settings.get("cuda_architectures") or ())
        if self.record.backend == "nix":
            # `nix build .#ATTR` links only the default output; the others (a flavour's debug,
            # a variant's C++ outputs) get result-ATTR-OUTPUT as `flox build` leaves them.
            from workbench.artefacts.out_links import link_other_outputs

            for link in link_other_outputs(Path(self.record.cwd), target):
                self.say(f"build #{self.record.id}: {link} -> its {link.rsplit('-', 1)[-1]} output")
        found = collect(Path(self.record.cwd), target, asked)
        if found is not None:
            self.history.record_artefacts(self.record.id, found.to_json())
            for warning in found.warnings:
                self.say(f"build #{self.record.id}: {warning}")

    # -- exact edges (workbench.analysis) ---------------------------------------------------

    def _follow_edges(self, sample: Sample) -> None:
        if self.edge_recorder is None:
            return
        from workbench.supervision import live_eta

        recorder = self.edge_recorder
        recorder.observe((p.pid, p.started, p.tool) for p in sample.processes)
        new_by_log = recorder.poll_logs()
        if self.eta.nix:
            # Its builders' ninjas, each by the derivation it builds, the newest one's ETA
            # (`LiveEta.follow_builder`): the build's edges in all are no one work's, so they
            # are neither learned nor planned as one.
            self._guarded(
                "reading the builder's earlier edges",
                lambda: self.eta.follow_builder(recorder, new_by_log, self.started_wall),
            )
            return
        new = [edge for edges in new_by_log.values() for edge in edges]
        if self.eta.work_key is None:
            # The work's earlier runs are read once it is known, after the build started: on an
            # ONNX Runtime-sized history that takes about a second (benchmarks/eta_accuracy.py).
            key = live_eta.work_key_of(self.edge_recorder)
            self._guarded("reading earlier runs' edges", lambda: self.eta.learn(key))
        origin = self.edge_recorder.origin()
        self.eta.add_edges(new, 0.0 if origin is None else origin - self.started_wall)
        if self.eta.planned is None:
            edges = live_eta.planned_edges_of(self.edge_recorder)
            self.eta.dependencies = live_eta.dependencies_of(self.edge_recorder)
            self.eta.before_build = live_eta.before_build_of(self.edge_recorder)
            self.eta.sibling_logs = live_eta.sibling_logs_of(self.edge_recorder)
            # A first build of its work looks for another tree of the same sources here.
            self._guarded("reading another tree's edges", lambda: self.eta.plan(edges))

    def _retried(self, what: str, action: Callable[[], Any], kept: str = "") -> Any:
        """`action`, tried again while the database cannot be written (disk full, I/O error);
        None when it never could (`kept`: where the outcome is kept meanwhile)."""
        deadline = time.monotonic() + FINISH_RETRY_S
        while True:
            try:
                return action()
            except (sqlite3.OperationalError, HistoryError) as error:
                where = f"; the outcome is kept in {kept}" if kept else ""
                if time.monotonic() >= deadline:
                    self.say(
                        f"{what}: gave up after {FINISH_RETRY_S:.0f} s ({error}){where}; the "
                        "next workbench command records it once there is room"
                    )
                    return None
                if what not in self.errors:
                    self.errors.add(what)
                    self.say(f"{what} failed ({error}); retrying for {FINISH_RETRY_S:.0f} s{where}")
                time.sleep(FINISH_RETRY_EVERY_S)


def main(argv: list[str] | None = None) -> int:
    """Entry point: `python -m workbench.supervision.supervisor --state-dir D --build-id N`."""
    parser = argparse.ArgumentParser(prog="workbench-supervisor")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--build-id", type=int, required=True)
    parser.add_argument(
        "--lock-fd",
        type=int,
        action="append",
        default=[],
        help="inherited descriptor of a tree lock (once per tree)",
    )
    parser.add_argument(
        "--started-fd", type=int, help="inherited pipe, closed once the build has started"
    )
    parser.add_argument(
        "--adopt-pipe",
        type=int,
        help="adopt the running build whose output pipe this is (started by its keeper)",
    )
    parser.add_argument("--keeper-fd", type=int, help="the keeper's socket (with --adopt-pipe)")
    parser.add_argument("--lost-at", type=float, help="when the keeper saw the last one gone")
    args = parser.parse_args(argv)
    # Nothing from a terminal may end us: we have none, but be explicit.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if args.lock_fd:
        from workbench.supervision.lock import adopt

        for fd in args.lock_fd:
            adopt(fd)

    def say(text: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        # supervisor.log lives beside the build log: on a full disk this write fails too, and
        # that must not end the supervisor.
        with contextlib.suppress(OSError):
            print(f"{stamp} {text}", file=sys.stderr, flush=True)

    from workbench.supervision import keeper

    link: keeper.Link | None = None
    if args.adopt_pipe is None:
        # The keeper is forked first, while no database is open: it is this process, and the
        # supervisor goes on in its child (keeper.py says why).
        drop = (args.started_fd,) if args.started_fd is not None else ()
        link = keeper.split(
            Path(args.state_dir),
            args.build_id,
            build_directory(Path(args.state_dir), args.build_id),
            tuple(args.lock_fd),
            drop,
        )
    elif args.keeper_fd is not None:
        import socket

        link = keeper.Link(socket.socket(fileno=args.keeper_fd))
        link.channel.setblocking(False)
    history = History(Path(args.state_dir))
    record = history.get(args.build_id)
    if args.lock_fd:
        from workbench.supervision.lock import BuildLock

        holder = BuildLock.adopted(args.lock_fd, (record.checkout,))
        holder.describe(build_id=record.id, name=record.name, pid=os.getpid())
        from workbench.planning.launch import build_trees
        from workbench.supervision.lock import describe_host

        describe_host(
            build_trees(record.argv, record.cwd, record.checkout),
            build_id=record.id,
            name=record.name,
            pid=os.getpid(),
            state_directory=str(Path(args.state_dir).resolve()),
            log=record.log_path,
        )
    supervisor = Supervisor(history, record, say)
    supervisor.lock_fds = tuple(args.lock_fd)
    supervisor.started_fd = args.started_fd
    supervisor.keeper = link
    try:
        if args.adopt_pipe is not None:
            code = supervisor.adopt(args.adopt_pipe, args.lost_at or time.time())
            if link is not None:
                link.done()
            return code
        return supervisor.run()
    except Exception:
        say(f"supervisor failed:\n{traceback.format_exc()}")
        if link is not None and supervisor.root_pid is not None and supervisor.root_status is None:
            say("the build goes on: its keeper starts a supervisor that adopts it")
            return 1
        with contextlib.suppress(Exception):
            history.mark_lost(
                record.id,
                "the supervisor failed; see "
                + str(build_directory(history.state_directory, record.id) / "supervisor.log"),
            )
        if link is not None:
            link.done()
        return 1


def main_and_exit(argv: list[str] | None = None) -> None:
    """`main`, then leave at once (never returns: a prestarted supervisor is a fork of the
    command, whose code must not go on in it).

    Everything is written (the history's rows committed, the log fsynced): leave without the
    interpreter's teardown, which the CLI waiting for this exit would wait for too (every
    module torn down, and the last SQLite close checkpointing the WAL with three fdatasyncs;
    the WAL stays valid and the next connection that closes last checkpoints it)."""
    exit_code = 1
    try:
        exit_code = main(argv)
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):
            stream.flush()
    os._exit(exit_code)


if __name__ == "__main__":
    main_and_exit()

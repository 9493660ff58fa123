"""Starting and stopping supervised builds: the one path the CLI and the TUI both take."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.history import private_state
from workbench.history.records import LOST, STARTING, BuildRecord, NewBuild
from workbench.history.store import History, build_directory
from workbench.planning import preflight
from workbench.planning.launch import build_trees
from workbench.supervision import (
    build_cgroup,
    liveness,
    prestart,
    tree,
)
from workbench.supervision.lock import BuildLock, LockBusy


@dataclass
class Started:
    """A build handed to its supervisor, and what the user should be told about it."""

    record: BuildRecord
    supervisor: subprocess.Popen[bytes] | prestart.PrestartedSupervisor
    warnings: list[str] = field(default_factory=list)


def _create_time(pid: int) -> float:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return time.time()


def supervisor_argv(state: Path, build_id: int) -> list[str]:
    """The command that runs build `build_id`'s supervisor."""
    return [
        sys.executable,
        "-m",
        "workbench.supervision.supervisor",
        "--state-dir",
        str(state),
        "--build-id",
        str(build_id),
    ]


def spawn_supervisor(
    state: Path, record: BuildRecord, lock: BuildLock | None, started_fd: int | None = None
) -> subprocess.Popen[bytes] | prestart.PrestartedSupervisor:
    """Start the supervisor in a session of its own, detached from any terminal (or hand the
    build to the one this command prestarted: `prestart`).

    `started_fd`: the write end of a pipe that the supervisor closes once the build's row says
    it started (or failed to start), so that `wait_started` wakes then instead of polling."""
    import workbench

    directory = build_directory(state, record.id)
    argv = supervisor_argv(state, record.id)
    pass_fds: tuple[int, ...] = ()
    if lock is not None:
        for fd in lock.fds:
            argv += ["--lock-fd", str(fd)]
        pass_fds = tuple(lock.fds)
    if started_fd is not None:
        argv += ["--started-fd", str(started_fd)]
        pass_fds += (started_fd,)
    # `-m` finds the package from the supervisor's working directory: the folder that holds
    # this package (the build's own directory is set by the supervisor, per build).
    package_parent = Path(workbench.__file__).resolve().parent.parent
    log = private_state.open_private(
        directory / "supervisor.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND
    )
    try:
        prestarted = prestart.hand_over(
            state, record.id, log, tuple(lock.fds) if lock else (), started_fd, package_parent
        )
        if prestarted is not None:
            return prestarted
        return subprocess.Popen(
            argv,
            cwd=package_parent,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=pass_fds,
        )
    finally:
        os.close(log)


def wait_started(
    history: History,
    build_id: int,
    supervisor: subprocess.Popen[bytes] | prestart.PrestartedSupervisor,
    timeout_s: float = 30.0,
    started_fd: int | None = None,
) -> BuildRecord:
    """The build's row once its supervisor has started the command (or failed to).

    `started_fd`: the read end of the pipe given to `spawn_supervisor`; its end of file (the
    supervisor closed it, or exited) wakes this at once. The row decides either way."""
    deadline = time.monotonic() + timeout_s
    log = build_directory(history.state_directory, build_id) / "supervisor.log"
    while True:
        record = history.get(build_id)
        if record.state != STARTING:
            return record
        code = supervisor.poll()
        if code is not None:
            history.mark_lost(
                build_id, f"the supervisor exited ({code}) before starting the build; see {log}"
            )
            return history.get(build_id)
        if time.monotonic() > deadline:
            raise WorkbenchError(
                f"the supervisor of build #{build_id} did not start it within {timeout_s:.0f} s; "
                f"see {log}"
            )
        if started_fd is None:
            time.sleep(0.05)
        elif select.select([started_fd], [], [], 0.05)[0] and not os.read(started_fd, 64):
            started_fd = None  # end of file: it stays readable, so sleep between rereads


def start(
    state: Path,
    history: History,
    plan: NewBuild,
    force: bool = False,
    warnings: list[str] | None = None,
) -> Started:
    """Take the checkout's lock, check the host, and hand the build to a new supervisor.

    A second build of the same checkout raises LockBusy unless `force`.
    """
    said = list(warnings or [])
    # A dead supervisor's row must not look like a running build to the checks below.
    liveness.check(history, history.active())
    trees = build_trees(plan.argv, plan.cwd, plan.checkout)
    lock: BuildLock | None = None
    try:
        lock = _acquire(state, history, trees)
        _refuse_lost_builds_of(history, trees)
    except LockBusy as busy:
        if lock is not None:
            lock.release()
        if not force:
            raise _explained(history, busy) from None
        said.append(f"{_explained(history, busy)}; --force given: starting anyway")
        lock = None
    # The supervisor closes its end once the row says the build started: wait_started wakes then.
    started_r, started_w = os.pipe2(os.O_CLOEXEC)
    try:
        try:
            said += preflight.describe(preflight.other_build_processes())
            record = history.create(plan)
            supervisor = spawn_supervisor(state, record, lock, started_w)
            history.set_supervisor(record.id, supervisor.pid, _create_time(supervisor.pid))
        finally:
            os.close(started_w)  # the supervisor's copy must be the only one left
            if lock is not None:
                lock.release()  # the supervisor holds its inherited copy of the lock
        record = wait_started(history, record.id, supervisor, started_fd=started_r)
    finally:
        os.close(started_r)
    return Started(record, supervisor, said)


# A build whose row says it ended holds its trees' locks until its supervisor has exited (it
# records the end, then starts a push it claimed, tells its keeper and exits): a build started
# right after it, as `workbench run A && workbench run B` starts one, waits this long for them.
ENDED_HOLDER_WAIT_S = 5.0


def _acquire(state: Path, history: History, trees: list[str]) -> BuildLock:
    """`BuildLock.acquire`, waiting (at most `ENDED_HOLDER_WAIT_S`) while the holder is a build
    whose row has ended; LockBusy at once when it is one still running."""
    deadline = time.monotonic() + ENDED_HOLDER_WAIT_S
    while True:
        try:
            return BuildLock.acquire(state, trees)
        except LockBusy as busy:
            if time.monotonic() >= deadline or not _holder_ended(history, busy):
                raise
            time.sleep(0.05)


def _holder_ended(history: History, busy: LockBusy) -> bool:
    build_id = busy.holder.get("build_id")
    if not isinstance(build_id, int) or busy.detail:
        return False
    try:
        return not history.get(build_id).active
    except WorkbenchError:
        return False


def _explained(history: History, busy: LockBusy) -> LockBusy:
    """The refusal, saying whether the holder is a running build or what is left of one."""
    build_id = busy.holder.get("build_id")
    if not isinstance(build_id, int) or busy.detail:
        return busy
    try:
        record = liveness.check(history, [history.get(build_id)])[0]
    except WorkbenchError:
        return busy
    if record.active:
        return busy
    left = liveness.leftover_processes(record)
    listing = ", ".join(f"{m.name} ({m.pid})" for m in left[:5]) or "processes of it"
    detail = (
        f"build #{record.id} ({record.name}) has ended ({record.state}), but {listing} still "
        f"run and hold {busy.tree}"
    )
    return LockBusy(busy.tree, busy.holder, detail)


def _refuse_lost_builds_of(history: History, trees: list[str]) -> None:
    """A build whose supervisor is gone keeps its trees while any of its processes runs, even
    one that closed the lock descriptors it inherited (a daemon that closes every file)."""
    wanted = set(trees)
    for record in history.builds(states=(LOST,), limit=20):
        if record.host not in (None, socket.gethostname()) or not record.outlived:
            continue
        held = wanted & set(build_trees(record.argv, record.cwd, record.checkout))
        if not held:
            continue
        record = liveness.refresh_outlived(history, record)
        left = liveness.leftover_processes(record)
        if left:
            listing = ", ".join(f"{m.name} ({m.pid})" for m in left[:5])
            raise LockBusy(
                sorted(held)[0],
                {"build_id": record.id, "name": record.name},
                f"build #{record.id} ({record.name}) lost its supervisor, but {listing} still "
                f"run in {sorted(held)[0]}",
            )


def stop(
    history: History, record: BuildRecord, grace_s: float
) -> tuple[BuildRecord, list[tree.Member]]:
    """End a build's whole process tree (TERM, then KILL after `grace_s`) and wait for it.

    Returns the final row and any process that survived. A build whose supervisor is gone has
    its leftover processes ended from here.
    """
    if record.host and record.host != socket.gethostname():
        raise WorkbenchError(
            f"build #{record.id} runs on {record.host}, not here: run `workbench stop "
            f"{record.id}` there"
        )
    if not record.active:
        # What outlived an ended build (daemons it started, compilers of a lost one): found by
        # group, session, marker and the history's list, and ended like a running build.
        left = liveness.leftover_processes(record)
        cgroup = build_cgroup.recorded(Path(record.log_path))
        survivors = []
        if left:
            survivors = tree.terminate(
                None, record.pgid, left, grace_s=grace_s, marker=record.log_path, cgroup=cgroup
            )
        if not survivors:
            build_cgroup.remove(cgroup, Path(record.log_path))
        return liveness.refresh_outlived(history, history.get(record.id)), survivors
    history.request_stop(record.id, grace_s)
    if record.supervisor_pid is None or not liveness.supervisor_running(record):
        raise WorkbenchError(f"build #{record.id} has no live supervisor; try again")
    os.kill(record.supervisor_pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s + 30.0
    while time.monotonic() < deadline:
        record = liveness.check(history, [history.get(record.id)])[0]
        if not record.active:
            return record, liveness.leftover_processes(record)
        time.sleep(0.1)
    raise WorkbenchError(
        f"build #{record.id} did not stop within {grace_s + 30:.0f} s; see "
        f"{Path(record.log_path).parent / 'supervisor.log'}"
    )


def start_sample(state: Path, force: bool = False, clean: bool = False) -> Started:
    """Build the bundled sample project through the `run` backend (no Nix, no GPU needed);
    `clean`: from clean, when it was built before."""
    from workbench.planning.launch import LaunchError, plan_run
    from workbench.samples import sample_project

    missing = sample_project.missing_tools()
    if missing:
        raise LaunchError(
            f"the sample project needs {', '.join(missing)} (Debian: apt install cmake "
            "ninja-build g++)"
        )
    directory = state / sample_project.NAME
    directory.mkdir(parents=True, exist_ok=True)
    argv = sample_project.build_argv(directory, clean=clean)
    plan = plan_run(argv, sample_project.NAME, directory, force)
    with History(state) as history:
        return start(state, history, plan, force)

"""A supervisor started ahead of its build: forked as a command begins, handed the build later.

Starting a supervisor is a new interpreter and its imports, about 90 ms on the 2-core VM, all
of it between `workbench iterate` having everything ready and its build tool starting. A
process forked when the command begins imports the supervisor while the command prepares the
cycle, then waits on a socket; `control.start` hands it the build (its history row, its log,
the descriptors of the tree lock and of the start pipe, passed with SCM_RIGHTS) instead of
starting a new interpreter. Left unused (the command failed, or launched nothing), it leaves
when the command's end of the socket closes, which the command's exit does.

SQLite connections must not cross a fork (https://sqlite.org/howtocorrupt.html, 2.6): the
fork happens only while this process has no database open, and no other thread runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path

from workbench.child_process import ChildProcess

_MESSAGE_SIZE = 1 << 16
_MAX_FDS = 16


@dataclass
class PrestartedSupervisor(ChildProcess):
    """The supervisor process, a child of this one: what callers use of a Popen."""

    pid: int
    returncode: int | None = None
    REAPED_ELSEWHERE = 0  # reaped by someone else: gone all the same
    POLL_S = 0.01

    def timed_out(self, timeout: float) -> Exception:
        return TimeoutError(f"supervisor {self.pid} still runs")


@dataclass
class _Waiting:
    pid: int
    channel: socket.socket


_waiting: list[_Waiting] = []


def _database_open() -> bool:
    """Whether this process holds a SQLite database (or its journal) open."""
    try:
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{name}")
                if target.endswith((".sqlite3", ".sqlite3-wal", ".sqlite3-shm", ".db")):
                    return True
    except OSError:
        return True  # cannot tell: do not fork
    return False


def prestart() -> None:
    """Fork the supervisor that this command's build will get (once per process; nothing
    happens when other threads run or a database is open)."""
    if _waiting or threading.active_count() != 1 or _database_open():
        return
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    for stream in (sys.stdout, sys.stderr):  # nothing buffered may be written twice
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        return
    if pid == 0:
        ours.close()
        _wait_for_build(theirs)
    theirs.close()
    _waiting.append(_Waiting(pid, ours))


def hand_over(
    state: Path,
    build_id: int,
    log: int,
    lock_fds: tuple[int, ...],
    started_fd: int | None,
    working_directory: Path,
) -> PrestartedSupervisor | None:
    """Give the waiting supervisor build `build_id`; None when there is none (or it is gone),
    and the caller starts one the usual way."""
    if not _waiting:
        return None
    waiting = _waiting.pop()
    message = {
        "state": str(state),
        "build_id": build_id,
        "started": started_fd is not None,
        "locks": len(lock_fds),
        "cwd": str(working_directory),
    }
    fds = [log, *([started_fd] if started_fd is not None else []), *lock_fds]
    try:
        socket.send_fds(waiting.channel, [json.dumps(message).encode()], fds)
    except OSError:
        with contextlib.suppress(OSError):
            os.kill(waiting.pid, 9)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(waiting.pid, 0)
        return None
    finally:
        waiting.channel.close()
    return PrestartedSupervisor(waiting.pid)


def _wait_for_build(channel: socket.socket) -> None:
    """The forked child: out of the command's session and terminal, the supervisor imported,
    then the build it is given run to its end (never returns)."""
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        keep = channel.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
        # Everything the supervisor imports, now, while the command prepares the build.
        import workbench.analysis.build_peaks
        import workbench.logs.readable_map
        import workbench.monitor.sampler
        import workbench.progress.tracker  # (the package loads its names lazily)
        import workbench.supervision.live_eta
        import workbench.supervision.pipeline  # noqa: F401
        from workbench.supervision import supervisor

        data, fds, _flags, _address = socket.recv_fds(channel, _MESSAGE_SIZE, _MAX_FDS)
        if not data:
            os._exit(0)  # the command ended without a build for us
        channel.close()
        job = json.loads(data)
        log, *passed = fds
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 (our own streams)
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        os.chdir(job["cwd"])
        argv = ["--state-dir", job["state"], "--build-id", str(job["build_id"])]
        if job["started"]:
            argv += ["--started-fd", str(passed.pop(0))]
        for fd in passed[: job["locks"]]:
            argv += ["--lock-fd", str(fd)]
        supervisor.main_and_exit(argv)
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        os._exit(1)

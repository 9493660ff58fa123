"""The keeper: a small process that outlives its build's supervisor, so that the build does not
die with it.

Without it the supervisor was a single point of failure: it held the only reading end of the
build's output pipe, so `kill -9` of it (an OOM kill, a crash, an admin's `kill`) left the build
to die of SIGPIPE on its next write, and the build's exit status went to init.

The supervisor forks the keeper as it begins (`split`, before any database is open): the
original process becomes the keeper, the child goes on as the supervisor. The keeper

- becomes the child subreaper: when the supervisor dies, the build's root process is
  re-parented to it, so its exit status is the keeper's to read;
- holds a copy of the reading end of the build's output pipe (the supervisor passes it over a
  socket, with SCM_RIGHTS, before the build starts): nobody writing to the pipe can get SIGPIPE
  while the keeper lives, and what the build writes while no supervisor reads waits in the pipe;
- learns the build's pid, and its exit status when the supervisor reaps it;
- when the supervisor ends without saying "done", starts a new supervisor that adopts the build
  (`supervisor --adopt-pipe FD --keeper-fd FD`), hands it the pipe, and tells it the exit status
  once the build ends (reaped here, or told before the loss);
- exits with the supervisor's status once a supervisor has said "done".

Everything here is the standard library (`workbench.atomic_file` is too): the keeper must
stay small and must not fail. It says what it does in supervisor.log (its standard error), and
writes `keeper.json` (its pid and start time) into the build's folder, so that `liveness`
does not call a build lost while its keeper is adopting it.

Messages (SOCK_SEQPACKET, one per send):
supervisor -> keeper: b"pipe" (with the pipe's reading end), b"build PID", b"exit STATUS CPU_S",
b"done"; keeper -> adopting supervisor: b"exit STATUS CPU_S".
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Literal

from workbench.atomic_file import replace_file

KEEPER_FILE = "keeper.json"
# A supervisor that keeps dying (a bug that kills it on every start) is not restarted forever.
MAX_ADOPTIONS = 5
_MESSAGE = 256


def _say(text: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    with contextlib.suppress(OSError, ValueError):
        os.write(2, f"{stamp} keeper {os.getpid()}: {text}\n".encode())


def _create_time(pid: int) -> float | None:
    """A process's start time in seconds since the epoch, as psutil computes it (from /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        with open("/proc/stat", "rb") as handle:
            boot = next(float(line.split()[1]) for line in handle if line.startswith(b"btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def keeper_path(build_directory: Path) -> Path:
    """Where a build's keeper writes its pid and start time."""
    return build_directory / KEEPER_FILE


def _write_keeper_file(build_directory: Path) -> None:
    """keeper.json, written atomically (0600, never through a link planted in its place)."""
    record = {"pid": os.getpid(), "started": _create_time(os.getpid())}
    path = keeper_path(build_directory)
    try:
        replace_file(path, json.dumps(record).encode(), mode=0o600, durable=False)
    except OSError as error:  # a full disk: liveness then judges by the supervisor alone
        _say(f"cannot write {path} ({error.strerror or error})")


class Link:
    """The supervisor's end of the keeper's socket. Every send is best effort: the keeper may
    be gone (killed on its own), and the build goes on without it."""

    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel

    def fileno(self) -> int:
        """The socket's descriptor (readable when the keeper says something, or dies)."""
        return self.channel.fileno()

    def _send(self, message: bytes, fds: tuple[int, ...] = ()) -> None:
        with contextlib.suppress(OSError):
            if fds:
                socket.send_fds(self.channel, [message], list(fds))
            else:
                self.channel.send(message)

    def pipe(self, fd: int) -> None:
        """The reading end of the build's output pipe (sent before the build starts)."""
        self._send(b"pipe", (fd,))

    def build(self, pid: int) -> None:
        """The build's root process."""
        self._send(f"build {pid}".encode())

    def exited(self, status: int, cpu_s: float | None) -> None:
        """The build's root ended with this wait status (reaped by the supervisor)."""
        self._send(f"exit {status} {cpu_s if cpu_s is not None else -1}".encode())

    def done(self) -> None:
        """The build's end is recorded and the push it claimed started: the keeper leaves
        once this supervisor exits (lost before, the supervisor is replaced)."""
        self._send(b"done")

    def receive(self) -> tuple[int, float | None] | Literal[False] | None:
        """What the keeper said: (wait status, CPU seconds) of the build's end; None for
        nothing usable; False once the keeper is gone."""
        try:
            data = self.channel.recv(_MESSAGE)
        except BlockingIOError:
            return None
        except OSError:
            return False
        if not data:
            return False
        return _parse_exit(data)

    def close(self) -> None:
        """Close the socket."""
        with contextlib.suppress(OSError):
            self.channel.close()


def _parse_exit(data: bytes) -> tuple[int, float | None] | None:
    parts = data.split()
    if len(parts) != 3 or parts[0] != b"exit":
        return None
    try:
        status, cpu = int(parts[1]), float(parts[2])
    except ValueError:
        return None
    return status, (None if cpu < 0 else cpu)


def split(
    state_directory: Path,
    build_id: int,
    build_directory: Path,
    keep_fds: tuple[int, ...],
    drop_fds: tuple[int, ...] = (),
) -> Link | None:
    """Fork the keeper. In the supervisor (the child) returns its link; the keeper (this
    process) never returns. None when no keeper could be made (the supervisor goes on alone).

    `keep_fds`: the tree locks' descriptors, handed to every adopting supervisor; `drop_fds`:
    descriptors only the supervisor may hold (the CLI's start pipe), closed in the keeper."""
    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    except OSError as error:
        _say(f"no keeper ({error}): the build dies with its supervisor")
        return None
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    try:
        pid = os.fork()
    except OSError as error:
        ours.close()
        theirs.close()
        _say(f"no keeper ({error}): the build dies with its supervisor")
        return None
    if pid == 0:
        ours.close()
        return Link(theirs)
    theirs.close()
    for fd in drop_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    code = 1
    try:
        code = Keeper(state_directory, build_id, build_directory, keep_fds, pid, ours).run()
    except BaseException as error:  # never a traceback from the keeper; say it and leave
        _say(f"failed: {error!r}")
    os._exit(code)


class Keeper:
    """The keeper's loop; see the module docstring."""

    def __init__(
        self,
        state_directory: Path,
        build_id: int,
        build_directory: Path,
        keep_fds: tuple[int, ...],
        supervisor: int,
        channel: socket.socket,
    ) -> None:
        self.state_directory = state_directory
        self.build_id = build_id
        self.build_directory = build_directory
        self.keep_fds = keep_fds
        self.supervisor: int | None = supervisor
        self.supervisor_status: int | None = None
        self.channel: socket.socket | None = channel
        self.pipe: int | None = None
        self.build_pid: int | None = None
        self.build_end: tuple[int, float | None] | None = None
        self.told = False  # the current supervisor knows the build's end
        self.done = False
        self.adoptions = 0

    def run(self) -> int:
        """Keep the build until a supervisor has recorded its end; the exit code to leave with."""
        from workbench.supervision import tree

        tree.set_child_subreaper()
        _write_keeper_file(self.build_directory)
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._forward)
        while True:
            watched = [wake_r] + ([self.channel] if self.channel is not None else [])
            try:
                ready, _, _ = select.select(watched, [], [], 1.0)
            except InterruptedError:
                ready = []
            if wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 4096):
                        pass
            if self.channel is not None and self.channel in ready:
                self._receive()
            self._reap()
            if self.supervisor is None:
                self._drain_messages()
                if self.done or self.build_pid is None or self.pipe is None:
                    if not self.done and self.build_pid is None:
                        _say("the supervisor ended before the build started: nothing to keep")
                    return self._exit_code()
                if self.adoptions >= MAX_ADOPTIONS:
                    _say(f"{self.adoptions} supervisors were lost: no more are started")
                    self._drain_to_end()
                    return 1
                self._adopt()
            self._tell_end()

    def _exit_code(self) -> int:
        status = self.supervisor_status
        if status is not None and os.WIFEXITED(status):
            return os.WEXITSTATUS(status)
        return 1

    def _forward(self, signum: int, _frame: object) -> None:
        """A TERM meant for the supervisor (`stop` with the pid the CLI knew) goes to it."""
        if self.supervisor is not None:
            with contextlib.suppress(OSError):
                os.kill(self.supervisor, signum)

    def _receive(self) -> None:
        assert self.channel is not None
        try:
            data, fds, _flags, _address = socket.recv_fds(self.channel, _MESSAGE, 4)
        except BlockingIOError:
            return
        except OSError:
            data, fds = b"", []
        if not data and not fds:
            self._close_channel()
            return
        for fd in fds:
            if data == b"pipe" and self.pipe is None:
                self.pipe = fd
            else:
                os.close(fd)
        if data.startswith(b"build "):
            with contextlib.suppress(ValueError):
                self.build_pid = int(data.split()[1])
        elif data == b"done":
            self.done = True
        elif data.startswith(b"exit "):
            parsed = _parse_exit(data)
            if parsed is not None:
                self.build_end = parsed
                self.told = True  # the supervisor told us: it knows

    def _drain_messages(self) -> None:
        """Whatever the ended supervisor sent before it went (its "done" comes before its exit)."""
        while self.channel is not None:
            self.channel.setblocking(False)
            before = self.channel
            self._receive()
            if self.channel is before and not select.select([before], [], [], 0)[0]:
                break

    def _close_channel(self) -> None:
        if self.channel is not None:
            with contextlib.suppress(OSError):
                self.channel.close()
            self.channel = None

    def _reap(self) -> None:
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.supervisor:
                self.supervisor = None
                self.supervisor_status = status
                if not self.done:
                    how = (
                        f"killed by signal {os.WTERMSIG(status)}"
                        if os.WIFSIGNALED(status)
                        else f"exited {os.WEXITSTATUS(status)}"
                    )
                    _say(f"supervisor {pid} {how} before the build's end was recorded")
            elif pid == self.build_pid:
                self.build_end = (status, usage.ru_utime + usage.ru_stime)
                self.told = False
                _say(f"the build's root {pid} ended (wait status {status})")
            # Anything else is an orphan of the build, re-parented here: reaped, no more.

    def _tell_end(self) -> None:
        if self.build_end is None or self.told or self.channel is None or self.supervisor is None:
            return
        status, cpu = self.build_end
        try:
            self.channel.send(f"exit {status} {cpu if cpu is not None else -1}".encode())
            self.told = True
        except OSError:
            return

    def _adopt(self) -> None:
        """Start a supervisor that adopts the build, with the pipe, a new socket and the locks."""
        assert self.pipe is not None and self.build_pid is not None
        self._close_channel()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [
            sys.executable,
            "-m",
            "workbench.supervision.supervisor",
            "--state-dir",
            str(self.state_directory),
            "--build-id",
            str(self.build_id),
            "--adopt-pipe",
            str(self.pipe),
            "--keeper-fd",
            str(theirs.fileno()),
            "--lost-at",
            repr(time.time()),
        ]
        for fd in self.keep_fds:
            argv += ["--lock-fd", str(fd)]
        passed = (self.pipe, theirs.fileno(), *self.keep_fds)
        pid = os.fork()
        if pid == 0:
            try:
                signal.set_wakeup_fd(-1)
                for signum in (signal.SIGCHLD, signal.SIGTERM):
                    signal.signal(signum, signal.SIG_DFL)
                for fd in passed:
                    os.set_inheritable(fd, True)
                os.execv(sys.executable, argv)
            finally:
                os._exit(127)
        theirs.close()
        self.adoptions += 1
        self.supervisor = pid
        self.supervisor_status = None
        self.channel = ours
        self.told = False
        _say(f"started supervisor {pid} to adopt build #{self.build_id} (pid {self.build_pid})")

    def _drain_to_end(self) -> None:
        """No supervisor any more: keep the build alive, its output appended to its log."""
        assert self.pipe is not None
        log = os.open(self.build_directory / "build.log", os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
        try:
            while True:
                chunk = os.read(self.pipe, 1 << 16)
                if not chunk:
                    break
                with contextlib.suppress(OSError):  # a full disk: the bytes are lost
                    os.write(log, chunk)
        finally:
            os.close(log)
        if self.build_end is None and self.build_pid is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.build_pid, 0)

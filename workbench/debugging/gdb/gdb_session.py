"""A gdb subprocess spoken to in MI3, with tokens and no fixed sleeps.

pygdbmi's `get_gdb_response` keeps reading until gdb has been quiet for a while (0.2 s by
default) or the timeout passes, which adds that delay to every command. Here each command
carries a token and reading stops as soon as the result record with that token arrives, so
a batch of commands written at once costs one round trip. gdb is started here with plain
pipes; pygdbmi's parser reads the rare MI line the fast parser in mi.py cannot.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from workbench.debugging.debug_errors import (
    GdbDiedError,
    GdbNotFoundError,
    GdbTimeoutError,
    MiError,
)
from workbench.debugging.gdb import mi
from workbench.debugging.gdb.gdb_start import (  # noqa: F401 (SAFE_OPTIONS: re-exported)
    GDB_CANDIDATES,
    SAFE_OPTIONS,
    SpawnedProcess,
    gdb_command,
)

INSTALL_HINT = (
    "install gdb (Debian/Ubuntu: sudo apt-get install gdb; Fedora: sudo dnf install gdb; "
    "Nix: nix shell nixpkgs#gdb), or pass --gdb PATH (cuda-gdb works too)"
)


def find_gdb(explicit: str | None = None) -> str:
    """The gdb to run: `explicit`, else gdb on PATH, else cuda-gdb on PATH."""
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            raise GdbNotFoundError(f"{explicit}: no such gdb executable; {INSTALL_HINT}")
        return found
    for name in GDB_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    raise GdbNotFoundError(f"gdb is not on PATH (nor cuda-gdb); {INSTALL_HINT}")


def mi_quote(text: str) -> str:
    """An MI command argument as a C string: a path with spaces or quotes stays one argument."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def interactive_command(pid: int, gdb: str | None = None) -> list[str]:
    """argv of an interactive `gdb -p PID` for a person at the terminal (the TUI's key).

    The same safety as the MI sessions: no init files, no auto-loaded scripts, no network.
    """
    return [
        find_gdb(gdb),
        "--nx",
        "--quiet",
        "-iex",
        "set auto-load off",
        "-iex",
        "set debuginfod enabled off",
        "-p",
        str(int(pid)),
    ]


@dataclass
class MiResult:
    """A command's result record: message ("done", "error", ...), payload, console text."""

    command: str
    message: str
    payload: dict[str, Any]
    console: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.message != "error"

    @property
    def error(self) -> str:
        return str(self.payload.get("msg", "")) if self.payload else ""


class GdbSession:
    """One gdb process. Use as a context manager; `close()` always ends gdb."""

    def __init__(
        self,
        gdb: str,
        *,
        symbols_only: bool = False,
        debug_dirs: tuple[str, ...] = (),
        started: subprocess.Popen[bytes] | SpawnedProcess | None = None,
        preloaded: tuple[str, tuple[str, ...]] | None = None,
    ) -> None:
        """Start gdb, or adopt `started`: a gdb started with gdb_command(gdb) and pipes
        (gdb_start.start_early, before the command line was parsed), given the program
        `preloaded` names (its path, and the debug directories it was told) to read."""
        self.gdb = gdb
        self.symbols_only = symbols_only
        self.preloaded = preloaded if started is not None else None
        self.argv = gdb_command(gdb, symbols_only=symbols_only, debug_dirs=debug_dirs)
        try:
            # Started directly (not through pygdbmi's controller, whose import and reader
            # threads cost the CLI's start): `bt` starts gdb first thing so that it loads
            # while the rest of the workbench is imported.
            process = started or subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
            )
        except (ValueError, OSError) as exc:
            raise GdbNotFoundError(f"cannot start {gdb}: {exc}; {INSTALL_HINT}") from None
        assert process.stdout is not None and process.stdin is not None
        self._process: subprocess.Popen[bytes] | SpawnedProcess = process
        self._fds = [process.stdout.fileno()]
        if process.stderr is not None:
            self._fds.append(process.stderr.fileno())
        self._next_token = 1
        self._sent: dict[int, str] = {}
        self._results: dict[int, MiResult] = {}
        self._console: list[str] = []
        self.notifications: list[dict[str, Any]] = []
        self._stdout_buffer = b""
        self._stderr_text = ""

    def __enter__(self) -> GdbSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> int:
        return self._process.pid

    def alive(self) -> bool:
        return self._process.poll() is None

    def command(self, command: str, timeout: float = 30.0, check: bool = True) -> MiResult:
        """Run one MI command and wait for its result; MiError on `^error` when check."""
        return self.commands([command], timeout=timeout, check=check)[0]

    def commands(
        self, commands: list[str], timeout: float = 30.0, check: bool = False
    ) -> list[MiResult]:
        """Write all commands at once, then read until every one has its result record."""
        if not commands:
            return []
        return self.collect(self.send(commands), timeout=timeout, check=check)

    def send(self, commands: list[str]) -> dict[int, str]:
        """Write commands without waiting: gdb works on them while the caller does other
        things (reading the executable's symbols while /proc is watched); `collect` later."""
        tokens = list(range(self._next_token, self._next_token + len(commands)))
        self._next_token += len(commands)
        lines = [f"{token}{command}" for token, command in zip(tokens, commands, strict=True)]
        try:
            assert self._process.stdin is not None
            self._process.stdin.write("".join(f"{line}\n" for line in lines).encode())
        except (BrokenPipeError, OSError, AttributeError):
            raise GdbDiedError(f"gdb exited before {commands[0]!r}{self._stderr_tail()}") from None
        sent = dict(zip(tokens, commands, strict=True))
        self._sent.update(sent)
        return sent

    def collect(
        self, pending: dict[int, str], timeout: float = 30.0, check: bool = False
    ) -> list[MiResult]:
        """Read until every command in `pending` (from `send`) has its result record."""
        deadline = time.monotonic() + timeout
        while any(token not in self._results for token in pending):
            self._read(deadline, pending)
        results = [self._results.pop(token) for token in pending]
        for token in pending:
            self._sent.pop(token, None)
        if check:
            for result in results:
                if not result.ok:
                    raise MiError(result.command, result.error)
        return results

    def _read(self, deadline: float, pending: dict[int, str]) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise GdbTimeoutError(f"gdb did not answer {self._first_waiting(pending)!r} in time")
        ready, _, _ = select.select(self._fds, [], [], remaining)
        got_any = False
        for fd in ready:
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                continue
            got_any = True
            if fd == self._fds[0]:
                self._stdout_buffer += chunk
                *lines, self._stdout_buffer = self._stdout_buffer.split(b"\n")
                for line in lines:
                    self._parse_line(line.decode(errors="replace"), pending)
            else:
                self._stderr_text = (self._stderr_text + chunk.decode(errors="replace"))[-4000:]
        if ready and not got_any and self._process.poll() is not None:
            raise GdbDiedError(
                f"gdb exited (status {self._process.returncode}) during "
                f"{self._first_waiting(pending)!r}{self._stderr_tail()}"
            )

    def answered(self, pending: dict[int, str]) -> bool:
        """Whether gdb has answered every command in `pending` (from `send`); never waits."""
        while not all(token in self._results for token in pending):
            ready, _, _ = select.select(self._fds, [], [], 0)
            if not ready:
                return False
            self._read(time.monotonic() + 1.0, pending)
        return True

    def wait_answered(self, pending: dict[int, str], timeout: float) -> bool:
        """Whether gdb answers every command in `pending` within `timeout` seconds; returns
        as soon as it has (a wait on its pipe, not a poll)."""
        deadline = time.monotonic() + timeout
        while not all(token in self._results for token in pending):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            ready, _, _ = select.select(self._fds, [], [], remaining)
            if not ready:
                return False
            self._read(time.monotonic() + 1.0, pending)
        return True

    def _first_waiting(self, pending: dict[int, str]) -> str:
        return next((cmd for token, cmd in pending.items() if token not in self._results), "")

    def _parse_line(self, line: str, pending: dict[int, str]) -> None:
        # pygdbmi's IoManager pretty-prints every record for a debug log even when logging
        # is off (a third of the time on a 64-thread capture), so lines are read here; the
        # fast parser in mi.py reads them, pygdbmi's parser whatever it cannot.
        line = line.rstrip("\r")
        if not line or line.startswith("(gdb)"):
            return
        try:
            record = mi.parse_line(line)
        except mi.MiSyntaxError:
            from pygdbmi import gdbmiparser  # the rare line the fast parser cannot read

            record = gdbmiparser.parse_response(line)
        self._take(record, pending)

    def _take(self, record: dict[str, Any], pending: dict[int, str]) -> None:
        kind = record.get("type")
        if kind == "result":
            token = record.get("token")
            if token is None:
                return
            self._results[token] = MiResult(
                command=pending.get(token) or self._sent.get(token, ""),
                message=str(record.get("message")),
                payload=record.get("payload") or {},
                console=self._console,
            )
            self._console = []
        elif kind in ("console", "log") and isinstance(record.get("payload"), str):
            self._console.append(record["payload"])
        elif kind == "notify":
            self.notifications.append(record)

    def take_notifications(self) -> list[dict[str, Any]]:
        """The async records (`*stopped`, `=library-loaded`, ...) seen since the last call."""
        taken, self.notifications = self.notifications, []
        return taken

    def _stderr_tail(self) -> str:
        text = (self._stderr_text or "".join(self._console[-3:])).strip()
        return f": {text[-500:]}" if text else ""

    def close(self, grace: float = 2.0, wait: bool = True) -> None:
        """Ask gdb to exit (it detaches from what it attached to); kill it if it will not.

        SIGTERM makes gdb quit and detach as well; SIGKILL is the last resort, after which
        the caller must check that the target was not left stopped. wait=False, for a gdb
        that has already detached, only asks: a CLI about to exit need not wait for it.
        """
        if not wait and self._process.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                assert self._process.stdin is not None
                self._process.stdin.write(b"-gdb-exit\n")
                self._process.stdin.close()  # end of input: gdb exits even if it missed it
            return
        if self._process.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                assert self._process.stdin is not None
                self._process.stdin.write(b"-gdb-exit\n")
                self._process.stdin.flush()
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self._process.pid, sig)
                try:
                    self._process.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        for stream in (self._process.stdin, self._process.stdout, self._process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._process.wait()

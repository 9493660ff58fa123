"""Errors of the debugging tools; each message says what failed, why, and what to do."""

from __future__ import annotations

from workbench.errors import WorkbenchError


class DebugError(WorkbenchError):
    """Capturing or diagnosing a process failed."""


class GdbNotFoundError(DebugError):
    """No gdb (or cuda-gdb) to run."""


class GdbTimeoutError(DebugError):
    """gdb did not answer in time (huge binaries make it read debug info for minutes)."""


class GdbDiedError(DebugError):
    """gdb exited or crashed in the middle of a command."""


class MiError(DebugError):
    """gdb answered a command with an MI `^error` record."""

    def __init__(self, command: str, message: str) -> None:
        self.command = command
        self.gdb_message = message
        super().__init__(f"gdb: {command}: {message}")


class PtraceDeniedError(DebugError):
    """The kernel does not let gdb attach."""


class ProcessGoneError(DebugError):
    """The process does not exist (any more)."""


class ProcessExitedError(ProcessGoneError):
    """The process was there when the capture began and exited before a sample was taken.

    Not an error of the user's: the program ended by itself (`bt` exits 1, not 2).
    """


class ZombieError(ProcessExitedError):
    """The process has exited and waits for its parent to reap it: nothing to debug."""


class AlreadyTracedError(DebugError):
    """Another debugger (or strace) is attached to the process."""

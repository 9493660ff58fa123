"""A child process known by its pid: the `poll` and `wait` of subprocess.Popen, without Popen.

Two children are started without subprocess: the early gdb of `workbench bt` (os.posix_spawn,
because importing subprocess delayed gdb's start) and the prestarted supervisor (os.fork).
Both are reaped here. Only `os` is imported at module level, so the early gdb pays nothing.
"""

from __future__ import annotations

import os


class ChildProcess:
    """`pid` and `returncode` are set by the subclass; this polls, waits and reaps."""

    pid: int
    returncode: int | None
    # The exit code taken when someone else reaped the child: it is gone, its status unknown.
    REAPED_ELSEWHERE = -1
    POLL_S = 0.002

    def poll(self) -> int | None:
        """Its exit code once it has exited (reaping it), else None; as Popen.poll."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = self.REAPED_ELSEWHERE
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code, waiting for it; `timed_out()` is raised after `timeout` seconds."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise self.timed_out(timeout or 0.0)
            time.sleep(self.POLL_S)
        return code

    def timed_out(self, timeout: float) -> Exception:
        return TimeoutError(f"process {self.pid} still runs after {timeout:g} s")

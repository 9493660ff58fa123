"""Programs the workbench starts to debug: own process group, gdb allowed, stopped for sure.

Each program runs in a new session (so in its own process group): stopping it signals the
whole group, TERM then KILL, and leaves nothing behind. Under Yama's ptrace_scope=1 only a
process's ancestors may attach, and gdb is the program's sibling, so the child names "any
process" as its allowed tracer (prctl PR_SET_PTRACER) before it executes the program.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

PR_SET_PTRACER = 0x59616D61
PR_SET_PTRACER_ANY = ctypes.c_ulong(2**64 - 1)


def _allow_tracing() -> Callable[[], None]:
    """A pre-exec hook that lets any process ptrace the child (a no-op without Yama)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before fork, not after
    except (OSError, AttributeError):
        return lambda: None

    def hook() -> None:
        prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0)

    return hook


class Program:
    """A started program whose output goes to a log file; use as a context manager."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        log_dir: Path | None = None,
    ) -> None:
        if not argv:
            raise ValueError("no command to run")
        self.argv = list(argv)
        self._own_dir = None if log_dir else tempfile.TemporaryDirectory(prefix="workbench-run-")
        directory = log_dir or Path(self._own_dir.name)  # type: ignore[union-attr]
        self.log_path = directory / "output.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.started = time.monotonic()
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_allow_tracing(),
            )
        except OSError as exc:
            self._log.close()
            self._cleanup_dir()
            from workbench.debugging.debug_errors import DebugError

            raise DebugError(f"cannot start {self.argv[0]}: {exc.strerror}") from None
        self.exit_status: int | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def __enter__(self) -> Program:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def wait(self, seconds: float) -> int | None:
        """Wait up to `seconds` for the program to exit; its status, or None if running."""
        try:
            self.exit_status = self.process.wait(timeout=max(0.0, seconds))
        except subprocess.TimeoutExpired:
            return None
        return self.exit_status

    def running(self) -> bool:
        return self.process.poll() is None

    def output_tail(self, lines: int = 20, limit: int = 8000) -> str:
        """The last lines the program wrote (stdout and stderr together)."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                size = log.tell()
                log.seek(max(0, size - limit))
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace: float = 2.0) -> int | None:
        """End the whole process group: TERM (and CONT, in case it is stopped), then KILL."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGTERM)
            os.killpg(self.process.pid, signal.SIGCONT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=grace)
        # The leader may have exited while others in its group run on: KILL the group anyway.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        status = self.process.wait()
        if self.exit_status is None:
            self.exit_status = status
        if not self._log.closed:
            self._log.close()
        return self.exit_status

    def _cleanup_dir(self) -> None:
        if self._own_dir is not None:
            self._own_dir.cleanup()

    def close(self) -> None:
        """Stop the program and delete its log (when the workbench made the directory)."""
        self.stop()
        self._cleanup_dir()


def describe_status(status: int | None) -> str:
    """`exit status 3`, `killed by SIGSEGV`, or `still running`."""
    if status is None:
        return "still running"
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit status {status}"


def pick_target(pid: int) -> int:
    """The process to capture in a started program: its newest descendant, else itself.

    Wrappers (a Nix app's shell script, `env`, a Python launcher) often run the real
    program as a child; the newest descendant is the one that was started last.
    """
    try:
        import psutil

        children = psutil.Process(pid).children(recursive=True)
    except Exception:
        return pid
    live = [child for child in children if child.is_running() and child.status() != "zombie"]
    if not live:
        return pid
    return max(live, key=lambda child: child.create_time()).pid

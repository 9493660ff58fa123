"""The generated C++ project for tests that drive real cmake, ninja, make and g++.

Twelve translation units (workbench.samples.sample_project): most are light, a few instantiate deep
template chains so that their cc1plus runs long enough (a second or more) to be seen by a
sampler. Every process a test starts runs in its own session and is killed on the way out.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from needed_tools import needs

# The project itself is the bundled sample project: the one a newcomer builds from the TUI.
from workbench.samples.sample_project import write_project

__all__ = [
    "configure",
    "kill_group",
    "needs_cxx_tools",
    "started",
    "wait_rusage",
    "write_project",
]

needs_cxx_tools = needs("cmake", "ninja", "g++")


def configure(
    source: Path, build: Path, generator: str, build_type: str = "Release", cxx: str = "g++"
) -> None:
    """Run cmake's configure step (fails the test with cmake's output if it fails).

    `build_type` "" leaves CMAKE_BUILD_TYPE unset: no optimisation, the quickest compiles.
    `cxx` is the compiler driver the build runs (CMake's default would be /usr/bin/c++).
    """
    argv = ["cmake", "-S", str(source), "-B", str(build), "-G", generator]
    argv.append(f"-DCMAKE_CXX_COMPILER={cxx}")
    if build_type:
        argv.append(f"-DCMAKE_BUILD_TYPE={build_type}")
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@contextlib.contextmanager
def started(argv: Sequence[str], **kwargs: object) -> Iterator[subprocess.Popen[str]]:
    """Start a process in its own session; on the way out kill its whole group, always."""
    process = subprocess.Popen(list(argv), start_new_session=True, **kwargs)  # type: ignore[call-overload]
    try:
        yield process
    finally:
        kill_group(process)


def kill_group(process: subprocess.Popen[str]) -> None:
    """Kill the process group a `started` process leads, and reap the leader."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        process.wait(timeout=10)


def wait_rusage(process: subprocess.Popen[str], timeout: float = 120.0) -> tuple[int, float]:
    """Wait for a child with wait4(); (exit code, user + system CPU of it and its reaped tree)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid == process.pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            raise TimeoutError(f"{process.args} still running after {timeout} s")
        time.sleep(0.02)

"""Fixtures of the debugging tests: the compiled C++ programs and a way to start them.

Every program a test starts is in its own process group and is killed (with its group)
when the test ends, pass or fail.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from debug_programs import build_all, ptrace_works


@pytest.fixture(scope="session", autouse=True)
def gdb_index_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """gdb's index cache (on in every session the workbench starts) in a directory of the
    test session's, not the user's ~/.cache; the CLIs the tests run inherit it."""
    directory = tmp_path_factory.mktemp("gdb-index-cache")
    before = os.environ.get("WORKBENCH_GDB_INDEX_CACHE")
    os.environ["WORKBENCH_GDB_INDEX_CACHE"] = str(directory)
    yield directory
    if before is None:
        os.environ.pop("WORKBENCH_GDB_INDEX_CACHE", None)
    else:
        os.environ["WORKBENCH_GDB_INDEX_CACHE"] = before


@pytest.fixture(scope="session")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixture programs, compiled once per session with the real g++."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    if not ptrace_works():
        pytest.skip("gdb cannot attach here (no gdb, or ptrace is not permitted)")
    return build_all(tmp_path_factory.mktemp("debug-programs"))


class Started:
    """A started fixture program."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    @property
    def pid(self) -> int:
        return self.process.pid

    def state(self) -> str | None:
        try:
            text = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return None
        return text.rpartition(")")[2].split()[0]


@pytest.fixture
def start(programs: dict[str, Path]) -> Iterator[Callable[..., Started]]:
    """start(name, *args, ready=True): run a fixture program, waiting for its "ready" line."""
    started: list[subprocess.Popen[bytes]] = []

    def run(name: str, *arguments: str, ready: bool = True, settle: float = 0.0) -> Started:
        # A fixture program's name, or the path of a binary a test derived from one.
        binary = programs[name] if name in programs else Path(name)
        process = subprocess.Popen(
            [str(binary), *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        started.append(process)
        if ready:
            assert process.stdout is not None
            readable, _, _ = select.select([process.stdout], [], [], 10)
            assert readable, f"{name} did not start"
            assert process.stdout.readline().strip() == b"ready"
        if settle:
            time.sleep(settle)
        return Started(process)

    yield run
    for process in started:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stdout:
            process.stdout.close()

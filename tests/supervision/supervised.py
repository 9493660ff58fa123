"""Driving the real `workbench` CLI in tests, and cleaning up every process it started.

Each test gets a `Bench`: a private state directory and a random token put into the
environment of every CLI it starts. Supervisors and builds inherit the environment, so at the
end every process carrying the token is killed by PID (plus the supervisors and process groups
the history names), even when the test failed half way.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from workbench.history.records import BuildRecord
from workbench.history.store import History

REPO = Path(__file__).resolve().parents[2]
TOKEN_ENV = "WORKBENCH_TEST_TOKEN"


class Bench:
    """A state directory, the CLI run against it, and cleanup of what it started."""

    def __init__(self, state: Path, env: dict[str, str] | None = None) -> None:
        self.state = state
        self.token = uuid.uuid4().hex
        self.extra_env = dict(env or {})
        self.started: list[subprocess.Popen[str]] = []

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        environment = {**os.environ, **self.extra_env, **(extra or {})}
        environment[TOKEN_ENV] = self.token
        environment.pop("WORKBENCH_STATE_DIR", None)
        return environment

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "workbench", "--state-dir", str(self.state), *args]

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        timeout: float = 180,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the CLI to its end (in a session of its own, so a timeout kills all of it)."""
        process = self.start(*args, cwd=cwd, env=env)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill(process)
            out, err = process.communicate()
            raise AssertionError(f"workbench {args} ran past {timeout} s:\n{out}\n{err}") from None
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    def start(
        self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, **kwargs: Any
    ) -> subprocess.Popen[str]:
        """Start the CLI in its own session; it is killed at cleanup if still running."""
        options: dict[str, Any] = {
            "stdout": subprocess.PIPE,
            "stderr": subprocess.PIPE,
            "text": True,
            "start_new_session": True,
        }
        options.update(kwargs)
        process = subprocess.Popen(self.argv(*args), cwd=cwd or REPO, env=self.env(env), **options)
        self.started.append(process)
        return process

    def json(self, *args: str, cwd: Path | None = None) -> Any:
        result = self.run(*args, cwd=cwd, timeout=60)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def history(self) -> History:
        return History(self.state)

    def record(self, build_id: int) -> BuildRecord:
        with self.history() as history:
            return history.get(build_id)

    def latest_id(self) -> int:
        with self.history() as history:
            builds = history.builds(limit=1)
        assert builds, "no build in the history"
        return builds[0].id

    def wait_for(
        self, what: str, predicate: Callable[[], Any], timeout: float = 120, every: float = 0.1
    ) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            time.sleep(every)

    def wait_ended(self, build_id: int, timeout: float = 180) -> BuildRecord:
        def ended() -> BuildRecord | None:
            record = self.record(build_id)
            return None if record.active else record

        return self.wait_for(f"build #{build_id} to end", ended, timeout)

    def kill(self, process: subprocess.Popen[str]) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            process.wait(timeout=10)

    def cleanup(self) -> None:
        """Kill every process this bench started, by PID: CLIs, supervisors, builds."""
        for process in self.started:
            if process.poll() is None:
                self.kill(process)
        # Builds inherit the token; what Nix starts (its builders get a clean environment)
        # is found below them. Nothing is killed by group or name: only these PIDs.
        victims: dict[int, psutil.Process] = {}
        for process in token_processes(self.token):
            victims[process.pid] = process
            with contextlib.suppress(psutil.Error):
                for child in process.children(recursive=True):
                    victims.setdefault(child.pid, child)
        for process in victims.values():
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(list(victims.values()), timeout=10)


def token_processes(token: str) -> list[psutil.Process]:
    """Live processes that carry the bench's token (zombies do not count)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if process.environ().get(TOKEN_ENV) == token:
                found.append(process)
        except (psutil.Error, OSError):
            continue
    return found


def build_id_from(stderr: str) -> int:
    """The build id the CLI announced ("workbench: build #3 (...)")."""
    found = re.search(r"build #(\d+)", stderr)
    assert found, stderr
    return int(found.group(1))


def ninja_steps(log: str) -> list[tuple[int, int]]:
    """Every `[finished/total]` ninja printed, in order."""
    return [
        (int(a), int(b)) for a, b in re.findall(r"^(?:\S+> )?\[(\d+)/(\d+)\] ", log, re.MULTILINE)
    ]


def ninja_log_outputs(build_directory: Path) -> set[str]:
    """Outputs recorded in ninja's own `.ninja_log` (what it ran)."""
    lines = (build_directory / ".ninja_log").read_text().splitlines()
    assert lines[0].startswith("# ninja log v"), lines[:1]
    return {line.split("\t")[3] for line in lines[1:] if line.count("\t") >= 4}


def keeper_pid(record: BuildRecord) -> int | None:
    """The pid of a build's keeper (keeper.py), from its keeper.json; None without one."""
    try:
        return int(json.loads((Path(record.log_path).parent / "keeper.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


def lose_supervision(bench: Bench, build_id: int) -> BuildRecord:
    """Make a build lost for good: `kill -9` of its keeper, then of its supervisor (the
    supervisor alone is adopted by a new one). Returns the row as it was before."""
    record = bench.record(build_id)
    assert record.supervisor_pid is not None
    keeper = keeper_pid(record)
    for pid in (keeper, record.supervisor_pid):
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def gone(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    bench.wait_for(
        "the keeper and the supervisor to die",
        lambda: gone(record.supervisor_pid or 0) and (keeper is None or gone(keeper)),
        20,
    )
    return record

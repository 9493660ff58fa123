"""End to end in a real terminal: tmux runs `workbench`, keys start a real build, the terminal
dies, the build does not; a new terminal finds it in the history."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from needed_tools import needs

from workbench.history.store import History, database_path

pytestmark = [
    needs("tmux", "cmake", "ninja", "g++"),
    pytest.mark.slow(reason="end to end: the app in tmux builds the sample project for real"),
    # Its waits are bounded by what each step needs on a loaded 2-core machine, together more
    # than the suite's 300 s per test.
    pytest.mark.timeout(900),
]


def tmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False, timeout=30)


def screen(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session).stdout


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def sessions() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        tmux("kill-session", "-t", name)


def start_workbench(session: str, config: Path, state: Path) -> None:
    argv = [sys.executable, "-m", "workbench", "--config", str(config), "--state-dir", str(state)]
    result = tmux(
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        "160",
        "-y",
        "48",
        "-e",
        "TERM=xterm-256color",
        "-e",
        f"PATH={os.environ['PATH']}",
        "-c",
        str(Path(__file__).resolve().parents[2]),
        *argv,
    )
    assert result.returncode == 0, result.stderr
    wait_for("the first screen", lambda: "Sample build" in screen(session), timeout=120)


def builds(state: Path) -> list:
    if not database_path(state).exists():
        return []
    with History(state) as history:
        return history.builds(limit=10)


def test_a_build_started_with_keys_survives_the_terminal(
    config_copy: Path, tmp_path: Path, sessions: list[str]
) -> None:
    state = tmp_path / "state"
    first = f"wb-{uuid.uuid4().hex[:8]}"
    sessions.append(first)
    start_workbench(first, config_copy, state)
    tmux("send-keys", "-t", first, "t")
    wait_for("the sample build to start", lambda: bool(builds(state)), timeout=120)
    record = builds(state)[0]
    assert record.name == "sample-project"
    # The terminal and the TUI in it die while the build runs.
    assert tmux("kill-session", "-t", first).returncode == 0
    try:
        wait_for("the build to finish", lambda: not builds(state)[0].active, timeout=480)
        finished = builds(state)[0]
        assert finished.state == "succeeded", finished.note
        log = Path(finished.log_path).read_text()
        assert "Linking CXX executable fixture_main" in log
        # A new terminal: the build is in the history.
        second = f"wb-{uuid.uuid4().hex[:8]}"
        sessions.append(second)
        start_workbench(second, config_copy, state)
        tmux("send-keys", "-t", second, "h")
        wait_for("the history screen", lambda: "sample-project" in screen(second), timeout=120)
        assert "succeeded" in screen(second) or "ok" in screen(second)
    finally:
        for record in builds(state):
            if record.active:
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "workbench",
                        "--state-dir",
                        str(state),
                        "stop",
                        str(record.id),
                    ],
                    check=False,
                    timeout=90,
                )

"""The TUI in a real terminal tunes Python's cyclic garbage collector once its first screen is
up (issue 23: at Python's thresholds a full pass over the app's ~115,000 objects ran every
20-30 s while watching a build, about 100 ms each, and GC was an eighth of the TUI's CPU); the
app inside the tests' own process (headless) leaves the collector as it is."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

from workbench.tui.app import GC_FIRST_THRESHOLD, WorkbenchApp

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from tui_terminal_cost import Terminal, environment, wait_for  # noqa: E402

# Runs the CLI as `workbench` does, then says what the collector was left at.
PROGRAM = (
    "import gc, sys\n"
    "from workbench.cli.main import main\n"
    "code = main()\n"
    "print(f'collector frozen={gc.get_freeze_count()} first={gc.get_threshold()[0]}')\n"
    "sys.exit(code)\n"
)


@pytest.mark.slow
def test_the_tui_in_a_terminal_freezes_its_start_and_collects_less_often(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = environment(tmp_path / "home", REPO)
    argv = [
        sys.executable,
        "-c",
        PROGRAM,
        "--config",
        str(REPO / "configs"),
        "--state-dir",
        str(tmp_path / "state"),
    ]
    terminal = Terminal(argv, env, tmp_path)
    try:
        wait_for(terminal, b"recommended", 60)  # the first screen, the host detected
        since = len(terminal.output)
        terminal.write(b"q")
        wait_for(terminal, b"collector frozen=", 30, since)
        line = bytes(terminal.output[since:]).split(b"collector ", 1)[1].split(b"\r")[0]
        fields = dict(part.split(b"=") for part in line.split())
        # The modules, Textual's CSS and the first screen: tens of thousands of objects.
        assert int(fields[b"frozen"]) > 10_000, line
        assert int(fields[b"first"]) == GC_FIRST_THRESHOLD, line
    finally:
        terminal.close()


async def test_the_app_in_the_tests_process_leaves_the_collector_alone(tui) -> None:  # type: ignore[no-untyped-def]
    before = gc.get_threshold(), gc.get_freeze_count()
    app: WorkbenchApp = tui()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.pause()
    assert (gc.get_threshold(), gc.get_freeze_count()) == before

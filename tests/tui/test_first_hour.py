"""A newcomer's first hour (issue 14), driven with Pilot at 80x24 and 160x48: a user error is
one screen and a non-zero exit, every screen's keys are in the palette, the help and the
footer, and quitting mid-build says the build goes on."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from recorded_host import recorded_doctor
from textual.command import CommandPalette
from textual.widgets import Static
from tui.driving import wait_until

from workbench.tui.app import WorkbenchApp, make_app
from workbench.tui.error_screen import ErrorScreen
from workbench.tui.help_screen import HelpScreen, key_help
from workbench.tui.screen_commands import ScreenCommands

SIZES = [(80, 24), (160, 48)]
MALFORMED = "ninja_jobs = [unclosed\n"


def app_on(config: Path, tmp_path: Path) -> WorkbenchApp:
    return make_app(str(config), str(tmp_path / "state"), doctor=recorded_doctor())


def text_of(widget: Static) -> str:
    return str(widget.render())


async def error_screen_shown(app: WorkbenchApp, pilot) -> ErrorScreen:
    """The error screen, once drawn (its header included)."""
    await wait_until(pilot, "the error screen", lambda: isinstance(app.screen, ErrorScreen), 30)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    assert isinstance(app.screen, ErrorScreen)
    return app.screen


@pytest.mark.parametrize("size", SIZES)
async def test_a_malformed_settings_file_is_one_screen_and_quitting_exits_2(
    config_copy: Path, tmp_path: Path, size: tuple[int, int]
) -> None:
    (config_copy / "settings.toml").write_text(MALFORMED)
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=size) as pilot:
        screen = await error_screen_shown(app, pilot)
        what = text_of(screen.query_one("#error-what", Static))
        where = text_of(screen.query_one("#error-where", Static))
        todo = text_of(screen.query_one("#error-todo", Static))
        assert "malformed TOML" in what
        assert where.startswith("Where: ") and "settings.toml:1:" in where
        assert "Fix it in" in todo and "settings.toml" in todo
        # Every line of the box is on the terminal, the footer's Quit too.
        assert screen.query_one("#error-todo").region.bottom <= size[1] - 1
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 2


async def test_the_settings_screen_on_a_malformed_file_is_the_error_screen_too(
    config_copy: Path, tmp_path: Path
) -> None:
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        (config_copy / "settings.toml").write_text(MALFORMED)
        await pilot.press("s")
        await error_screen_shown(app, pilot)
        await pilot.press("escape")  # back to the variants screen, still usable
        await pilot.pause()
        assert type(app.screen).__name__ == "VariantsScreen"
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 2


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (scripts/test.sh)")
def test_the_real_tui_exits_2_without_a_traceback(config_copy: Path, tmp_path: Path) -> None:
    """`workbench --config DIR` in a real terminal, on a malformed settings.toml."""
    (config_copy / "settings.toml").write_text(MALFORMED)
    session = f"wb-{uuid.uuid4().hex[:8]}"
    status = tmp_path / "status"
    argv = [sys.executable, "-m", "workbench", "--config", str(config_copy)]
    argv += ["--state-dir", str(tmp_path / "state")]
    # The pane's own shell records the exit status, then keeps what the app left on the pane.
    script = f"{shlex.join(argv)}; echo $? >{status}; sleep 60"
    run = ["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24"]
    run += ["-e", f"PATH={os.environ['PATH']}", "-e", "TERM=xterm-256color", "sh", "-c", script]
    subprocess.run(run, check=True, timeout=30)
    try:
        deadline = time.monotonic() + 60
        seen = ""
        while "What to do" not in seen:
            assert time.monotonic() < deadline, f"no error screen; the pane shows:\n{seen}"
            time.sleep(0.2)
            seen = subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
            ).stdout
        assert "settings.toml:1:" in seen
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True, timeout=10)
        deadline = time.monotonic() + 30
        while not status.exists() or not status.read_text().strip():
            assert time.monotonic() < deadline, "the app did not exit"
            time.sleep(0.2)
        after = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
        ).stdout
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=10)
    assert status.read_text().strip() == "2"
    assert "Traceback" not in after


# -- discoverability ------------------------------------------------------------------------


async def palette_titles(app: WorkbenchApp, query: str) -> list[str]:
    provider = ScreenCommands(app.screen)
    return [str(hit.text) async for hit in provider.search(query)]


@pytest.mark.parametrize("size", SIZES)
async def test_every_screen_offers_its_keys_in_the_palette_and_the_help(
    config_copy: Path, tmp_path: Path, size: tuple[int, int]
) -> None:
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        for query in ("hist", "patch", "settings", "sample", "help"):
            assert await palette_titles(app, query), f"nothing for {query!r} on the variants"
        await pilot.press("h")
        await pilot.pause()
        assert await palette_titles(app, "report")
        assert await palette_titles(app, "settings")  # navigation from any screen
        await pilot.press("s")
        await pilot.pause()
        assert await palette_titles(app, "save")
        assert await palette_titles(app, "hist")
        # `?` opens the help, made from the settings screen's own bindings.
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        names = [row.name for row in app.screen.rows]
        assert "Save" in names and "History" in names and "Quit" in names
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")


async def test_the_palette_runs_a_screen_key(config_copy: Path, tmp_path: Path) -> None:
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"history")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.5)
        assert type(app.screen).__name__ == "HistoryScreen"


async def test_the_help_lists_each_key_with_what_it_does(config_copy: Path, tmp_path: Path):
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await app.workers.wait_for_complete()
        rows = {row.name: row for row in key_help(app.screen)}
        assert rows["Build"].key == "b" and "Nix" in rows["Build"].help
        assert rows["Patches"].key == "p"
        assert rows["Help"].key.startswith("?")
        del pilot

"""Build output is data in the TUI: markup in a log line, a failure note or a compiled file's name
never acts or crashes the app (at start-up through reattach too), and neither does "[/" typed in
a settings field.

Before: a log line with `[@click=app.quit]…` quit the app when clicked, and malformed markup in a
log line, a note or a file name raised MarkupError on every draw of that build.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from driving import start, visible_log, wait_until
from needed_tools import needs
from supervision.supervised import Bench
from textual.widgets import Input, Static

from workbench.samples.sample_project import HEAVY
from workbench.tui.screens.build.build_screen import BuildScreen
from workbench.tui.widgets.log_view import LogView
from workbench.tui.widgets.process_table import ProcessTable

# A directory "[@click=app.quit]x[" holding "]unit.cc": the path reads as markup.
HOSTILE_FILE = "[@click=app.quit]x[/]unit.cc"


@needs("g++")
@pytest.mark.slow
async def test_markup_from_a_build_is_shown_as_text(bench: Bench, tui, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    # A real compile of a file whose name is markup, long enough (the sample project's heavy
    # unit, deeper) for the 1 Hz sampler to see cc1plus and its file.
    (work / HOSTILE_FILE).parent.mkdir()
    (work / HOSTILE_FILE).write_text(HEAVY.format(n=0, depth=10))
    script = (
        "printf '[@click=app.quit]Click me[/]\\n[/\\n[bold]never closed\\n'; "
        "printf 'title\\033]0;owned\\007 and clear\\033[2J\\n'; "
        f"g++ -c '{HOSTILE_FILE}' -o unit.o; "
        "printf 'FAILED: [/][@click=app.quit]unit.o\\n'; "
        "sleep 1; exit 1"
    )
    build_id = start(bench, "--", "sh", "-c", script, cwd=work)
    app = tui()
    async with app.run_test(size=(160, 48)) as pilot:
        # Start-up reattaches to the running build by itself: the crash used to happen here.
        await wait_until(
            pilot,
            "the reattached build screen",
            lambda: isinstance(app.screen, BuildScreen) and app.screen.record is not None,
            30,
        )
        screen = app.screen
        assert isinstance(screen, BuildScreen) and screen.build_id == build_id
        await wait_until(
            pilot,
            "the build to fail",
            lambda: screen.record is not None and screen.record.state == "failed",
            60,
        )
        # The finished jobs and the note, drawn from the poll that saw the end: wait for the
        # note (bounded) rather than for a time.
        await wait_until(
            pilot,
            "the failure's note",
            lambda: (
                "FAILED: [/][@click=app.quit]unit.o"
                in str(screen.query_one("#build-detail", Static).render())
            ),
            20,
        )
        await pilot.pause()
        title = str(screen.query_one("#build-title", Static).render())
        detail = str(screen.query_one("#build-detail", Static).render())
        assert "FAILED: [/][@click=app.quit]unit.o" in title  # the command line shows it
        assert "FAILED: [/][@click=app.quit]unit.o" in detail
        table = screen.query_one(ProcessTable)
        files = [row.file or "" for row in table.rows_shown]
        assert any(file.endswith(HOSTILE_FILE) for file in files), files
        # Clicking what reads like an action does nothing: it is text.
        await pilot.click("#build-detail")
        await pilot.click("#build-title")
        screen.action_switch_pane()
        log = screen.query_one(LogView)
        await wait_until(pilot, "the log", lambda: log.line_count >= 5, 10)
        log.action_scroll_home()
        await wait_until(
            pilot, "the log's top drawn", lambda: "[@click=app.quit]Click me[/]" in visible_log(log)
        )
        shown = visible_log(log)
        assert "[@click=app.quit]Click me[/]" in shown
        assert "[/" in shown and "[bold]never closed" in shown
        assert "title^[]0;owned^G and clear" in shown  # the OSC is visible, the clear is gone
        await pilot.click(LogView, offset=(3, 0))
        await pilot.pause(0.3)
        assert app.is_running and app.screen is screen


async def test_typing_markup_in_a_settings_field_is_refused_not_fatal(tui) -> None:
    app = tui()
    async with app.run_test(size=(100, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("s")
        await pilot.pause()
        screen = app.screen
        field = screen.query_one("#field-ninja_jobs", Input)
        field.focus()
        await pilot.press("[", "/")
        await pilot.pause()
        error = screen.query_one("#error-ninja_jobs", Static)
        assert error.display and "[/" in str(error.render())
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.is_running and app.screen is screen

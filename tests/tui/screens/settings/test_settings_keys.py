"""The settings screen behaves like the rest: `?` and `q` reach help and quit from a number
field (only a free-text field takes them as text), quitting with unsaved edits asks, the
focused field is scrolled into view, and the architecture checklist tells checked rows from
unchecked ones without colour."""

from __future__ import annotations

from pathlib import Path

from recorded_host import recorded_doctor
from textual.widgets import Input
from tui.driving import wait_until

from workbench.tui.app import make_app
from workbench.tui.screens.help.help_screen import HelpScreen
from workbench.tui.screens.settings.settings_screen import ConfirmDiscard, SettingsScreen
from workbench.tui.widgets.check_list import CheckList


async def _settings(app, pilot) -> SettingsScreen:
    await app.workers.wait_for_complete()
    await pilot.press("s")
    await wait_until(pilot, "the settings", lambda: isinstance(app.screen, SettingsScreen), 20)
    return app.screen


async def test_help_and_quit_keys_reach_the_app_from_a_number_field(
    config_copy: Path, tmp_path: Path
) -> None:
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _settings(app, pilot)
        jobs = screen.query_one("#field-ninja_jobs", Input)
        assert jobs.has_focus
        before = jobs.value
        await pilot.press("question_mark")
        await wait_until(pilot, "help", lambda: isinstance(app.screen, HelpScreen), 10)
        assert jobs.value == before  # not typed into the field
        await pilot.press("escape")
        await wait_until(pilot, "the settings again", lambda: app.screen is screen, 10)
        await pilot.press("f1")
        await wait_until(pilot, "help from F1", lambda: isinstance(app.screen, HelpScreen), 10)
        await pilot.press("escape")
        await wait_until(pilot, "the settings again", lambda: app.screen is screen, 10)
        assert jobs.has_focus and jobs.value == before
        # A free-text field takes them as text.
        flags = screen.query_one("#field-optimization_flags", Input)
        flags.focus()
        await pilot.pause()
        flags.value = ""
        await pilot.press("q")
        assert flags.value == "q" and app.is_running
        flags.value = ""
        jobs.focus()
        await pilot.pause()
        # An unsaved edit: q asks instead of dropping it, and keeping it stays.
        jobs.value = "7"
        await pilot.pause()
        await pilot.press("q")
        await wait_until(pilot, "the question", lambda: isinstance(app.screen, ConfirmDiscard))
        # Save has the focus (AUTO_FOCUS): Enter keeps the edit.
        await wait_until(
            pilot,
            "the focus on Save",
            lambda: app.focused is not None and app.focused.id == "discard-save",
        )
        await pilot.press("k")
        await wait_until(pilot, "the settings again", lambda: app.screen is screen, 10)
        assert app.is_running and jobs.value == "7"
        await pilot.press("ctrl+q")
        await wait_until(pilot, "the question", lambda: isinstance(app.screen, ConfirmDiscard))
        await pilot.press("d")
        await wait_until(pilot, "the app to end", lambda: not app.is_running, 10)


async def test_focus_scrolls_into_view_and_checks_read_without_colour(
    config_copy: Path, tmp_path: Path
) -> None:
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _settings(app, pilot)
        form = screen.query_one("#settings-form")
        for _ in range(12):
            await pilot.press("tab")
            await pilot.pause()
            focused = app.focused
            assert focused is not None
            if form in focused.ancestors:
                region = focused.region
                assert form.region.contains_region(region), (focused.id, region, form.region)
        checks = screen.query_one(CheckList)
        drawn = [checks.render_line(y).text for y in range(min(4, checks.option_count))]
        marks = {line[1] for line in drawn if len(line) > 1}
        assert "X" not in marks and marks <= {"✓", " "}, drawn
        checks.select(checks.get_option_at_index(0).value)
        await pilot.pause()
        assert checks.render_line(0).text[1] == "✓"
        checks.deselect(checks.get_option_at_index(0).value)
        await pilot.pause()
        assert checks.render_line(0).text[1] == " "


async def test_the_first_screens_jobs_line_follows_a_save(config_copy: Path, tmp_path: Path):
    from textual.widgets import Static

    from workbench.tui.screens.variants.variants_screen import VariantsScreen

    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=(160, 48)) as pilot:
        await app.workers.wait_for_complete()
        first = app.screen
        assert isinstance(first, VariantsScreen)
        summary = first.query_one("#host-summary", Static)
        await wait_until(pilot, "the host summary", lambda: "Jobs " in str(summary.render()))
        assert "Jobs 7 ×" not in str(summary.render())
        screen = await _settings(app, pilot)
        screen.query_one("#field-ninja_jobs", Input).value = "7"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        await pilot.press("escape")
        await wait_until(pilot, "the first screen", lambda: app.screen is first, 10)
        await wait_until(
            pilot,
            "the jobs line to say 7",
            lambda: "Jobs 7 × 1 nvcc thread (your settings)" in str(summary.render()),
            20,
        )


async def test_an_out_of_range_jobs_count_says_what_is_allowed(
    config_copy: Path, tmp_path: Path
) -> None:
    """Typing 999999999999 into the jobs field: the field says what `config set ninja_jobs`
    allows (the same check, the same words) and the estimate is not made from "999", the last
    value that passed on the way."""
    import subprocess
    import sys

    from cli_errors import one_error_line
    from textual.widgets import Static

    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _settings(app, pilot)
        jobs = screen.query_one("#field-ninja_jobs", Input)
        jobs.value = ""
        await pilot.press(*"999999999999")
        await wait_until(pilot, "the field's error", lambda: "ninja_jobs" in screen.errors)
        assert jobs.value == "999999999999"  # not cut to 999
        shown = str(screen.query_one("#error-ninja_jobs", Static).render())
        advice = str(screen.query_one("#advice", Static).render())
        assert "999 jobs" not in advice and "not estimated while" in advice, advice
        assert "allowed: a whole number from 1 to 4096" in advice
        assert screen.changes().get("ninja_jobs") is None  # nothing of it would be saved
        # Leaving with the refused value asks, as with any unsaved edit; keeping stays.
        await pilot.press("escape")
        await wait_until(pilot, "the question", lambda: isinstance(app.screen, ConfirmDiscard))
        await pilot.press("k")
        await wait_until(pilot, "the settings again", lambda: app.screen is screen, 10)
        assert jobs.value == "999999999999"
    cli = subprocess.run(
        [
            *(sys.executable, "-m", "workbench", "--config", str(config_copy)),
            "config",
            "set",
            "ninja_jobs",
            "999999999999",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    said = one_error_line(cli)
    assert cli.returncode == 2
    assert shown in said, (shown, said)  # the CLI's refusal, word for word

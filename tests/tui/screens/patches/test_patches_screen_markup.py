"""Paths typed into the patches screen are text: a source tree named with `[/` that does not
exist is said to be missing, as typed. Before, the notification was markup and the `[/` raised
MarkupError, closing the TUI."""

from __future__ import annotations

from pathlib import Path

from driving import wait_until
from patch_fixture import write_fixture_series, write_fixture_source
from textual.widgets import Input
from textual.widgets._toast import Toast

from workbench.tui.screens.patches.patches_screen import PatchesScreen


async def test_a_typed_source_with_markup_is_named_as_typed(
    config_copy: Path, tmp_path: Path, tui
) -> None:
    source = tmp_path / "source"
    write_fixture_source(source, units=14)
    write_fixture_series(config_copy, source)
    typed = str(tmp_path / "no [/such] [@click=app.quit]tree")
    app = tui()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        screen = PatchesScreen(app.matrix, config_copy, tmp_path / "state", "cpu")
        await app.push_screen(screen)
        await pilot.pause()
        screen.query_one("#patches-source", Input).value = typed
        await pilot.press("c")
        await wait_until(pilot, "the check's answer", lambda: bool(app._notifications), 30)
        messages = [str(notification.message) for notification in app._notifications]
        assert any(typed in message for message in messages), messages
        # What the toast draws (Textual's own Toast.render): the path as typed; with markup
        # on, the `[/such]` raised MarkupError there, on the next frame.
        drawn = [Toast(notification).render().plain for notification in app._notifications]
        assert any(typed in text for text in drawn), drawn
        await pilot.pause()
        assert app.is_running

"""Where the log view's status goes: a titled view (the build screen's) says it in its border
title and posts no message (each line taken in changes the count, and the message bubbled
through every node above the view for no listener: issue 23, a quiet build's CPU); a view
without a title posts a `Status` for its owner to show."""

from __future__ import annotations

from pathlib import Path

from driving import wait_until
from textual.app import App, ComposeResult

from workbench.tui.widgets.log_view import LogView


class LogApp(App[None]):
    def __init__(self, path: Path, title: str | None) -> None:
        super().__init__()
        self.path = path
        self.title_given = title
        self.statuses: list[str] = []

    def compose(self) -> ComposeResult:
        yield LogView(self.path, id="log", title=self.title_given, driven=True)

    def on_log_view_status(self, message: LogView.Status) -> None:
        self.statuses.append(message.text)


async def _grown(app: LogApp, path: Path) -> LogView:
    async with app.run_test(size=(80, 20)) as pilot:
        log = app.query_one(LogView)
        await app.workers.wait_for_complete()
        await wait_until(pilot, "the lines shown", lambda: log.line_count == 3, 20)
        with path.open("a") as handle:
            handle.write("four\nfive\n")
        log.take_in_new_lines(now=True)
        await wait_until(pilot, "the new lines", lambda: log.line_count == 5, 20)
        await pilot.pause()
        await pilot.pause()
        return log


async def test_a_titled_view_says_its_status_in_its_title_only(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    path.write_text("one\ntwo\nthree\n")
    app = LogApp(path, "Log")
    log = await _grown(app, path)
    assert str(log.border_title) == "Log · 5 lines · following"
    assert app.statuses == []


async def test_a_view_without_a_title_posts_its_status(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    path.write_text("one\ntwo\nthree\n")
    app = LogApp(path, None)
    log = await _grown(app, path)
    assert not log.border_title
    assert app.statuses[-1] == "5 lines · following"

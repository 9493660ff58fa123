"""A log view over the supervisor's log file that renders only the visible lines.

Lines come from a LineIndex (byte offsets + mmap), styled lines are kept in a small LRU cache,
so drawing costs the same for a 200-line log and a 2-million-line one.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from rich.segment import Segment
from rich.style import Style
from textual import work
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from workbench.logs.line_index import LineIndex, severity

# Bytes indexed per refresh on the UI thread: a 50k lines/s log adds ~5 MB/s, so 10 refreshes a
# second at this bound keep up while never blocking the event loop for long.
REFRESH_LIMIT_BYTES = 2 * 1024 * 1024
WIDTH_GUESS = 200


class LogView(ScrollView, can_focus=True):
    """Follows a growing log file; search with `/`, next/previous match, first error."""

    BINDINGS = [
        Binding(
            "e",
            "first_error",
            "First error",
            id="log.first_error",
            tooltip="Jump to the first line that reads like an error",
        ),
        Binding("n", "next_match", "Next match", id="log.next", show=False),
        Binding("N", "previous_match", "Previous match", id="log.previous", show=False),
        Binding(
            "f",
            "toggle_follow",
            "Follow",
            id="log.follow",
            tooltip="Keep the newest line in view as the log grows",
        ),
        Binding("home", "scroll_home", "Top", show=False),
        Binding("end", "scroll_end", "Bottom", show=False),
    ]
    DEFAULT_CSS = """
    LogView { background: $surface; }
    LogView > .log--error { color: $error; text-style: bold; }
    LogView > .log--warning { color: $warning; }
    LogView > .log--match { background: $accent 40%; }
    """
    COMPONENT_CLASSES = {"log--error", "log--warning", "log--match"}

    follow: reactive[bool] = reactive(True)

    class Status(Message):
        """Line count, follow state or a search result changed."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, path: Path | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.index: LineIndex | None = None
        self.search_text = ""
        self.match_line: int | None = None
        self._indexing = False
        if path is not None:
            self.open(path)

    def open(self, path: Path) -> None:
        """Show another file (the index of the previous one is dropped)."""
        if self.index is not None:
            self.index.close()
        self.index = LineIndex(path)
        self._styled.cache_clear()
        self.match_line = None
        if self.is_mounted:
            self.index_all()

    def on_mount(self) -> None:
        self.set_interval(0.1, self.refresh_lines)
        if self.index is not None:
            self.index_all()

    def on_unmount(self) -> None:
        if self.index is not None:
            self.index.close()

    @work(thread=True, exclusive=True, group="log-index")
    def index_all(self) -> None:
        """Index an existing (possibly huge) file off the event loop."""
        index = self.index
        if index is None:
            return
        self._indexing = True
        try:
            index.refresh()
        finally:
            self._indexing = False
        self.app.call_from_thread(self._update_size)

    def refresh_lines(self) -> None:
        """Take in what the build appended since the last tick."""
        if self.index is None or self._indexing:
            return
        if self.index.refresh(REFRESH_LIMIT_BYTES):
            self._styled.cache_clear()  # the last partial line may have grown
            self._update_size()

    def _update_size(self) -> None:
        if self.index is None:
            return
        count = len(self.index)
        self.virtual_size = Size(WIDTH_GUESS, count)
        if self.follow:
            self.scroll_to(y=max(0, count - self.size.height), animate=False)
        self.refresh()
        self.post_message(self.Status(f"{count:,} lines" + (" · following" if self.follow else "")))

    @lru_cache(maxsize=1024)  # noqa: B019 - cleared on open/grow; bounded
    def _styled(self, number: int, is_match: bool) -> list[Segment]:
        assert self.index is not None
        text = self.index.line(number).expandtabs(8)
        level = severity(text)
        style = Style()
        if level:
            style = self.get_component_rich_style(f"log--{level}", partial=True)
        if is_match:
            style += self.get_component_rich_style("log--match", partial=True)
        return [Segment(text, style)]

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        number = scroll_y + y
        width = self.size.width
        if self.index is None or number >= len(self.index):
            return Strip.blank(width, self.rich_style)
        segments = self._styled(number, number == self.match_line)
        strip = Strip(segments).crop(scroll_x, scroll_x + width)
        return strip.extend_cell_length(width, self.rich_style).apply_style(self.rich_style)

    def show_line(self, number: int) -> None:
        """Scroll so that line `number` is in the middle of the view; stop following."""
        self.follow = False
        self.match_line = number
        self._styled.cache_clear()
        self.scroll_to(y=max(0, number - self.size.height // 2), animate=False)
        self.refresh()

    def search(self, text: str, backwards: bool = False) -> int | None:
        """Find `text` from the current match (or the top of the view) on; show it."""
        if self.index is None or not text:
            return None
        self.search_text = text
        start = self.match_line if self.match_line is not None else int(self.scroll_offset.y)
        start = start - 1 if backwards else start + (1 if self.match_line is not None else 0)
        found = self.index.search(text, start, backwards=backwards)
        if found is None:
            self.post_message(self.Status(f"{text!r} not found"))
            return None
        self.show_line(found)
        self.post_message(self.Status(f"{text!r} at line {found + 1:,}"))
        return found

    def action_next_match(self) -> None:
        self.search(self.search_text)

    def action_previous_match(self) -> None:
        self.search(self.search_text, backwards=True)

    def action_first_error(self) -> None:
        if self.index is None:
            return
        found = self.index.first_error()
        if found is None:
            self.post_message(self.Status("no error in the log"))
            return
        self.show_line(found)
        self.post_message(self.Status(f"first error at line {found + 1:,}"))

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self.match_line = None
            self._update_size()

    def action_scroll_end(self) -> None:
        self.follow = True
        self._update_size()

    def action_scroll_home(self) -> None:
        self.follow = False
        self.scroll_to(y=0, animate=False)

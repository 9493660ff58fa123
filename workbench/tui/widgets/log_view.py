"""A log view over the supervisor's log file that renders only the visible lines.

Lines come from a LineIndex (byte offsets + mmap); each visible line is made readable
(`workbench.logs.readable`: Nix's `@nix {json}` events become text), styled, and kept in a small
LRU cache, so drawing costs the same for a 200-line log and a 2-million-line one. Searches run
in a worker over the mapped file in slices, so even a huge log never freezes the screen.
"""

from __future__ import annotations

import os
import re
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.timer import Timer
from textual.worker import get_current_worker

from workbench.logs.line_index import ERROR_PATTERN, LineIndex, compile_search
from workbench.logs.readable import DerivationNames, readable_line
from workbench.tui.widgets.steady_scrollbar import SteadyScrollBar

# Bytes indexed per refresh on the UI thread: a 50k lines/s log adds ~5 MB/s, so 10 refreshes a
# second at this bound keep up while never blocking the event loop for long.
REFRESH_LIMIT_BYTES = 2 * 1024 * 1024
# A backlog larger than this (opening a finished 2-million-line log) is indexed in a worker.
BACKLOG_BYTES = 16 * 1024 * 1024
# Lines searched per slice: the worker checks for cancellation between slices.
SEARCH_SLICE_LINES = 200_000
CACHE_LINES = 1024
# Who takes in what the build appends: a view whose owner polls (`driven`: the build screen,
# once a second, in the same frame as the rest of its second) has no timer of its own while the
# log is quiet; once a poll finds this many bytes waiting, the view takes them in itself at
# BUSY_TAKE_IN_S until QUIET_TICKS ticks in a row found less waiting, then its timer stops. A
# view on its own (no owner polling) looks every BUSY_TAKE_IN_S, taking a quiet log's lines at
# most every QUIET_TAKE_IN_S (each take-in is a frame).
BUSY_BYTES = 4096
BUSY_TAKE_IN_S = 0.1
QUIET_TICKS = 10  # the view's timer stops after this many ticks in a row found the log quiet
QUIET_TAKE_IN_S = 2.0


class LogView(ScrollView, can_focus=True):
    """Follows a growing log file; search, next/previous match, first error."""

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
        Binding("home", "scroll_home", "Top", id="log.top", show=False),
        Binding("end", "scroll_end", "Bottom", id="log.bottom", show=False),
    ]
    DEFAULT_CSS = """
    LogView { background: $surface; }
    LogView > .log--error { color: $text-error; text-style: bold; }
    LogView > .log--warning { color: $text-warning; }
    LogView > .log--dim { color: $text-muted; }
    LogView > .log--match { background: $accent 40%; }
    LogView > .log--current { background: $accent 20%; }
    """
    COMPONENT_CLASSES = {"log--error", "log--warning", "log--dim", "log--match", "log--current"}

    follow: reactive[bool] = reactive(True)

    class Status(Message):
        """Line count, follow state or a search result changed."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    class Found(Message):
        """A search (or the first-error search) ended; `line` is None when nothing matched."""

        def __init__(self, what: str, line: int | None, wrapped: bool = False) -> None:
            super().__init__()
            self.what = what
            self.line = line
            self.wrapped = wrapped
            """The match lies past the log's end (or before its start): the search went round."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        id: str | None = None,
        title: str | None = None,
        driven: bool = False,
    ) -> None:
        super().__init__(id=id)
        self.driven = driven
        """Its owner calls `take_in_new_lines` on each of its polls: no timer while quiet."""
        self.pane_title = title
        """With a title, the view's border says it and the status ("Log · 1,234 lines ·
        following"), set in the frame the lines come in (a `Status` handled by the screen
        comes a frame later: a second frame, the whole view drawn again, for each new line)."""
        self.index: LineIndex | None = None
        self.names = DerivationNames()
        self.search_text = ""
        self._search_pattern: re.Pattern[str] | None = None
        self.match_line: int | None = None
        # The build's first error as its supervisor stored it (set by the build screen): `e`
        # jumps to the line holding it.
        self.recorded_error: str | None = None
        self._indexing = False
        self._scanned = 0  # bytes of complete lines searched for Nix's Build starts
        self._cache: OrderedDict[tuple[int, bool], tuple[Strip, int]] = OrderedDict()
        # Each line as last drawn (cropped to the view, in its style), by line number: a view
        # following a log draws every visible line again each time it scrolls, the same lines
        # one row higher.
        self._drawn: dict[tuple[int, bool], tuple[tuple[int, int, Style], Strip]] = {}
        self._line_style: Style | None = None  # the view's style, worked out once a frame
        self._ticker: Timer | None = None
        self._quiet_ticks = 0  # the timer's ticks in a row that found the log quiet
        self._blank_line: tuple[tuple[int, Style], Strip] | None = None
        self._width = 0  # the longest line drawn so far: the horizontal scroll range
        self._last_status = ""
        self._taken_at = 0.0  # monotonic time of the last take-in
        if path is not None:
            self.open(path)

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        """Widget.vertical_scrollbar, a `SteadyScrollBar`: following the log moves its thumb
        by a cell only now and then, and it is drawn again only then."""
        if self._vertical_scrollbar is None:
            bar = SteadyScrollBar(
                vertical=True, name="vertical", thickness=self.scrollbar_size_vertical
            )
            bar.display = False
            bar.position = self.scroll_y  # where the view already is (see watch_scroll_y)
            self._vertical_scrollbar = bar
            self.app._start_widget(self, bar)
        return self._vertical_scrollbar

    # -- the file -------------------------------------------------------------------------------

    def open(self, path: Path) -> None:
        """Show another file (the index of the previous one is dropped)."""
        if self.index is not None:
            self.index.close()
        self.index = LineIndex(Path(path))
        self.names = DerivationNames()
        self._scanned = 0
        self._clear_cache()
        self._width = 0
        self.match_line = None
        if self.is_mounted:
            self.index_all()

    def on_mount(self) -> None:
        self._ticker = self.set_interval(BUSY_TAKE_IN_S, self._tick, pause=self.driven)
        if self.index is not None:
            self.index_all()

    def _tick(self) -> None:
        # Busy or quiet as found before taking in (after it, nothing waits).
        busy = self._busy()
        self.take_in_new_lines()
        self._quiet_ticks = 0 if busy else self._quiet_ticks + 1
        if self.driven and self._quiet_ticks >= QUIET_TICKS:
            assert self._ticker is not None
            self._ticker.pause()  # quiet again: the owner's polls take the rest in

    def _behind(self) -> int:
        """Bytes the file holds beyond what is indexed (negative: it was truncated)."""
        index = self.index
        if index is None:
            return 0
        try:
            return os.stat(index.path).st_size - index.size
        except OSError:
            return 0

    def _busy(self) -> bool:
        return self._indexing or self._behind() >= BUSY_BYTES

    def on_unmount(self) -> None:
        self.workers.cancel_node(self)
        if self.index is not None:
            self.index.close()

    def index_all(self) -> None:
        """Index an existing (possibly huge) file off the event loop."""
        if self.index is None:
            return
        # Set here, not in the thread: the next tick must not refresh the index meanwhile.
        self._indexing = True
        self._status("indexing…")
        self._index_in_worker(self.index)

    @work(thread=True, exclusive=True, group="log-index")
    def _index_in_worker(self, index: LineIndex) -> None:
        try:
            index.refresh()
            self._scan_names(index)
        except (OSError, ValueError):
            return  # the view was closed (its file with it) while this ran
        finally:
            self._indexing = False
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._grown, True)

    def _scan_names(self, index: LineIndex) -> None:
        buffer, end = index.buffer, index.complete_size
        if buffer is not None and end > self._scanned:
            try:
                self.names.scan(buffer, self._scanned, end)
            except ValueError:  # the file was truncated and its map closed meanwhile
                return
            self._scanned = end

    def take_in_new_lines(self, now: bool = False) -> None:
        """Take in what the build appended since the last tick: at once where `now` or where
        much is waiting, else at most once every QUIET_TAKE_IN_S (each take-in is a frame)."""
        index = self.index
        if index is None or self._indexing:
            return
        try:
            behind = os.stat(index.path).st_size - index.size
        except OSError:
            return
        if behind == 0:
            return
        moment = time.monotonic()
        if not now and 0 < behind < BUSY_BYTES and moment - self._taken_at < QUIET_TAKE_IN_S:
            return
        if behind >= BUSY_BYTES and self._ticker is not None:
            self._quiet_ticks = 0
            self._ticker.resume()  # a busy log: taken in at 10 Hz until it is quiet again
        self._taken_at = moment
        if behind > BACKLOG_BYTES:
            self.index_all()
            return
        last, partial = len(index) - 1, index.size > index.complete_size
        try:
            added = index.refresh(REFRESH_LIMIT_BYTES)
        except OSError as exc:  # unreadable (permissions, a vanished mount): say so, go on
            self._status(f"cannot read the log: {exc.strerror}")
            return
        if behind < 0:  # truncated or replaced: everything known is stale
            self.names.clear()
            self._scanned = 0
            self._scan_names(index)
            self._grown(replaced=True)
            return
        if partial:  # the partial last line may have grown: draw it again
            self._forget_line(last)
        self._scan_names(index)
        if added:
            self._grown()
        else:
            self.refresh()

    def _forget_line(self, number: int) -> None:
        for current in (False, True):
            self._cache.pop((number, current), None)
            self._drawn.pop((number, current), None)

    def _clear_cache(self) -> None:
        self._cache.clear()
        self._drawn.clear()

    def _grown(self, replaced: bool = False) -> None:
        if self.index is None:
            return
        if replaced:
            self._clear_cache()
        count = len(self.index)
        size = Size(self._width, count)
        if not replaced and self._grows_in_place(size):
            # A longer log whose scrollbars stay as they are (one already shown, or none needed
            # yet), no wider: the scrollbar is told and the view redrawn, without a layout of
            # the whole screen (a layout a line cost more than the rest of a quiet build's
            # second).
            self.set_reactive(LogView.virtual_size, size)
            self._scroll_update(size)
        else:
            self.virtual_size = size
        if self.follow:
            self._stick_to_end()
            # The scrollbars (and with them the height left for lines) learn of the new size
            # at the next layout: keep the end in view after it too.
            self.call_after_refresh(self._stick_to_end)
        self.refresh()
        self._status()

    def _grows_in_place(self, size: Size) -> bool:
        """Whether `size` changes nothing of the layout: only more lines, the vertical
        scrollbar already shown (it stays), the same width."""
        before = self.virtual_size
        if not (size.height >= before.height > 0):
            return False
        if self.show_vertical_scrollbar:
            return size.width == before.width
        # No scrollbar yet: none comes while every line fits the view.
        view = self.scrollable_content_region
        return (
            not self.show_horizontal_scrollbar
            and size.width <= view.width
            and size.height <= view.height
        )

    def _stick_to_end(self) -> None:
        if self.follow:
            # force: scroll even before the layout says a scrollbar is needed.
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True)

    def _status(self, extra: str = "") -> None:
        count = len(self.index) if self.index is not None else 0
        text = f"{count:,} lines" + (" · following" if self.follow else "")
        if extra:
            text += f" · {extra}"
        if text != self._last_status:
            self._last_status = text
            if self.pane_title is not None:
                # It quotes what was searched for: a border title is markup, so it goes as Text.
                # The title says it: no message (each line taken in changes the count, and a
                # message bubbles through every node above the view, a handler looked up at
                # each: half a millisecond a second of a quiet build's TUI, for no listener).
                self.border_title = Text(f"{self.pane_title} · {text}")
            else:
                self.post_message(self.Status(text))

    @property
    def line_count(self) -> int:
        """Lines in the view (an unterminated last line counts)."""
        return len(self.index) if self.index is not None else 0

    def readable(self, number: int) -> str:
        """Line `number` as shown (Nix events readable, colours resolved)."""
        assert self.index is not None
        return readable_line(self.index.line(number), self.names)[0]

    # -- drawing ----------------------------------------------------------------------------

    def _styled(self, number: int, current: bool) -> tuple[Strip, int]:
        key = (number, current)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        assert self.index is not None
        text, hint = readable_line(self.index.line(number), self.names)
        text = text.expandtabs(8)
        # Whole (not partial) component styles: a theme colour with alpha ($text-muted,
        # $accent 40%) is only blended against the background in the whole style.
        style = Style()
        if hint:
            style = self.get_component_rich_style(f"log--{hint}")
        if current:
            style += Style(bgcolor=self.get_component_rich_style("log--current").bgcolor)
        segments = [Segment(text, style)]
        if self._search_pattern is not None:
            segments = self._mark_matches(text, style)
        strip = Strip(segments)
        cached = (strip, strip.cell_length)
        self._cache[key] = cached
        if len(self._cache) > CACHE_LINES:
            self._cache.popitem(last=False)
        return cached

    def _mark_matches(self, text: str, style: Style) -> list[Segment]:
        assert self._search_pattern is not None
        match_style = style + Style(bgcolor=self.get_component_rich_style("log--match").bgcolor)
        segments: list[Segment] = []
        position = 0
        for found in self._search_pattern.finditer(text):
            if found.start() == found.end():
                continue
            if found.start() > position:
                segments.append(Segment(text[position : found.start()], style))
            segments.append(Segment(found.group(), match_style))
            position = found.end()
        if position < len(text):
            segments.append(Segment(text[position:], style))
        return segments

    def render_lines(self, crop: Region) -> list[Strip]:
        # The view's style is a walk up the DOM: once a frame, not three times a line.
        self._line_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._line_style = None

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        number = scroll_y + y
        width = self.scrollable_content_region.width
        base = self._line_style or self.rich_style
        index = self.index
        if index is None or self._indexing or number >= len(index):
            return self._blank(width, base)
        current = number == self.match_line
        how = (scroll_x, width, base)
        drawn = self._drawn.get((number, current))
        if drawn is not None and drawn[0] == how:
            return drawn[1]
        try:
            strip, length = self._styled(number, current)
        except (IndexError, ValueError):  # the file was truncated under us: next tick redraws
            return Strip.blank(width, base)
        if length > self._width:
            # Lines longer than the view seen so far widen the scroll range (never narrow it).
            self._width = length
            self.call_later(self._grown)
        strip = strip.crop(scroll_x, scroll_x + width)
        strip = strip.extend_cell_length(width, base).apply_style(base)
        if len(self._drawn) >= CACHE_LINES:
            self._drawn.clear()
        self._drawn[(number, current)] = (how, strip)
        return strip

    def _blank(self, width: int, style: Style) -> Strip:
        """A line below the log's end (a short log leaves most of the view blank)."""
        blank = self._blank_line
        if blank is None or blank[0] != (width, style):
            blank = self._blank_line = ((width, style), Strip.blank(width, style))
        return blank[1]

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._clear_cache()  # the theme changed: the cached styles are stale

    # -- following ------------------------------------------------------------------------------

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if not self.show_vertical_scrollbar:
            # Textual tells only a shown bar where the view is: following a log scrolls before
            # the layout shows the bar, which then drew its thumb at the top until the next
            # scroll (a poll later).
            self.vertical_scrollbar.position = new_value
        # Scrolling up (keys, wheel, scrollbar) stops following; reaching the end resumes it.
        if new_value < old_value and new_value < self.max_scroll_y - 0.5:
            self.follow = False
        elif (
            not self.follow
            and self.match_line is None
            and new_value > old_value
            and new_value >= self.max_scroll_y
        ):
            self.follow = True

    def watch_follow(self, follow: bool) -> None:
        if self.is_mounted:
            self._status()

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self._clear_match()
            self._grown()

    def action_scroll_end(self) -> None:
        self._clear_match()
        self.follow = True
        self._grown()

    def action_scroll_home(self) -> None:
        self.follow = False
        self.scroll_to(y=0, animate=False, force=True)

    def _clear_match(self) -> None:
        if self.match_line is not None:
            self._forget_line(self.match_line)
            self.match_line = None
            self.refresh()

    def show_line(self, number: int) -> None:
        """Scroll so that line `number` is in the middle of the view; stop following."""
        self.follow = False
        if self.match_line is not None:
            self._forget_line(self.match_line)
        self.match_line = number
        self._forget_line(number)
        height = self.scrollable_content_region.height
        self.scroll_to(y=max(0, number - height // 2), animate=False, force=True)
        self.refresh()

    # -- searching ------------------------------------------------------------------------------

    def search(self, text: str, backwards: bool = False) -> None:
        """Find `text` after the current match (or the top of the view), or before it; show it.

        Runs in a worker; the result arrives as a `Found` message and a `Status`.
        """
        if self.index is None or not text:
            return
        if text != self.search_text:
            self.search_text = text
            self._search_pattern = re.compile(re.escape(text), re.IGNORECASE)
            self._clear_cache()
            self.refresh()
        if self.match_line is not None:
            start = self.match_line - 1 if backwards else self.match_line + 1
        else:
            top = int(self.scroll_offset.y)
            start = top + self.scrollable_content_region.height if backwards else top
        self._status(f"searching {text!r}…")
        # Before the first line (backwards from line 0) is nothing: the search wraps at once.
        start = max(-1, start) if backwards else max(0, start)
        self._find(compile_search(text), start, backwards, repr(text), wrap=True)

    def first_error(self) -> None:
        """Jump to the line holding `recorded_error`, the build's stored first error (the one
        history and the report show), else to the first line that reads like an error (searched
        in a worker)."""
        if self.index is None:
            return
        self.match_line = None
        recorded = (self.recorded_error or "").strip()
        if recorded:
            self._find_recorded(recorded)
        else:
            self._find(ERROR_PATTERN, 0, False, "first error")

    @work(thread=True, exclusive=True, group="log-search")
    def _find_recorded(self, recorded: str) -> None:
        """The first line whose readable text holds `recorded`; else the first error-like line.

        The stored error is readable text (colours gone, a builder's line without its `name> `
        prefix, Nix's message out of its JSON), so raw bytes cannot be searched for it: every
        line that reads like an error is a candidate, made readable and compared.
        """
        index = self.index
        if index is None:
            return
        worker = get_current_worker()
        first: int | None = None  # the regex's answer, the fallback
        found: int | None = None
        line, count = 0, len(index)
        try:
            while line < count and found is None and not worker.is_cancelled:
                candidate = index.search(ERROR_PATTERN, line)
                if candidate is None:
                    break
                first = candidate if first is None else first
                if recorded in readable_line(index.line(candidate), self.names)[0]:
                    found = candidate
                line = candidate + 1
        except (OSError, ValueError, IndexError):  # truncated or closed meanwhile
            found = None
        if worker.is_cancelled:
            return
        if found is not None:
            self.post_message(self.Found("first error (as recorded)", found))
        else:
            self.post_message(self.Found("first error", first))

    @work(thread=True, exclusive=True, group="log-search")
    def _find(
        self,
        pattern: re.Pattern[bytes],
        start: int,
        backwards: bool,
        what: str,
        wrap: bool = False,
    ) -> None:
        """Search the mapped file in slices; post the line found (or None). `wrap`: past the
        end (before the start, backwards) the search goes on from the other end, like less."""
        index = self.index
        if index is None:
            return
        worker = get_current_worker()
        count = len(index)
        wrapped = False
        try:
            found = self._scan(index, pattern, start, backwards, count, worker)
            if found is None and wrap and not worker.is_cancelled:
                wrapped = True
                found = self._scan(
                    index, pattern, count - 1 if backwards else 0, backwards, count, worker
                )
        except (OSError, ValueError, IndexError):  # truncated or closed meanwhile
            found = None
        if not worker.is_cancelled:
            self.post_message(self.Found(what, found, wrapped and found is not None))

    @staticmethod
    def _scan(
        index: LineIndex,
        pattern: re.Pattern[bytes],
        start: int,
        backwards: bool,
        count: int,
        worker: Any,
    ) -> int | None:
        found: int | None = None
        if backwards:
            end = min(start, count - 1)
            while end >= 0 and found is None and not worker.is_cancelled:
                stop = max(0, end - SEARCH_SLICE_LINES)
                # The slice's first line is searched too: stop is inclusive backwards.
                found = index.search(pattern, end + 1, backwards=True, stop_line=stop)
                if found is not None and found > end:
                    found = None
                end = stop - 1
        else:
            line = start
            while line < count and found is None and not worker.is_cancelled:
                stop = min(count, line + SEARCH_SLICE_LINES)
                found = index.search(pattern, line, stop_line=stop)
                line = stop
        return found

    def on_log_view_found(self, message: Found) -> None:
        if message.line is None:
            self._status(f"{message.what} not found")
        else:
            self.show_line(message.line)
            wrapped = " (search wrapped around)" if message.wrapped else ""
            self._status(f"{message.what} at line {message.line + 1:,}{wrapped}")

    def action_next_match(self) -> None:
        self.search(self.search_text)

    def action_previous_match(self) -> None:
        self.search(self.search_text, backwards=True)

    def action_first_error(self) -> None:
        self.first_error()

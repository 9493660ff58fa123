"""What is on the terminal, cell by cell, so that a frame writes only the cells that changed.

Textual's compositor repaints whole widget lines: a process table whose time column ticks, a
title whose elapsed seconds move, a graph whose newest column grew, each rewrite every cell of
every line they cover, and each piece of styled text is written as its full SGR sequence
followed by a reset. Over SSH that is most of what watching a build costs (issue 23: 46 KB/s
against htop's 2 KB/s at 160x48).

`TerminalModel` keeps the characters and styles last written to each cell. Given the
compositor's update (`ChopsUpdate` or `LayoutUpdate`), it writes, per line, only the stretch
from the first to the last cell that differ; styles are written only where they change (no
reset after every piece); a run of blanks is erased with ECH (`CSI n X`, which fills with the
current background like every terminal that tmux, screen or xterm-256color describes) rather
than written out. Unknown cells (after a resize, a resume, at start) are always written.

The app calls `render` from its `_display`; anything it does not know (another update type, a
control segment, a link) is rendered by Textual as before and the model forgets those lines.
`WORKBENCH_FULL_REPAINT=1` turns the model off.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from rich.cells import get_character_cell_size
from rich.style import Style
from textual._compositor import ChopsUpdate, CompositorUpdate, LayoutUpdate
from textual.strip import Strip

# Blank runs at least this long are erased with ECH (+ a cursor move) instead of written.
ERASE_AT = 8


def enabled() -> bool:
    """Whether the app diffs its frames (`WORKBENCH_FULL_REPAINT=1` says no)."""
    return os.environ.get("WORKBENCH_FULL_REPAINT", "") not in ("1", "yes", "true")


class WrittenUpdate(CompositorUpdate):
    """An update already rendered to terminal text by `TerminalModel.render`."""

    def __init__(self, text: str) -> None:
        self.text = text

    def render_segments(self, console: Any) -> str:
        return self.text


class TerminalModel:
    """The cells on the terminal as last written: one list of characters and one of styles per
    line. A wide character's second cell holds ""; None in `chars` is a cell not known."""

    def __init__(self) -> None:
        self.width = 0
        self.height = 0
        self._chars: list[list[str | None]] = []
        self._styles: list[list[Style | None]] = []
        self._codes: dict[Style, str] = {}

    def reset(self, width: int | None = None, height: int | None = None) -> None:
        """Forget every cell (the terminal was cleared, resized, or given to another program)."""
        if width is not None and height is not None:
            self.width, self.height = width, height
        self._chars = [[None] * self.width for _ in range(self.height)]
        self._styles = [[None] * self.width for _ in range(self.height)]

    def render(self, update: Any, color_system: Any) -> str | None:
        """The terminal sequence for a compositor update, writing only changed cells; None if
        the update is not one this knows (the caller renders it as Textual does)."""
        pieces = _pieces(update)
        if pieces is None:
            return None
        painted = []
        for y, x, segments in pieces:
            cells = _cells(segments)
            if cells is None or not 0 <= y < self.height:
                self.reset()  # Textual writes this one as it is: what it leaves is not known
                return None
            painted.append((y, x, cells))
        out: list[str] = []
        current: list[Style | None] = [None]
        for y, x, (chars, styles) in painted:
            self._write(y, x, chars, styles, out, current, color_system)
        if current[0] is not None:
            out.append("\x1b[0m")
        return "".join(out)

    def _write(
        self,
        y: int,
        x: int,
        chars: list[str],
        styles: list[Style | None],
        out: list[str],
        current: list[Style | None],
        color_system: Any,
    ) -> None:
        width = self.width
        if x >= width:
            return
        if x + len(chars) > width:
            del chars[width - x :], styles[width - x :]
        old_chars, old_styles = self._chars[y], self._styles[y]
        count = len(chars)
        if chars == old_chars[x : x + count] and styles == old_styles[x : x + count]:
            return  # every cell already shows this (most lines of a frame: compared in C)
        first = _common_prefix(chars, styles, old_chars, old_styles, x)
        last = count - 1 - _common_suffix(chars, styles, old_chars, old_styles, x, first)
        # Never start or end inside a wide character (new or old).
        while first > 0 and (chars[first] == "" or old_chars[x + first] == ""):
            first -= 1
        while last + 1 < count and (chars[last + 1] == "" or old_chars[x + last + 1] == ""):
            last += 1
        if first == 0 and x > 0 and old_chars[x] == "":
            old_chars[x - 1] = None  # its first half is cut by this write: not known any more
        end = x + last + 1
        if last + 1 == count and end < width and old_chars[end] == "":
            old_chars[end] = None
        out.append(f"\x1b[{y + 1};{x + first + 1}H")
        start = first
        codes = self._codes
        while start <= last:
            style = styles[start]
            stop = start + 1
            while stop <= last and styles[stop] == style:
                stop += 1
            if style != current[0]:
                if style is None:
                    out.append("\x1b[0m")
                else:
                    code = codes.get(style)
                    if code is None:
                        code = codes[style] = style._make_ansi_codes(color_system)
                    out.append(f"\x1b[0;{code}m" if code else "\x1b[0m")
                current[0] = style
            text = "".join(chars[start:stop])
            if len(text) >= ERASE_AT and _erasable(style) and not text.strip(" "):
                out.append(f"\x1b[{len(text)}X")
                if stop <= last:
                    out.append(f"\x1b[{len(text)}C")
            else:
                out.append(text)
            start = stop
        old_chars[x + first : end] = chars[first : last + 1]
        old_styles[x + first : end] = styles[first : last + 1]


def _common_prefix(
    chars: list[str],
    styles: list[Style | None],
    old_chars: list[str | None],
    old_styles: list[Style | None],
    x: int,
) -> int:
    """How many cells from the start already show these characters and styles."""
    return _matching_run(chars, styles, old_chars, old_styles, x, len(chars), from_end=False)


def _common_suffix(
    chars: list[str],
    styles: list[Style | None],
    old_chars: list[str | None],
    old_styles: list[Style | None],
    x: int,
    first: int,
) -> int:
    """How many cells at the end (after `first`, which differs) already show these."""
    most = len(chars) - first - 1
    return _matching_run(chars, styles, old_chars, old_styles, x, most, from_end=True)


def _matching_run(
    chars: list[str],
    styles: list[Style | None],
    old_chars: list[str | None],
    old_styles: list[Style | None],
    x: int,
    most: int,
    from_end: bool,
) -> int:
    """How many cells (at most `most`) from the start, or back from the end, already show these
    characters and styles: a binary search over slice comparisons (each done in C), not a
    Python loop over a line's cells."""
    count = len(chars)
    low, high = 0, most  # the answer lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        # The cells between `low` and `middle` from the start (or from the end) of the piece.
        start, end = (count - middle, count - low) if from_end else (low, middle)
        if (
            chars[start:end] == old_chars[x + start : x + end]
            and styles[start:end] == old_styles[x + start : x + end]
        ):
            low = middle
        else:
            high = middle - 1
    return low


def _erasable(style: Style | None) -> bool:
    """Whether ECH draws blanks of this style as they are: no attribute shows on a blank."""
    if style is None:
        return True
    return not (
        style.underline
        or style.underline2
        or style.strike
        or style.overline
        or style.reverse
        or style.blink
        or style.blink2
        or style.link
    )


def _pieces(update: Any) -> list[tuple[int, int, Iterable[Any]]] | None:
    """(y, x, segments) of what an update paints, as Textual's own rendering paints it."""
    pieces: list[tuple[int, int, Iterable[Any]]] = []
    if isinstance(update, ChopsUpdate):
        chops, chop_ends = update.chops, update.chop_ends
        for y, x1, x2 in update.spans:
            for end, (x, strip) in zip(chop_ends[y], chops[y].items(), strict=False):
                if strip is None or x > x2 or end <= x1:
                    continue
                if not (x2 > x >= x1 and end <= x2):
                    strip = strip.crop(0, min(end, x2) - x)
                pieces.append((y, x, strip))
        return pieces
    if isinstance(update, LayoutUpdate):
        x = update.region.x
        for y, line in enumerate(update.strips, update.region.y):
            if isinstance(line, Strip):
                # Textual before 8 holds one Strip a line (textual/_compositor.py, LayoutUpdate,
                # 6.2.1), 8 a list of Strips: the pin's Textual is 6.2.1.
                pieces.append((y, x, line))
                continue
            segments: list[Any] = []
            for strip in line:
                segments.extend(strip)
            pieces.append((y, x, segments))
        return pieces
    return None


def _cells(segments: Iterable[Any]) -> tuple[list[str], list[Style | None]] | None:
    """One character and one style per cell; None for what cells cannot say (controls)."""
    chars: list[str] = []
    styles: list[Style | None] = []
    for text, style, control in segments:
        if control:
            return None
        if style is not None:
            if style.link_id:
                if style.link:
                    return None
                # Meta (Textual's mouse offsets) is not written to the terminal; a style with
                # meta is unique to the piece it was made for (rich gives it its own id) and
                # would never equal the cell's last style: compare what is written, the style
                # without it.
                style = _without_meta(style)
            else:
                style = _one_of(style)
        if text.isascii():
            if "\x1b" in text or "\n" in text or "\r" in text:
                return None
            chars.extend(text)
            styles.extend([style] * len(text))
            continue
        for character in text:
            size = get_character_cell_size(character)
            if size == 0:
                if not chars:
                    return None
                chars[-1] += character  # a combining mark rides on the cell before
                continue
            chars.append(character)
            styles.append(style)
            if size == 2:
                chars.append("")
                styles.append(style)
    return chars, styles


_PLAIN: dict[Style, Style] = {}
_SAME: dict[Style, Style] = {}


def _one_of(style: Style) -> Style:
    """One object for each distinct style (bounded cache): a frame's strips are made anew, their
    styles equal to the cells' last ones but other objects, and comparing two lists of styles
    calls Style.__eq__ (Python) for each cell whose two styles are not the same object (35,000
    calls in 39 frames of a quiet build, VM); once a piece, here, instead."""
    same = _SAME.get(style)
    if same is None:
        if len(_SAME) > 4096:
            _SAME.clear()
        same = _SAME[style] = style
    return same


def _without_meta(style: Style) -> Style:
    """`style` without its meta, one object per distinct written style (bounded cache)."""
    plain = _PLAIN.get(style)
    if plain is None:
        if len(_PLAIN) > 4096:
            _PLAIN.clear()
        plain = _PLAIN[style] = _one_of(style.clear_meta_and_links())
    return plain

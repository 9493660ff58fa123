"""The terminal model finds the stretch of a line that changed by comparing slices (in C), not
cell by cell in Python (issue 23: the per-cell loop was a tenth of the TUI's CPU on a quiet
build). It must find the same first and last changed cell as the plain loop, for any line."""

from __future__ import annotations

import random

import pytest
from rich.color import ColorSystem
from rich.segment import Segment
from rich.style import Style
from textual._compositor import ChopsUpdate, LayoutUpdate
from textual.geometry import Region
from textual.strip import Strip

from workbench.tui.terminal_model import TerminalModel, _common_prefix, _common_suffix

STYLES = [None, Style(bold=True), Style(color="red"), Style(color="red")]  # two equal, not same


def _plain(chars, styles, old_chars, old_styles, x):  # type: ignore[no-untyped-def]
    first = 0
    while first < len(chars) and (
        chars[first] == old_chars[x + first] and styles[first] == old_styles[x + first]
    ):
        first += 1
    last = len(chars) - 1
    while last > first and (
        chars[last] == old_chars[x + last] and styles[last] == old_styles[x + last]
    ):
        last -= 1
    return first, last


def test_the_changed_stretch_is_the_one_the_plain_loop_finds() -> None:
    rng = random.Random(23)
    for _ in range(3000):
        width = rng.randint(1, 40)
        old_chars = [rng.choice("ab ") if rng.random() > 0.05 else None for _ in range(width)]
        old_styles = [rng.choice(STYLES) for _ in range(width)]
        x = rng.randint(0, width - 1)
        count = rng.randint(1, width - x)
        chars = [c if c is not None else "a" for c in old_chars[x : x + count]]
        styles = list(old_styles[x : x + count])
        for _ in range(rng.randint(1, 3)):  # at least one cell differs
            cell = rng.randrange(count)
            chars[cell] = "z" if rng.random() < 0.7 else chars[cell]
            styles[cell] = Style(italic=True) if chars[cell] != "z" else styles[cell]
        first = _common_prefix(chars, styles, old_chars, old_styles, x)
        last = count - 1 - _common_suffix(chars, styles, old_chars, old_styles, x, first)
        assert (first, last) == _plain(chars, styles, old_chars, old_styles, x)


def test_equal_styles_of_new_strips_are_compared_once_a_piece_not_once_a_cell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each frame's strips are new objects: a line drawn again with equal styles (other
    objects) writes nothing, and costs a style comparison a piece, not one a cell."""
    model = TerminalModel()
    model.reset(80, 2)

    def line(text: str) -> ChopsUpdate:
        segments = [
            Segment(text[:40], Style(color="red", bold=True)),
            Segment(text[40:], Style(color="blue")),
        ]
        return ChopsUpdate([{0: Strip(segments)}, {0: None}], [(0, 0, 80)], [[80], [80]])

    first = model.render(line("x" * 80), ColorSystem.TRUECOLOR)
    assert first and "x" * 40 in first
    calls: list[int] = []
    original = Style.__eq__

    def counted(self: Style, other: object) -> bool:
        calls.append(1)
        return original(self, other)

    monkeypatch.setattr(Style, "__eq__", counted)
    assert model.render(line("x" * 80), ColorSystem.TRUECOLOR) == ""  # nothing changed
    assert len(calls) <= 4, len(calls)  # was 80: one for each cell
    changed = model.render(line("x" * 79 + "y"), ColorSystem.TRUECOLOR)
    assert changed is not None and changed.endswith("y\x1b[0m") and "x" not in changed


@pytest.mark.parametrize("one_strip_a_line", [True, False])
def test_a_layout_update_of_either_textual_shape_is_written(one_strip_a_line: bool) -> None:
    # Textual 8 gives a LayoutUpdate a list of Strips a line; the pin's Textual (6.2.1, the
    # lower bound pyproject.toml states and `nix run .#workbench` is built with) one Strip a
    # line. The model read only the first: on 6.2.1 the app died at its first frame.
    red = Style(color="red")
    rows = [Strip([Segment("ab", red), Segment("cd")]), Strip([Segment("efgh")])]
    strips = rows if one_strip_a_line else [[row] for row in rows]
    model = TerminalModel()
    model.reset(4, 2)
    written = model.render(LayoutUpdate(strips, Region(0, 0, 4, 2)), ColorSystem.TRUECOLOR)
    assert written is not None
    assert "ab" in written and "cd" in written and "efgh" in written, repr(written)
    # Drawn again, nothing changed: nothing is written.
    again = model.render(LayoutUpdate(strips, Region(0, 0, 4, 2)), ColorSystem.TRUECOLOR)
    assert again == ""

"""The terminal model finds the stretch of a line that changed by comparing slices (in C), not
cell by cell in Python (issue 23: the per-cell loop was a tenth of the TUI's CPU on a quiet
build). It must find the same first and last changed cell as the plain loop, for any line."""

from __future__ import annotations

import random

from rich.style import Style

from workbench.tui.terminal_model import _common_prefix, _common_suffix

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

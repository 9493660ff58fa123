"""A failed snapshot, said in words: the rows whose text or colours differ from the stored SVG.

pytest-textual-snapshot writes its HTML report beside a failed run, which a CI log never shows;
this puts the differing rows into the failure's own report, so a snapshot that fails only on
a loaded CI machine can be understood from the log alone.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict

_STYLE = re.compile(r"\.(terminal-[\w-]*?r\d+)\s*\{([^}]*)\}")
_RECT = re.compile(r'<rect fill="([^"]+)" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)"')
_TEXT = re.compile(r'<text class="([^"]+)" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', re.S)
CELL_WIDTH = 12.2  # the width of one cell in Textual's SVG export
ROW_HEIGHT = 24.4


def svg_rows(svg: str) -> dict[int, tuple[str, str]]:
    """Row number -> (its text, its colours: each span's start column and style)."""
    styles = {name: rule.strip() for name, rule in _STYLE.findall(svg)}
    texts: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    for cls, x, y, body in _TEXT.findall(svg):
        row, column = round(float(y) / ROW_HEIGHT), round(float(x) / CELL_WIDTH)
        texts[row].append((column, html.unescape(body).replace("\xa0", " "), styles.get(cls, cls)))
    fills: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for fill, x, y, _width in _RECT.findall(svg):
        fills[round(float(y) / ROW_HEIGHT)].append((round(float(x) / CELL_WIDTH), fill))
    rows = {}
    for row in set(texts) | set(fills):
        line = ""
        for column, body, _style in sorted(texts[row]):
            line = line.ljust(column) + body
        colours = " ".join(f"{c}:{s}" for c, b, s in sorted(texts[row]) if b.strip())
        colours += " | " + " ".join(f"{c}:{f}" for c, f in sorted(fills[row]))
        rows[row] = (line.rstrip(), colours)
    return rows


def describe_difference(expected: str, actual: str, limit: int = 14) -> str:
    """The rows that differ, stored first then as drawn now (at most `limit` of them)."""
    before, after = svg_rows(expected), svg_rows(actual)
    lines: list[str] = []
    for row in sorted(set(before) | set(after)):
        was, now = before.get(row, ("", "")), after.get(row, ("", ""))
        if was[0] != now[0]:
            lines += [f"row {row} stored: {was[0]!r}", f"row {row} drawn:  {now[0]!r}"]
        elif was[1] != now[1]:
            lines += [f"row {row} same text, other colours: {now[0]!r}"]
    if not lines:
        return "the rows' text and colours are the same: the difference is elsewhere in the SVG"
    shown = lines[: 2 * limit]
    if len(lines) > len(shown):
        shown.append(f"… and {len(lines) - len(shown)} more lines of difference")
    return "\n".join(shown)

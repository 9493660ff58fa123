"""Build output as data: control characters shown the way `cat -v` shows them.

A build's output reaches terminals (`workbench logs`, `attach`, `run`, `status`) and the TUI.
Left raw, its control characters act: an OSC sequence sets the terminal's title or writes the
clipboard, "\\x1b[2J" clears the screen, a C1 CSI (U+009B) does the same on some terminals.
`visible` turns every control character except the tab into printable text: C0 as `^X`, DEL as
`^?`, C1 as `M-^X` (what `cat -v` prints for those bytes), so nothing is lost from sight and
nothing acts. `terminal_text` first resolves what a terminal would have drawn of a line
(carriage-return rewrites, colour and cursor sequences) and then makes the rest visible.
"""

from __future__ import annotations

import re

# ANSI escapes: ninja on a terminal ends lines with "\x1b[K"; compilers colour diagnostics.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# C0 but tab, DEL, C1. Newlines too: a note or a file name shown on one line must stay one line.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def clean_terminal_line(line: str) -> str:
    """The text a terminal would finally show for a line with "\\r" rewrites and ANSI escapes."""
    if "\r" in line:
        # ninja on a terminal rewrites one line with "\r"; the last non-empty rewrite is current.
        parts = [part for part in line.split("\r") if part]
        line = parts[-1] if parts else ""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    return line


def _caret(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    low = code - 0x80  # C1: cat -v prints the byte's low seven bits after "M-"
    return "M-^" + (chr(low + 0x40) if low < 0x20 else "?")


def visible(text: str) -> str:
    """`text` with its control characters (all but tab) written as `cat -v` writes them."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_caret, text)


def visible_lines(text: str) -> str:
    """`visible` for text of several lines (a report): its newlines stay newlines."""
    return "\n".join(visible(line) for line in text.split("\n"))


def terminal_text(line: str) -> str:
    """One line of output as a terminal would finally show it, with no control left to act."""
    if "\r" in line or "\x1b" in line:
        line = clean_terminal_line(line)
    return visible(line)

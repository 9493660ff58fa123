"""ASCII output where the user's locale cannot show UTF-8 (LANG=C, LC_ALL=POSIX, or a locale
this host lacks, which falls back to C).

Python itself then runs in UTF-8 mode (PEP 540 turns it on for the C locale) and would print
★ ✓ ✗ · × as UTF-8 bytes the terminal shows as garbage. Instead the command line's standard
output and error are re-encoded as ASCII, each glyph the workbench uses replaced by its ASCII
meaning (★ -> *, ✓ -> ok, ✗ -> x, · -> -, × -> x) and any other character by its unaccented
letter or "?". The TUI draws with Textual, which has no such fallback: it is not covered.
"""

from __future__ import annotations

import codecs
import os
import sys
import unicodedata

HANDLER = "workbench-ascii"
GLYPHS = {
    "★": "*",
    "✓": "ok",
    "✗": "x",
    "✘": "x",
    "·": "-",
    "×": "x",
    "—": "-",
    "–": "-",
    "…": "...",
    "→": "->",
    "←": "<-",
    "↔": "<->",
    "≥": ">=",
    "≤": "<=",
    "≈": "~",
    "±": "+/-",
    "µ": "u",
    "°": "deg",
    "█": "#",
    "▌": "#",
    "░": ".",
    "▁": "_",
    "•": "*",
    "⚠": "!",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "\u00a0": " ",
}


def ascii_of(text: str) -> str:
    """`text` in ASCII: known glyphs by their meaning, letters without their accents, else ?."""
    out = []
    for char in text:
        if char.isascii():
            out.append(char)
        elif char in GLYPHS:
            out.append(GLYPHS[char])
        else:
            plain = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()
            out.append(plain or "?")
    return "".join(out)


def _replace(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    return ascii_of(error.object[error.start : error.end]), error.end


def locale_lacks_utf8() -> bool:
    """Whether the user set a locale (LC_ALL, LC_CTYPE or LANG) that is C/POSIX or unknown
    here: Python runs in UTF-8 mode for it without being asked (PYTHONUTF8 unset). With no
    locale set at all (a bare container) UTF-8 is kept."""
    # LC_CTYPE is not asked: Python sets it to C.UTF-8 itself when it coerces the C locale.
    chosen = os.environ.get("LC_ALL") or os.environ.get("LANG") or ""
    says_utf8 = "utf-8" in chosen.lower() or "utf8" in chosen.lower()
    return (
        bool(sys.flags.utf8_mode)
        and bool(chosen)
        and not says_utf8
        and os.environ.get("PYTHONUTF8") is None
    )


def use_ascii_when_needed() -> bool:
    """Re-encode stdout and stderr as ASCII when the locale lacks UTF-8; whether it did."""
    if not locale_lacks_utf8():
        return False
    codecs.register_error(HANDLER, _replace)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(encoding="ascii", errors=HANDLER)
    return True

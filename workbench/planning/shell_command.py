"""A command as a person can paste it into a shell: each word quoted where needed, one line.

Its own small module so that what only shows a command (`bt`'s report, which races plain gdb)
need not import the launcher with it.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence


def shell_word(word: str) -> str:
    """One argv word, quoted for a POSIX shell where it needs it."""
    # A newline inside quotes would break the command over lines: bash's $'...' keeps it one.
    if "\n" not in word:
        return shlex.quote(word)
    escaped = word.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"$'{escaped}'"


def display(argv: Sequence[str]) -> str:
    """argv as a command a person can paste into a shell (quoted where needed, one line)."""
    return " ".join(shell_word(word) for word in argv)

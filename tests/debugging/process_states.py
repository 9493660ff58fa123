"""Waiting on a process's real state in /proc instead of sleeping a fixed time.

A signal, an exit or a detach takes effect when the kernel gets to it; on a loaded machine
that is later than any fixed pause. These wait for the state itself, with a bound that only
a broken program (never a slow machine) can reach.
"""

from __future__ import annotations

import time
from pathlib import Path

BOUND_S = 20.0


def state_of(pid: int) -> str | None:
    """The process's state letter (R, S, T, t, Z...), or None when its /proc entry is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()[0]


def wait_for_state(pid: int, wanted: set[str | None], bound: float = BOUND_S) -> str | None:
    """Poll until the state is one of `wanted` (None: gone); the last state seen."""
    deadline = time.monotonic() + bound
    state = state_of(pid)
    while state not in wanted and time.monotonic() < deadline:
        time.sleep(0.002)
        state = state_of(pid)
    return state

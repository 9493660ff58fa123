"""Each thread's states and CPU time between samples, polled from /proc without stopping it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from workbench.debugging.capture import proc_threads
from workbench.debugging.model import (
    ThreadActivity,
)


class ActivityTracker:
    """Polls /proc between samples: per thread, the states seen and the CPU time used."""

    def __init__(self, pid: int, proc: Path) -> None:
        self.pid = pid
        self.proc = proc
        self.activity: dict[int, ThreadActivity] = {}
        self.last: dict[int, tuple[str, str | None]] = {}
        # Each thread's first /proc io counters and when they were read: output advancing
        # between the first and the last look is progress (read at each watch's ends only).
        self.first_io: dict[int, tuple[float, dict[str, int]]] = {}

    def look_at_io(self) -> None:
        """Read every thread's io counters; record how far they moved since its first read."""
        for tid in proc_threads.thread_ids(self.pid, self.proc):
            counters = proc_threads.read_io(self.pid, tid, self.proc)
            if counters is None:
                continue
            now = time.monotonic()
            first = self.first_io.setdefault(tid, (now, counters))
            entry = self.activity.setdefault(tid, ThreadActivity(tid=tid))
            entry.io = {key: counters[key] - first[1][key] for key in proc_threads.IO_FIELDS}
            entry.io_seconds = now - first[0]

    def watch(
        self,
        seconds: float,
        poll_every: float,
        between: Callable[[], bool] | None = None,
    ) -> bool:
        """Observe for `seconds` (at least once); False when the process has gone.

        `between` runs after each poll for as long as it returns True (the PC sampler), and
        the watch lasts until it is done even past `seconds`.
        """
        start = time.monotonic()
        first = self._poll()
        if first is None:
            return False
        self.look_at_io()
        latest = first
        busy = between is not None
        while time.monotonic() - start < seconds or busy:
            if busy:
                assert between is not None
                busy = between()
            time.sleep(min(poll_every, max(0.001, seconds - (time.monotonic() - start))))
            polled = self._poll()
            if polled is None:
                return False
            latest = polled
        self.look_at_io()
        elapsed = time.monotonic() - start
        for tid, ticks in latest.items():
            if tid in first:
                entry = self.activity[tid]
                entry.cpu_seconds += (ticks - first[tid]) / proc_threads.CLOCK_TICKS
                entry.seconds += elapsed
        return True

    def _poll(self) -> dict[int, int] | None:
        stat = proc_threads.read_stat(self.pid, proc=self.proc)
        if stat is None or stat.state in ("Z", "X"):
            return None
        ticks: dict[int, int] = {}
        for tid in proc_threads.thread_ids(self.pid, self.proc):
            task = proc_threads.read_stat(self.pid, tid, self.proc)
            if task is None:
                continue
            wchan = proc_threads.read_wchan(self.pid, tid, self.proc)
            entry = self.activity.setdefault(tid, ThreadActivity(tid=tid))
            entry.observations += 1
            entry.states[task.state] = entry.states.get(task.state, 0) + 1
            entry.wchan = wchan or entry.wchan
            self.last[tid] = (task.state, wchan)
            ticks[tid] = task.cpu_ticks
        return ticks

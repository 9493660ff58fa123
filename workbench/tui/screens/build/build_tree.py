"""Every process of a running build, for the build screen's "all processes" view: the
supervisor's descendants read with psutil, classified as the monitor does, CPU measured
between two looks (the supervisor's live view lists only compilers, linkers and builders, so
a hung test binary under `workbench run` would not be there to debug)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import psutil

from workbench.monitor.classification import classify
from workbench.supervision.stall import ProcessRow


@dataclass
class TreeReader:
    """Reads a build's process tree; keeps the psutil handles so CPU % is over a poll."""

    handles: dict[int, psutil.Process] = field(default_factory=dict)

    def rows(
        self, supervisor_pid: int | None, limit: int = 500, root_pid: int | None = None
    ) -> tuple[ProcessRow, ...]:
        """The supervisor's descendants (not the supervisor), busiest first; with `root_pid`
        (the build's root) also it and its descendants: a build adopted by a new supervisor is
        the child of its keeper (supervision/keeper.py), not of the supervisor."""
        found: list[psutil.Process] = []
        if supervisor_pid is not None:
            try:
                found = psutil.Process(supervisor_pid).children(recursive=True)
            except psutil.Error:
                found = []
        if root_pid is not None and root_pid not in {process.pid for process in found}:
            try:
                root = psutil.Process(root_pid)
                found += [root, *root.children(recursive=True)]
            except psutil.Error:
                pass
        now = time.time()
        rows: list[ProcessRow] = []
        alive: dict[int, psutil.Process] = {}
        for fresh in found:
            process = self.handles.get(fresh.pid, fresh)
            try:
                with process.oneshot():
                    name = process.name()
                    cmdline = process.cmdline()
                    cpu = process.cpu_percent(None)  # since the last look (0.0 the first time)
                    rss = process.memory_info().rss
                    started = process.create_time()
                    state = process.status()
            except psutil.Error:
                continue
            alive[process.pid] = process
            what = classify(name, cmdline)
            rows.append(
                ProcessRow(
                    pid=process.pid,
                    kind=what.kind.value,
                    tool=what.tool or name,
                    file=what.file,
                    cpu_percent=cpu,
                    rss=rss,
                    running_s=max(0.0, now - started),
                    state=_STATE_LETTERS.get(state, "?"),
                )
            )
        self.handles = alive
        rows.sort(key=lambda row: (-(row.cpu_percent or 0.0), -(row.rss or 0)))
        return tuple(rows[:limit])


_STATE_LETTERS = {
    psutil.STATUS_RUNNING: "R",
    psutil.STATUS_SLEEPING: "S",
    psutil.STATUS_DISK_SLEEP: "D",
    psutil.STATUS_STOPPED: "T",
    psutil.STATUS_ZOMBIE: "Z",
    psutil.STATUS_IDLE: "I",
}

"""Telling a running build from one whose supervisor vanished (a reboot, `kill -9`, a crash).

A row in state `running` whose supervisor PID is gone (or now belongs to another process: the
start time tells) is marked `lost`, with what is known: the last progress, whether build
processes still run, and where the log is. Only this host's rows are judged: a state directory
in a shared home may hold other hosts' builds, whose PIDs mean nothing here.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable

import psutil

from workbench.supervision import tree
from workbench.supervision.history import STARTING, BuildRecord, History

# A row the CLI created but whose supervisor never reported: the CLI died in between.
STARTING_TIMEOUT_S = 60.0


def supervisor_running(record: BuildRecord) -> bool:
    """Whether the build's supervisor process is alive (not a zombie, not a reused PID)."""
    if record.supervisor_pid is None:
        return False
    try:
        process = psutil.Process(record.supervisor_pid)
        with process.oneshot():
            if process.status() == psutil.STATUS_ZOMBIE:
                return False
            if (
                record.supervisor_started is not None
                and abs(process.create_time() - record.supervisor_started) > 1.0
            ):
                return False
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # it exists; another user's supervisor cannot be inspected further
    return True


def leftover_processes(record: BuildRecord) -> list[tree.Member]:
    """Processes of a build that still run (its group, the root and its descendants)."""
    root = None
    if record.build_pid is not None and record.started is not None:
        try:
            process = psutil.Process(record.build_pid)
            # The root started right after the supervisor recorded `started`.
            if abs(process.create_time() - record.started) < 5.0:
                root = tree.Member(record.build_pid, process.create_time(), process.name())
        except psutil.Error:
            root = None
    return list(tree.collect(root, record.pgid).values())


def lost_note(record: BuildRecord) -> str:
    """What is known of a build whose supervisor is gone."""
    parts = [f"its supervisor (pid {record.supervisor_pid}) is gone"]
    step = record.progress.get("step") if record.progress else None
    if step:
        parts.append(f"last progress {step['done']}/{step['total']}")
    elif record.progress.get("planned"):
        parts.append(
            f"last progress {record.progress.get('done', 0)}/{record.progress['planned']} "
            "derivations"
        )
    left = leftover_processes(record)
    if left:
        parts.append(
            f"{len(left)} build processes still run (group {record.pgid}): "
            f"`workbench stop {record.id}` ends them"
        )
    else:
        parts.append("no build process is left")
    parts.append(f"log: {record.log_path}")
    return "; ".join(parts)


def check(history: History, records: Iterable[BuildRecord]) -> list[BuildRecord]:
    """The records again, with every active one whose supervisor is gone marked `lost`."""
    result: list[BuildRecord] = []
    now = time.time()
    here = socket.gethostname()
    for record in records:
        # A state directory in a shared home can hold builds of other hosts: their PIDs mean
        # nothing here, so only this host's builds are judged.
        if record.active and record.host in (None, here):
            young = record.state == STARTING and now - record.created < STARTING_TIMEOUT_S
            if not (young and record.supervisor_pid is None) and not supervisor_running(record):
                history.mark_lost(record.id, lost_note(record), now)
                record = history.get(record.id)
        result.append(record)
    return result

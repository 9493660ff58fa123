"""Telling a running build from one whose supervisor vanished (a reboot, `kill -9`, a crash).

A row in state `running` whose supervisor PID is gone (or now belongs to another process: the
start time tells) is marked `lost`, with what is known: the last progress, whether build
processes still run, and where the log is. Only this host's rows are judged: a state directory
in a shared home may hold other hosts' builds, whose PIDs mean nothing here.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Iterable
from pathlib import Path

import psutil

from workbench.history.connection import HistoryError
from workbench.history.records import LOST, STARTING, BuildRecord
from workbench.history.store import History
from workbench.supervision import build_cgroup, tree

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


def keeper_running(record: BuildRecord) -> bool:
    """Whether the build's keeper (keeper.py) lives: while it does, a build whose supervisor
    is gone is being adopted by a new one, not lost."""
    import json

    from workbench.supervision.keeper import keeper_path

    if record.host not in (None, socket.gethostname()):
        return False
    try:
        with open(keeper_path(Path(record.log_path).parent), "rb") as handle:
            said = json.loads(handle.read(4096))
        pid, started = int(said["pid"]), said.get("started")
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(process.create_time() - float(started)) <= 1.0
    except (OSError, ValueError, KeyError, TypeError, psutil.NoSuchProcess):
        return False
    except psutil.AccessDenied:
        return True


def leftover_processes(record: BuildRecord) -> list[tree.Member]:
    """Processes of a build that still run: its root and descendants, its group and session,
    those carrying its marker, and those recorded as having outlived it."""
    root = None
    if record.build_pid is not None and record.started is not None:
        try:
            process = psutil.Process(record.build_pid)
            # The root started right after the supervisor recorded `started`.
            if abs(process.create_time() - record.started) < 5.0:
                root = tree.Member(record.build_pid, process.create_time(), process.name())
        except psutil.Error:
            root = None
    if record.host not in (None, socket.gethostname()):
        return []  # another host's PIDs mean nothing here
    found = tree.collect(
        root,
        record.pgid,
        recorded_outlived(record),
        marker=record.log_path,
        cgroup=build_cgroup.recorded(Path(record.log_path)),
    )
    # A process older than the build is not of it: its group or session id can be a reused PID
    # of a long-ended build (found by pgid), and ending it would end a stranger's process.
    if record.started is not None:
        found = {
            pid: member for pid, member in found.items() if member.started >= record.started - 2.0
        }
    return list(found.values())


def _remove_cgroup(record: BuildRecord) -> None:
    """The build's cgroup, once nothing of it runs (the kernel refuses while anything does)."""
    log_path = Path(record.log_path)
    build_cgroup.remove(build_cgroup.recorded(log_path), log_path)


def recorded_outlived(record: BuildRecord) -> list[tree.Member]:
    """The processes the history says outlived the build (alive or not)."""
    members = []
    for entry in record.outlived:
        try:
            members.append(tree.Member(int(entry["pid"]), float(entry["started"]), entry["name"]))
        except (KeyError, TypeError, ValueError):
            continue
    return members


def outlived_json(members: Iterable[tree.Member]) -> list[dict[str, object]]:
    """Members as the history's `outlived` column keeps them."""
    return [{"pid": m.pid, "started": m.started, "name": m.name} for m in members]


def outlived_text(record_id: int, members: list[tree.Member]) -> str:
    """The part of a note that says what outlived a build ("" when nothing does)."""
    if not members:
        return ""
    names = ", ".join(f"{m.name} ({m.pid})" for m in members[:5])
    more = f" and {len(members) - 5} more" if len(members) > 5 else ""
    return (
        f"{len(members)} of its processes still run: {names}{more}: "
        f"`workbench stop {record_id}` ends them"
    )


def with_outlived(note: str | None, old: str, new: str) -> str | None:
    """`note` with its what-still-runs part `old` replaced by `new`."""
    base = note or ""
    if old and base.endswith(old):
        base = base[: -len(old)].removesuffix("; ")
    if not new:
        return base or None
    return f"{base}; {new}" if base else new


def refresh_outlived(history: History, record: BuildRecord) -> BuildRecord:
    """Keep an ended build's note true: drop the processes it listed that have since exited."""
    if record.active or not record.outlived:
        return record
    members = recorded_outlived(record)
    alive = [member for member in members if tree.is_alive(member)]
    if len(alive) == len(members):
        return record
    if not alive:
        _remove_cgroup(record)
    old = outlived_text(record.id, members)
    note = with_outlived(record.note, old, outlived_text(record.id, alive))
    history.set_outlived(record.id, outlived_json(alive), note or "")
    return history.get(record.id)


def lost_note(record: BuildRecord, left: list[tree.Member] | None = None, refused: str = "") -> str:
    """What is known of a build whose supervisor is gone (`left`: what still runs of it;
    `refused`: why the outcome its supervisor left beside the log was not believed)."""
    parts = [f"its supervisor (pid {record.supervisor_pid}) is gone"]
    if refused:
        parts.append(f"its outcome file was not used: {refused}")
    progress = record.progress_view
    if progress.step is not None:
        parts.append(f"last progress {progress.step.done}/{progress.step.total}")
    elif progress.planned:
        parts.append(f"last progress {progress.done}/{progress.planned} derivations")
    left = leftover_processes(record) if left is None else left
    if not left:
        parts.append("no build process is left")
    parts.append(f"log: {record.log_path}")
    # What still runs comes last, so that it can be dropped once it has exited.
    parts.append(outlived_text(record.id, left))
    return "; ".join(part for part in parts if part)


def with_outcome(history: History, record: BuildRecord) -> BuildRecord | None:
    """An active row whose build has ended, its outcome kept beside the log by a supervisor
    that could not write the history (outcome.py): recorded now if the history can be
    written, else shown as it is without writing. None when there is no such outcome.
    `outcome.OutcomeError` when the file there is not an outcome a supervisor writes."""
    from workbench.supervision import outcome

    found = outcome.read(history.state_directory, record.log_path, record.id, record.created)
    if found is None:
        return None
    try:
        history.finish(record.id, **found, only_active=True)
        outcome.discard(history.state_directory, record.id)
        return history.get(record.id)
    except HistoryError:
        return dataclasses.replace(
            record,
            state=found["state"],
            ended=found["ended"],
            duration_s=found["duration_s"],
            exit_status=found["exit_status"],
            signal=found["signal"],
            note=found["note"],
            lines=found["lines"] or record.lines,
            progress=found["progress"] or record.progress,
        )


def _lost_unwritten(record: BuildRecord, note: str, now: float) -> BuildRecord:
    """A lost build as it is, when the history cannot be written (a full disk)."""
    duration = None if record.started is None else now - record.started
    return dataclasses.replace(
        record,
        state=LOST,
        note=f"{note}; not yet recorded: the history cannot be written",
        ended=now,
        duration_s=duration,
    )


def check(history: History, records: Iterable[BuildRecord]) -> list[BuildRecord]:
    """The records again, with every active one whose supervisor is gone marked `lost`, and
    every active one whose supervisor kept its outcome beside the log ended with it.

    Writes nothing it cannot: on a full disk the records are returned as they are."""
    result: list[BuildRecord] = []
    now = time.time()
    here = socket.gethostname()
    from workbench.supervision.outcome import OutcomeError

    for record in records:
        refused = ""
        if record.active and record.host in (None, here):
            try:
                ended = with_outcome(history, record)
            except OutcomeError as error:
                # Edited by hand or by another program: not believed; the build is judged by
                # its supervisor alone (lost if it is gone), and the note says why.
                ended, refused = None, str(error)
            if ended is not None:
                result.append(ended)
                continue
        try:
            record = _check_one(history, record, now, here, refused)
        except HistoryError as error:
            if (
                record.active
                and record.host in (None, here)
                and not (supervisor_running(record) or keeper_running(record))
            ):
                record = _lost_unwritten(record, lost_note(record, refused=refused), now)
            elif "full" not in str(error):
                raise
            # (else: an ended build's list of what outlived it stays as it was, unwritten)
        result.append(record)
    return result


def _check_one(
    history: History, record: BuildRecord, now: float, here: str, refused: str = ""
) -> BuildRecord:
    # A state directory in a shared home can hold builds of other hosts: their PIDs mean
    # nothing here, so only this host's builds are judged.
    if record.active and record.host in (None, here):
        young = record.state == STARTING and now - record.created < STARTING_TIMEOUT_S
        if (
            not (young and record.supervisor_pid is None)
            and not supervisor_running(record)
            and not keeper_running(record)
        ):
            left = leftover_processes(record)
            if history.mark_lost(record.id, lost_note(record, left, refused), now):
                marked_lost = history.get(record.id)
                history.set_outlived(record.id, outlived_json(left), marked_lost.note or "")
            if not left:  # else kept for `stop`, which removes it once it is empty
                _remove_cgroup(record)
            record = history.get(record.id)
    elif record.outlived and record.host in (None, here):
        record = refresh_outlived(history, record)
    return record

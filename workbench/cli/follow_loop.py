"""Start a build under its supervisor and follow it to its end: the loop `build`, `run`,
`attach`, `logs --follow`, matrix builds, `iterate` and `push` share (Ctrl-C detaches).

Build output is data: every string that came from a build (log lines, notes, file and
derivation names) is printed with its control characters made visible (`progress.visible`), so
nothing a build wrote can retitle, clear or write to the user's terminal; `logs --raw` gives
the exact bytes.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from workbench.cli.build_common import command as _command
from workbench.cli.build_common import say as _say
from workbench.cli.build_common import state as _state

if TYPE_CHECKING:  # only the types: following imports its rooms when it runs
    import subprocess

    from workbench.history.records import BuildRecord, NewBuild
    from workbench.history.store import History
    from workbench.supervision.prestart import PrestartedSupervisor

    Supervisor = subprocess.Popen[bytes] | PrestartedSupervisor

BACKLOG_LINES = 20
STATUS_EVERY_S = 10.0  # how often a status line is printed when stderr is not a terminal


def say_notices(lines: list[str], verbose: bool) -> None:
    """The launch's warnings, one line each; the indented details under one (the other build
    processes, with PID and user) only with --verbose."""
    groups: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith(" ") and groups:
            groups[-1][1].append(line)
        else:
            groups.append((line, []))
    for summary, details in groups:
        if details and not verbose:
            summary += " (--verbose lists them)"
        _say(f"warning: {summary}")
        if verbose:
            for line in details:
                print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Followed:
    """How a launched build went, as far as the CLI saw it."""

    code: int
    """What the command exits with: the build's exit code, 0 when detached, 1 if it never ran."""
    build_id: int
    finished: bool
    """True when the build ended while followed (not detached, not left with Ctrl-C)."""


def launch_and_follow(
    args: argparse.Namespace,
    history: History,
    plan: NewBuild,
    warnings: list[str],
    out: TextIO | None = None,
    idle_s: float = 0.5,
) -> Followed:
    """Start `plan` under a supervisor and follow it to its end, as `run` and `build` do.

    `args` supplies --state-dir and, when the command has them, --force and --detach. The
    build's log goes to `out` (stdout by default), what the workbench says to stderr.
    """
    from workbench.planning.launch import display
    from workbench.supervision.control import start

    force = bool(getattr(args, "force", False))
    started = start(_state(args), history, plan, force, warnings)
    say_notices(started.warnings, bool(getattr(args, "verbose", False)))
    record, supervisor = started.record, started.supervisor
    _say(f"build #{record.id} ({record.name}): {display(record.argv)}")
    _say(f"in {record.cwd}; log {record.log_path}")
    if not record.active and record.started is None:  # it never ran: say why
        from workbench.reading.follow import exit_code, outcome_line

        _say(outcome_line(record))
        return Followed(exit_code(record) or 1, record.id, True)
    if getattr(args, "detach", False):
        _say(
            f"running in the background; follow: `{_command(args)} attach {record.id}`, "
            f"stop: `{_command(args)} stop {record.id}`"
        )
        return Followed(0, record.id, False)
    _say(f"following; Ctrl-C leaves it running (`{_command(args)} attach {record.id}` comes back)")
    code, finished = follow_to_end(
        args, history, record.id, supervisor, backlog=False, out=out, idle_s=idle_s
    )
    return Followed(code, record.id, finished)


def follow(
    args: argparse.Namespace,
    history: History,
    build_id: int,
    supervisor: Supervisor | None = None,
    backlog: bool = True,
    raw: bool = False,
) -> int:
    """Print the build's log and a status line until it ends; Ctrl-C detaches. `raw`: the
    log's lines as written (`logs --follow --raw`), not readable ones."""
    if not raw:
        return follow_to_end(args, history, build_id, supervisor, backlog)[0]
    sys.stdout.flush()
    # Each byte as the build wrote it: the raw reader keeps undecodable bytes as surrogates,
    # written back alike; no newline translation. closefd=False: stdout stays open.
    with open(
        sys.stdout.fileno(),
        "w",
        encoding="utf-8",
        errors="surrogateescape",
        newline="",
        closefd=False,
    ) as out:
        return follow_to_end(args, history, build_id, supervisor, backlog, out=out, raw=True)[0]


def follow_to_end(
    args: argparse.Namespace,
    history: History,
    build_id: int,
    supervisor: Supervisor | None = None,
    backlog: bool = True,
    out: TextIO | None = None,
    idle_s: float = 0.5,
    raw: bool = False,
) -> tuple[int, bool]:
    """follow, also saying whether the build ended while followed (False after Ctrl-C).

    `idle_s` is the pause between polls while the log is quiet.
    """
    import shutil

    from workbench.reading.follow import Follower, status_line

    follower = Follower(history, build_id, raw=raw)
    per_host = None
    if "matrix" in (follower.record.settings or {}):  # imported only for a matrix build
        from workbench.remote.matrix_view import PerHostLines

        # What each host builds now, said again each time it changes; while it runs, what each
        # remote host compiles, from the workbench's sampler there (one SSH connection a host).
        per_host = PerHostLines.for_build(follower.record)
        if per_host is not None and follower.record.active:
            per_host.sample_hosts(getattr(args, "config", None), _state(args))
    exited = _exit_watch(supervisor)
    tty = sys.stderr.isatty()
    shown_status = False
    last_status = ""
    last_status_at = 0.0
    out = out or sys.stdout

    def clear() -> None:
        nonlocal shown_status
        if shown_status:
            sys.stderr.write("\r\x1b[K")
            shown_status = False

    try:
        if backlog:
            lines = follower.backlog(BACKLOG_LINES)
            if lines:
                out.write("\n".join(lines) + "\n")
                out.flush()
        while True:
            update = follower.poll()
            if supervisor is not None:
                supervisor.poll()  # reap it when it has exited: no zombie while we follow
            if update.lines:
                clear()
                out.write("\n".join(update.lines) + "\n")
                out.flush()
            hosts_changed = per_host.changed() if per_host is not None else []
            if hosts_changed:
                clear()
                _say("\n".join(hosts_changed))
            if update.done:
                clear()
                return say_ended(args, update.record), True
            now = time.monotonic()
            if tty:
                # The parts that fit the terminal's line, each whole (`status_line`).
                width = max(10, shutil.get_terminal_size().columns - 1)
                sys.stderr.write("\r\x1b[K" + status_line(update.record, width=width))
                sys.stderr.flush()
                shown_status = True
            elif (status := status_line(update.record)) != last_status and (
                now - last_status_at >= STATUS_EVERY_S
            ):
                _say(status)
                last_status, last_status_at = status, now
            pause = min(0.1, idle_s) if update.lines else idle_s
            if exited is None:
                time.sleep(pause)
            elif select.select([exited], [], [], pause)[0]:
                # The supervisor exited (its row is final): read once more, then plain polling.
                os.close(exited)
                exited = None
    except KeyboardInterrupt:
        clear()
        sys.stderr.write("\n")
        _say(
            f"detached; build #{build_id} keeps running. Reattach: `{_command(args)} attach "
            f"{build_id}` · log: `{_command(args)} logs {build_id} --follow` · stop: "
            f"`{_command(args)} stop {build_id}`"
        )
        return 0, False
    except BrokenPipeError:
        # `workbench attach | head`: the reader left; the build goes on. Point stdout at
        # /dev/null so Python's exit does not fail flushing it again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0, False
    finally:
        if exited is not None:
            os.close(exited)
        if per_host is not None:
            per_host.close()


def say_ended(args: argparse.Namespace, record: BuildRecord) -> int:
    """Say how an ended build went and return what the command exits with: one function for a
    build followed to its end and one attached to after it ended, so that `attach` of a failed,
    killed, stopped or lost build exits non-zero whether it was watched live or not."""
    from workbench.reading.follow import exit_code, outcome_line

    _say(outcome_line(record))
    if record.started is not None:
        _say(f"measurements: `{_command(args)} report {record.id}`")
    return exit_code(record)


def _exit_watch(supervisor: Supervisor | None) -> int | None:
    """A descriptor that becomes readable when the supervisor (a Popen we started) exits, so
    that following wakes as the build ends rather than at the next poll; None without one."""
    if supervisor is None or supervisor.poll() is not None:
        return None  # once reaped, its pid may be another process's
    try:
        return os.pidfd_open(supervisor.pid)
    except (AttributeError, OSError):  # Linux < 5.3, or a Python without pidfd_open
        return None

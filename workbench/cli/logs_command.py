"""`workbench logs [ID] [--follow] [--raw]`: a build's log.

Build output is data: every string that came from a build (log lines, notes, file and
derivation names) is printed with its control characters made visible (`progress.visible`), so
nothing a build wrote can retitle, clear or write to the user's terminal; `logs --raw` gives
the exact bytes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.cli.build_common import history as _history
from workbench.cli.build_common import one_running as _one_running
from workbench.cli.build_common import say as _say
from workbench.cli.follow_loop import follow as _follow
from workbench.cli.follow_loop import say_ended as _say_ended

if TYPE_CHECKING:
    from workbench.history.records import BuildRecord
    from workbench.history.store import History


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `workbench logs` to the parser."""
    logs = subcommands.add_parser("logs", help="a build's log")
    logs.add_argument(
        "id", nargs="?", type=int, help="build id (default: the running one, else the latest)"
    )
    logs.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep printing until it ends, then exit with its exit status (as attach)",
    )
    logs.add_argument(
        "--raw", action="store_true", help="the file as written (Nix's @nix JSON lines included)"
    )
    logs.set_defaults(handler=run_logs)


def _build_for_logs(history: History, args: argparse.Namespace) -> BuildRecord:
    """The build named, else the one running (as attach and stop choose), else the latest."""
    from workbench.errors import WorkbenchError

    if args.id is not None:
        return history.get(args.id)
    try:
        return _one_running(history, None, "logs", args)
    except WorkbenchError:
        latest = history.builds(limit=1)
        if not latest:
            raise WorkbenchError(f"no builds yet in {history.path}") from None
        return latest[0]


def _log_without_row(history: History, build_id: int) -> Path | None:
    """builds/ID/build.log of a build the history has no row for (a damaged history moved
    aside keeps its builds' folders: they are the record of what ran); None when there is none."""
    from workbench.history.store import build_directory

    path = build_directory(history.state_directory, build_id) / "build.log"
    return path if path.is_file() and not path.is_symlink() else None


def run_logs(args: argparse.Namespace) -> int:
    """`workbench logs ID [--follow] [--raw]`: the log, exit 0; with --follow, the build's
    exit status once it ended (whether it ended before or while followed)."""
    from workbench.errors import WorkbenchError

    history = _history(args)
    try:
        record = _build_for_logs(history, args)
    except WorkbenchError:
        orphan = _log_without_row(history, args.id) if args.id is not None else None
        if orphan is None:
            raise
        _say(
            f"build #{args.id} is not in {history.path} (a history moved aside or lost?); "
            f"its log is shown from {orphan}"
        )
        record = None
    path = Path(record.log_path) if record is not None else orphan
    assert path is not None  # the orphan log when there is no row
    if record is not None and args.follow and record.active:
        return _follow(args, history, record.id, backlog=False, raw=args.raw)
    from workbench.logs.readable_map import copy_log, copy_readable

    # Both copy in the kernel (sendfile): the readable form was kept beside the log as it was
    # written (logs.readable_map); only what it does not cover is rendered here, block by block.
    sys.stdout.flush()
    out = sys.stdout.fileno()
    if args.raw:
        copy_log(path, out)
    else:
        copy_readable(path, out)
    if record is not None and args.follow:
        # Followed after it ended: the whole log, then what following it to its end says and
        # exits with (its exit status, 128+signal, or 1), as `attach` of an ended build does.
        return _say_ended(args, record)
    return 0

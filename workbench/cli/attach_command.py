"""`workbench attach [ID]`: follow a running build live (Ctrl-C leaves it running)."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.cli.build_common import history as _history
from workbench.cli.build_common import one_running as _one_running
from workbench.cli.build_common import say as _say
from workbench.cli.build_common import state as _state
from workbench.cli.follow_loop import BACKLOG_LINES
from workbench.cli.follow_loop import follow_to_end as _follow_to_end
from workbench.cli.follow_loop import say_ended as _say_ended


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `workbench attach` to the parser."""
    attach = subcommands.add_parser(
        "attach", help="follow a running build live (Ctrl-C leaves it running)"
    )
    attach.add_argument("id", nargs="?", type=int, help="build id (default: the running one)")
    attach.set_defaults(handler=run_attach)


def run_attach(args: argparse.Namespace) -> int:
    """`workbench attach [ID]`."""
    history = _history(args)
    record = _one_running(history, args.id, "attach", args)
    if record.active:
        _say(f"attached to build #{record.id} ({record.name}); Ctrl-C leaves it running")
        code, finished = _follow_to_end(args, history, record.id, None, True)
    else:  # ended already: its last lines, then what following it to its end says and exits
        from workbench.reading.follow import LogReader

        for line in LogReader(record.log_path).skip_to_tail(BACKLOG_LINES):
            print(line)
        code, finished = _say_ended(args, record), True
    if finished and "matrix" in (record.settings or {}):
        # A matrix build followed to its end: its per-target rows and out-links, as `build`.
        from workbench.cli.hosts_command import print_target_rows

        print_target_rows(_state(args), record.id, Path(record.cwd))
    return code

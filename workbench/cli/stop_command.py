"""`workbench stop [ID]`: TERM, then KILL, to a build and every process of it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from workbench.cli.build_common import history as _history
from workbench.cli.build_common import one_running as _one_running
from workbench.cli.build_common import say as _say

if TYPE_CHECKING:
    from workbench.supervision.tree import Member


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError("give 0 to 3600 seconds")
    return value


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `workbench stop` to the parser."""
    stop = subcommands.add_parser(
        "stop",
        help="stop a build and every process of it",
        description="TERM to the build's process group and every process of its tree, KILL to "
        "what is left after the grace period; no process is left behind. For a Nix build, "
        "stopping the `nix build` client is what makes a nix-daemon cancel the build and kill "
        "its nixbld builders.",
    )
    stop.add_argument("id", nargs="?", type=int, help="build id (default: the running one)")
    stop.add_argument(
        "--grace", type=_seconds, default=10.0, metavar="S", help="seconds before KILL (10)"
    )
    stop.set_defaults(handler=run_stop)


def run_stop(args: argparse.Namespace) -> int:
    """`workbench stop [ID]`."""
    from workbench.progress.visible import visible
    from workbench.reading.follow import outcome_line
    from workbench.supervision import liveness
    from workbench.supervision.control import stop

    history = _history(args)
    record = _one_running(history, args.id, "stop", args)
    if record.active:
        _say(
            f"stopping build #{record.id} ({record.name}): TERM to its process group and every "
            f"process of its tree, KILL after {args.grace:g} s"
        )
        if record.nix:
            _say(
                "a Nix build: ending the `nix build` client is what makes a nix-daemon cancel "
                "the build and kill its builders"
            )
    was_active = record.active
    # What outlived an ended build (daemons, orphans): listed before they are ended, so the
    # user sees what `stop` acts on.
    leftovers = [] if was_active else liveness.leftover_processes(record)
    if leftovers:
        listing = ", ".join(f"{visible(m.name)} ({m.pid})" for m in leftovers[:10])
        more = f" and {len(leftovers) - 10} more" if len(leftovers) > 10 else ""
        _say(
            f"build #{record.id} has ended, but {len(leftovers)} of its processes outlived it: "
            f"{listing}{more}; ending them (TERM, then KILL after {args.grace:g} s)"
        )
    record, survivors = stop(history, record, args.grace)
    nothing = not was_active and not leftovers and not survivors
    _say(outcome_line(record) + ("; nothing to stop" if nothing else ""))
    return _report_survivors(record.id, survivors)


def _report_survivors(build_id: int, survivors: list[Member]) -> int:
    if survivors:
        listing = ", ".join(f"{m.name} ({m.pid})" for m in survivors[:10])
        _say(f"processes of build #{build_id} still run: {listing}")
        return 1
    _say(f"no process of build #{build_id} is left")
    return 0

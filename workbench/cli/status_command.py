"""`workbench status [--json]`: running and recent builds."""

from __future__ import annotations

import argparse
import time

from workbench.cli.build_common import history as _history
from workbench.cli.build_common import positive as _positive


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `workbench status` to the parser."""
    status = subcommands.add_parser("status", help="running and recent builds")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--limit", type=_positive, default=10, help="recent builds (default 10)")
    status.set_defaults(handler=run_status)


def run_status(args: argparse.Namespace) -> int:
    """`workbench status [--json]`."""
    from workbench.cli.build_common import say
    from workbench.cli.common import print_json
    from workbench.progress.visible import visible
    from workbench.reading.follow import (
        adoption_text,
        duration,
        loss_text,
        progress_text,
        status_line,
    )
    from workbench.supervision import liveness
    from workbench.supervision.pushing import take_over_lost_claims

    history = _history(args)
    # A push claimed by a supervisor that died before starting it is started now (said on
    # stderr), so that it is listed below as running.
    take_over_lost_claims(history, say)
    active = liveness.check(history, history.active())
    recent = [r for r in history.builds(limit=args.limit) if r.id not in {a.id for a in active}]
    recent = liveness.check(history, recent)
    running = [r for r in active if r.active]
    ended = sorted([r for r in active if not r.active] + recent, key=lambda r: -r.id)
    if args.json:
        print_json(
            {
                "running": [r.to_json() for r in running],
                "recent": [r.to_json() for r in ended[: args.limit]],
                "history": str(history.path),
            }
        )
        return 0
    if not running:
        print("no build is running")
    for record in running:
        print(status_line(record))
    if ended:
        print()
        print(f"{'id':>4}  {'state':9}  {'name':36}  {'started':16}  {'time':>8}  detail")
        for record in ended[: args.limit]:
            started = (
                time.strftime("%Y-%m-%d %H:%M", time.localtime(record.started))
                if record.started
                else "-"
            )
            detail = visible(record.note or progress_text(record.progress_view))
            name = visible(record.name)
            print(
                f"{record.id:>4}  {record.state:9}  {name[:36]:36}  {started:16}  "
                f"{duration(record.duration_s):>8}  {detail[:80]}"
            )
            # The row's detail may cut them off: a loss and an adoption get lines of their own.
            for said in (loss_text(record), adoption_text(record)):
                if said:
                    print(f"{'':>4}  {visible(said)}")
    return 0

"""`workbench report ID [ID2]`: what a build measured, or two builds side by side."""

from __future__ import annotations

import argparse
import sys

from workbench.cli.build_common import command as _command
from workbench.cli.build_common import history as _history


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `workbench report` to the parser."""
    report = subcommands.add_parser(
        "report",
        help="what a build measured, or two builds side by side",
        description="One build: its measurements. Two builds: the before/after table (metric | "
        "build A | build B | change), e.g. `workbench report 3 4` for -j1 against -j4.",
    )
    report.add_argument("id", type=int)
    report.add_argument("id2", nargs="?", type=int)
    report.add_argument("--format", choices=("md", "json"), default="md")
    report.set_defaults(handler=run_report)


def run_report(args: argparse.Namespace) -> int:
    """`workbench report ID [ID2] [--format md|json]`."""
    from workbench.cli.common import print_json
    from workbench.errors import WorkbenchError
    from workbench.reading import report

    history = _history(args)
    ids = [args.id] + ([args.id2] if args.id2 is not None else [])
    builds = [report.load(history, build_id) for build_id in ids]
    for facts in builds:
        if facts.record.active:
            raise WorkbenchError(
                f"build #{facts.record.id} is still {facts.record.state}; its measurements are "
                f"recorded when it ends (`{_command(args)} attach {facts.record.id}`)"
            )
    if args.format == "json":
        print_json(report.to_json(builds))
    else:
        from workbench.progress.visible import visible_lines

        sys.stdout.write(visible_lines(report.markdown(builds)))
    return 0

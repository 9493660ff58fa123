"""`workbench run -- CMD ARGS...`: any build command supervised and measured."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.cli.build_common import history as _history
from workbench.cli.build_common import launch_options as _launch_options
from workbench.cli.follow_loop import launch_and_follow

if TYPE_CHECKING:
    from workbench.history.records import NewBuild
    from workbench.history.store import History


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `workbench run` to the parser."""
    run = subcommands.add_parser(
        "run",
        help="supervise and measure any build command",
        description="Run a build command under a supervisor and measure it, e.g. "
        "`workbench run -- ./build.sh --parallel 8`, `workbench run -- ninja -C build`, "
        "`workbench run --name ort -- cmake --build build -j 8`.",
    )
    run.add_argument("--name", help="what the history calls it (default: the program's name)")
    run.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...")
    _launch_options(run)
    run.set_defaults(handler=run_run)


def run_run(args: argparse.Namespace) -> int:
    """`workbench run -- CMD ARGS...`."""
    from workbench.planning.launch import plan_run

    plan = plan_run(args.command, args.name, Path.cwd(), args.force)
    return _launch(args, _history(args), plan, [])


def _launch(args: argparse.Namespace, history: History, plan: NewBuild, warnings: list[str]) -> int:
    return launch_and_follow(args, history, plan, warnings).code

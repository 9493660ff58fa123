"""What the build commands share: the state directory and its history, the build to act on,
the launch options, and how the workbench speaks on stderr.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from workbench.history.records import BuildRecord
    from workbench.history.store import History
    from workbench.planning.tuning import JobsChoice


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def launch_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="start even while another build of this checkout runs (or, for `build`, a "
        "variant this host cannot build)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list each other build process on this host (else one line says how many)",
    )
    parser.add_argument(
        "-d",
        "--detach",
        action="store_true",
        help="start the build and return at once (follow it later with `workbench attach`)",
    )


def say(text: str) -> None:
    from workbench.progress.visible import visible_lines

    # What we say quotes commands, names and notes: no control character of theirs may act.
    print(f"workbench: {visible_lines(text)}", file=sys.stderr, flush=True)


def state(args: argparse.Namespace) -> Path:
    from workbench.configs.paths import state_dir

    return state_dir(args.state_dir).resolve()


def command(args: argparse.Namespace) -> str:
    """How to call workbench again with the same state directory (for the hints we print)."""
    if args.state_dir:
        return f"workbench --state-dir {shlex.quote(str(args.state_dir))}"
    return "workbench"


def history(args: argparse.Namespace) -> History:
    from workbench.history.store import History

    return History(state(args))


def one_running(
    history: History, build_id: int | None, verb: str, args: argparse.Namespace
) -> BuildRecord:
    """The build to act on: the one named, else the only running one."""
    from workbench.errors import WorkbenchError
    from workbench.supervision import liveness

    if build_id is not None:
        return liveness.check(history, [history.get(build_id)])[0]
    running = liveness.check(history, history.active())
    running = [record for record in running if record.active]
    if not running:
        raise WorkbenchError(
            f"no build is running; `{command(args)} status` lists recent ones "
            f"(`{command(args)} logs ID` shows a finished build's log)"
        )
    if len(running) > 1:
        listing = ", ".join(f"#{r.id} {r.name}" for r in running)
        raise WorkbenchError(
            f"{len(running)} builds are running ({listing}); name one: "
            f"`{command(args)} {verb} {running[0].id}`"
        )
    return running[0]


def say_planned_jobs(choice: JobsChoice) -> None:
    """A dry run's jobs as `# ` lines on stderr: how many and from where, the per-job figure
    and its basis, the recommendation's reasons and the memory estimate (`tuning.JobsChoice`:
    `build` and the matrix build print the same lines for the same plan)."""
    from workbench.host.units import gib_size

    memory = choice.job_memory
    print(
        f"# {choice.jobs} jobs from {choice.source}; {gib_size(memory.gb)} per job "
        f"({memory.source})",
        file=sys.stderr,
    )
    estimate = f"memory at peak: {choice.memory.line()}"
    limited = ""
    for reason in choice.reasons:
        if reason.startswith(estimate):
            # The recommendation's own estimate is this plan's: said once, on the last line.
            limited = reason.removeprefix(estimate)
            continue
        print(f"#   {reason}", file=sys.stderr)
    print(f"# {estimate}{limited}", file=sys.stderr)


def say_nix_plan(history: History, cwd: Path, argv: Sequence[str]) -> None:
    """Nix's plan as `# ` lines on stderr (a dry run's notes)."""
    from workbench.planning.timed_nix_plan import nix_plan_for

    for line in nix_plan_for(history, cwd, argv).lines():
        print(f"# {line}", file=sys.stderr)

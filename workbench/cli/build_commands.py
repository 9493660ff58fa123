"""`workbench build|run|status|attach|logs|stop|history|report`: launch, watch and compare builds.

A thin layer over `workbench.supervision`: the supervisor process owns each build, so every
command here may exit (or be killed) at any moment without touching the build.

Build output is data: every string that came from a build (log lines, notes, file and
derivation names) is printed with its control characters made visible (`logs.visible`), so
nothing a build wrote can retitle, clear or write to the user's terminal; `logs --raw` gives
the exact bytes.
"""

from __future__ import annotations

import argparse
import os
import select
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from collections.abc import Sequence

    from workbench.flake.nix_plan import NixPlan

BACKLOG_LINES = 20
STATUS_EVERY_S = 10.0  # how often a status line is printed when stderr is not a terminal


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError("give 0 to 3600 seconds")
    return value


def register(subcommands: argparse._SubParsersAction) -> None:
    """Add the build commands to the parser."""
    build = subcommands.add_parser(
        "build",
        help="build a variant or linkage flavour with Nix (or Flox), supervised",
        description="Build one variant of the matrix (or a linkage flavour of the flake) with "
        "`nix build .#ATTR -L --log-format internal-json --cores N --max-jobs M` in the flake's "
        "directory. The build belongs to a supervisor process: closing the terminal or Ctrl-C "
        'never stops it. Jobs come from --jobs, else settings.toml\'s ninja_jobs, else ("auto") '
        "the recommendation from cores and the memory earlier builds measured.",
    )
    build.add_argument(
        "variant",
        nargs="*",
        metavar="VARIANT",
        help="a variant name (`workbench variants --names`), or a flavour: cpu, cuda-dyn, "
        "cuda-static or its flake attribute; default: settings.toml's linkage. Several (or "
        "--match): one matrix build over the hosts of configs/hosts.toml",
    )
    build.add_argument(
        "--match",
        metavar="WORDS",
        help="a matrix build of every variant whose name contains every word",
    )
    build.add_argument("-j", "--jobs", type=_positive, metavar="N", help="compile jobs (--cores)")
    build.add_argument(
        "--max-jobs", type=_positive, metavar="M", help="derivations built at once (Nix)"
    )
    build.add_argument(
        "--backend",
        choices=("nix", "flox"),
        default="nix",
        help="nix (default) or flox (`flox build NAME`; it takes no job count, so the jobs "
        "reach the Nix it runs as NIX_CONFIG cores/max-jobs)",
    )
    build.add_argument(
        "-C",
        "--directory",
        metavar="DIR",
        help="the flake (or Flox environment) to build in; default: the one beside the configs",
    )
    build.add_argument(
        "--dry-run", action="store_true", help="print the exact command and start nothing"
    )
    add_ort_option(build)
    _launch_options(build)
    build.set_defaults(handler=run_build)

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

    status = subcommands.add_parser("status", help="running and recent builds")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--limit", type=_positive, default=10, help="recent builds (default 10)")
    status.set_defaults(handler=run_status)

    attach = subcommands.add_parser(
        "attach", help="follow a running build live (Ctrl-C leaves it running)"
    )
    attach.add_argument("id", nargs="?", type=int, help="build id (default: the running one)")
    attach.set_defaults(handler=run_attach)

    logs = subcommands.add_parser("logs", help="a build's log")
    logs.add_argument(
        "id", nargs="?", type=int, help="build id (default: the running one, else the latest)"
    )
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing until it ends")
    logs.add_argument(
        "--raw", action="store_true", help="the file as written (Nix's @nix JSON lines included)"
    )
    logs.set_defaults(handler=run_logs)

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

    history = subcommands.add_parser("history", help="finished builds with their measurements")
    history.add_argument("--json", action="store_true", help="machine-readable output")
    history.add_argument("--limit", type=_positive, default=20, help="builds shown (default 20)")
    history.set_defaults(handler=run_history)

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


def add_ort_option(parser: argparse.ArgumentParser) -> None:
    """`--ort VERSION`: the ONNX Runtime release, instead of settings.toml's ort_version."""
    parser.add_argument(
        "--ort",
        metavar="VERSION",
        help="ONNX Runtime release (configs/releases.toml; default: settings.toml's "
        "ort_version). Releases other than the nixpkgs pin's own have names ending -ort1_24_2",
    )


def _launch_options(parser: argparse.ArgumentParser) -> None:
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


# -- helpers ------------------------------------------------------------------------------------


def _say(text: str) -> None:
    from workbench.logs.visible import visible_lines

    # What we say quotes commands, names and notes: no control character of theirs may act.
    print(f"workbench: {visible_lines(text)}", file=sys.stderr, flush=True)


def _state(args: argparse.Namespace) -> Path:
    from workbench.paths import state_dir

    return state_dir(args.state_dir).resolve()


def _command(args: argparse.Namespace) -> str:
    """How to call workbench again with the same state directory (for the hints we print)."""
    if args.state_dir:
        return f"workbench --state-dir {shlex.quote(str(args.state_dir))}"
    return "workbench"


def _history(args: argparse.Namespace) -> Any:
    from workbench.supervision.history import History

    return History(_state(args))


def _one_running(history: Any, build_id: int | None, verb: str, args: argparse.Namespace) -> Any:
    """The build to act on: the one named, else the only running one."""
    from workbench.errors import WorkbenchError
    from workbench.supervision import liveness

    if build_id is not None:
        return liveness.check(history, [history.get(build_id)])[0]
    running = liveness.check(history, history.active())
    running = [record for record in running if record.active]
    if not running:
        raise WorkbenchError(
            f"no build is running; `{_command(args)} status` lists recent ones "
            f"(`{_command(args)} logs ID` shows a finished build's log)"
        )
    if len(running) > 1:
        listing = ", ".join(f"#{r.id} {r.name}" for r in running)
        raise WorkbenchError(
            f"{len(running)} builds are running ({listing}); name one: "
            f"`{_command(args)} {verb} {running[0].id}`"
        )
    return running[0]


# -- launching ----------------------------------------------------------------------------------


def run_build(args: argparse.Namespace) -> int:
    """`workbench build`."""
    import shutil

    from workbench.cli.common import load_config
    from workbench.configs.availability import build_time_checks_note
    from workbench.configs.settings import load_settings
    from workbench.supervision.launch import (
        LaunchError,
        default_flake_directory,
        display,
        plan_build,
        resolve_target,
        target_problems,
    )
    from workbench.supervision.tuning import choose_jobs_for

    if len(args.variant) > 1 or args.match:  # several targets: one build over the hosts
        from workbench.cli.hosts_command import run_matrix_build

        return run_matrix_build(args)
    args.variant = args.variant[0] if args.variant else None
    directory, matrix = load_config(args)
    settings = load_settings(directory, matrix)
    target = resolve_target(
        args.variant or settings.linkage, matrix, args.ort or settings.ort_version
    )
    if target.flavour is not None and target.flavour.cuda and not settings.cuda_architectures:
        from workbench.host.hardware import detect_gpus
        from workbench.host.linking import fill_cuda_architectures

        if args.dry_run:  # a dry run writes nothing: it says what the build would set
            from workbench.host.linking import detected_architectures

            found = detected_architectures(detect_gpus(matrix), matrix)
            if found:
                print(
                    f"# a build sets cuda_architectures = {','.join(found)} (detected)",
                    file=sys.stderr,
                )
        else:
            settings, said = fill_cuda_architectures(
                directory, matrix, settings, target.flavour, detect_gpus(matrix)
            )
            if said:
                _say(f"note: {said}")
    problems = target_problems(target)
    if problems and not args.force:
        raise LaunchError("; ".join(problems) + " (--force builds it anyway)")
    flake = Path(args.directory).expanduser() if args.directory else None
    flake = flake or default_flake_directory(directory)
    _say_unread_configs(directory, flake)
    history = _history(args)
    # A Nix build: its builders may run in a nix-daemon's cgroup, whose limit is what binds.
    choice = choose_jobs_for(history, settings, target.name, target.cuda, args.jobs, nix=True)
    job_memory = choice.job_memory
    max_jobs = args.max_jobs or settings.max_jobs
    plan = plan_build(
        target, args.backend, flake, settings, choice.jobs, max_jobs, choice.source, args.force
    )
    note = build_time_checks_note(target.variant)
    release = matrix.release(target.ort_version or None)
    release_line = f"ONNX Runtime {release.version}: " + (
        "nixpkgs' own, no override" if release.nixpkgs_own else f"{release.tag} ({release.why})"
    )
    from workbench.supervision.launch import release_notes

    left_out = release_notes(target, directory)
    if args.dry_run:
        from workbench.host.units import gib_size

        print(display(plan.argv))
        print(f"# in {plan.cwd}", file=sys.stderr)
        print(f"# {release_line}", file=sys.stderr)
        if not release.nixpkgs_own:
            cuda = target.cuda
            deps = ", ".join(f"{d.fetchcontent}={d.pin}" for d in release.deps_for(cuda))
            fixes = ", ".join(f.name for f in release.fixes_for(cuda))
            print(f"#   FETCHCONTENT_SOURCE_DIR_*: {deps or 'none'}", file=sys.stderr)
            print(f"#   fixes: {fixes or 'none'}", file=sys.stderr)
            if release.cmake_flags:
                print(f"#   flags: {' '.join(release.cmake_flags)}", file=sys.stderr)
        for line in left_out:
            print(f"# warning: {line}", file=sys.stderr)
        print(
            f"# {choice.jobs} jobs from {choice.source}; {gib_size(job_memory.gb)} per job "
            f"({job_memory.source})",
            file=sys.stderr,
        )
        for reason in choice.reasons:
            print(f"#   {reason}", file=sys.stderr)
        if args.backend == "flox":
            print(
                "# flox build takes no job count: they reach the Nix it runs as NIX_CONFIG "
                "(cores, max-jobs)",
                file=sys.stderr,
            )
        if choice.warning:
            _say(f"warning: {choice.warning}")
        if note:
            print(f"# {note}", file=sys.stderr)
        if args.backend != "nix":
            return 0
        code = _say_evaluation(flake, target)
        if code == 0:
            say_nix_plan(history, Path(plan.cwd), plan.argv)
        return code
    if note:
        _say(f"note: {note}")
    if target.ort_version and not release.nixpkgs_own:
        _say(f"note: {release_line}")
    for line in left_out:
        _say(f"warning: {line}")
    for problem in problems:
        _say(f"warning: {problem} (starting anyway: --force)")
    program = plan.argv[2] if plan.argv[0] == "env" else plan.argv[0]  # flox's NIX_CONFIG
    if shutil.which(program) is None:
        hint = (
            "install Nix (Debian: apt install nix-bin) or use --backend flox"
            if args.backend == "nix"
            else "install Flox (https://flox.dev) or use --backend nix"
        )
        raise LaunchError(f"{program}: command not found; {hint}")
    warnings = [choice.warning] if choice.warning else []
    followed = launch_and_follow(args, history, plan, warnings)
    if followed.finished and followed.code == 0 and args.backend == "nix":
        push_after_build(args, history, followed.build_id, directory)
    if followed.finished and followed.code == 0 and target.flavour is not None:
        return _check_flavour_layout(Path(plan.cwd), target.flavour)
    return followed.code


def push_after_build(
    args: argparse.Namespace, history: Any, build_id: int, directory: Path
) -> None:
    """hosts.toml's push_to: a successful build's outputs pushed there (a failure is said,
    and leaves the build's own outcome as it was)."""
    from workbench.cli.push_command import push_build
    from workbench.errors import WorkbenchError
    from workbench.hosts.config import load_hosts

    hosts = load_hosts(directory)
    if not hosts.push_to:
        return
    try:
        code = push_build(
            args, history, history.get(build_id), hosts.push_to, hosts.signing_key or None
        )
    except WorkbenchError as exc:
        _say(f"warning: not pushed to {hosts.push_to} (push_to in {hosts.path}): {exc}")
        return
    if code != 0:
        _say(f"warning: the push to {hosts.push_to} failed (exit {code}); the build succeeded")


def _say_unread_configs(directory: Path, flake: Path) -> None:
    """Warn when the build will not read the chosen config directory (--config elsewhere)."""
    from workbench.supervision.build_preview import config_not_read_warning

    unread = config_not_read_warning(directory, flake)
    if unread:
        _say(f"warning: {unread}")


def _check_flavour_layout(checkout: Path, flavour: Any) -> int:
    """After a flavour builds: is every file its layout promises there? (exit 1 if not)."""
    from workbench.artefacts.layout import check_layout, find_flavour_result
    from workbench.logs.visible import visible

    # Only the link this build made: a bare `result` may be another build's.
    found = find_flavour_result(checkout, flavour, bare=False)
    if found.link is None:
        _say(
            f"warning: {visible(found.note or '')} after the build, so its layout was NOT "
            f"checked (`workbench layout {flavour.name} --result PATH` checks it)"
        )
        return 0
    output = found.link
    problems = check_layout(output, flavour)
    for problem in problems:
        _say(f"layout: {visible(problem)}")
    if problems:
        _say(f"error: {output} is not a whole {flavour.name} build ({len(problems)} problems)")
        return 1
    _say(f"layout: {flavour.name} has every promised file ({output} -> {output.resolve()})")
    return 0


def nix_plan_for(history: Any, cwd: Path, argv: Sequence[str]) -> NixPlan:
    """Nix's plan (workbench.flake.nix_plan) for the installables of a `nix build` argv, with
    each derivation's last time from the history."""
    from workbench.flake.nix_plan import plan_from_nix

    installables = [item for item in argv if item.startswith(".#")]
    return plan_from_nix(cwd, installables, history.last_derivation_times)


def say_nix_plan(history: Any, cwd: Path, argv: Sequence[str]) -> None:
    """Nix's plan as `# ` lines on stderr (a dry run's notes)."""
    for line in nix_plan_for(history, cwd, argv).lines():
        print(f"# {line}", file=sys.stderr)


def _say_evaluation(flake: Path, target: Any) -> int:
    """A dry run asks Nix whether the target evaluates at the pin: 0 yes or unknown, 1 no."""
    from workbench.flake.evaluation import evaluate
    from workbench.supervision.launch import host_platform

    verdict = evaluate(flake, host_platform(), target.attr)
    if verdict.evaluates is None:
        print(f"# evaluates at the pin: not known ({verdict.detail})", file=sys.stderr)
        return 0
    if verdict.evaluates:
        print(f"# evaluates at the pin: yes ({target.attr})", file=sys.stderr)
        return 0
    _say(f"{target.attr} does not evaluate at the pin: {verdict.detail}")
    return 1


def run_run(args: argparse.Namespace) -> int:
    """`workbench run -- CMD ARGS...`."""
    from workbench.supervision.launch import plan_run

    plan = plan_run(args.command, args.name, Path.cwd(), args.force)
    return _launch(args, _history(args), plan, [])


def _launch(args: argparse.Namespace, history: Any, plan: Any, warnings: list[str]) -> int:
    return launch_and_follow(args, history, plan, warnings).code


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
    history: Any,
    plan: Any,
    warnings: list[str],
    out: TextIO | None = None,
    idle_s: float = 0.5,
) -> Followed:
    """Start `plan` under a supervisor and follow it to its end, as `run` and `build` do.

    `args` supplies --state-dir and, when the command has them, --force and --detach. The
    build's log goes to `out` (stdout by default), what the workbench says to stderr.
    """
    from workbench.supervision.control import start
    from workbench.supervision.launch import display

    force = bool(getattr(args, "force", False))
    started = start(_state(args), history, plan, force, warnings)
    say_notices(started.warnings, bool(getattr(args, "verbose", False)))
    record, supervisor = started.record, started.supervisor
    _say(f"build #{record.id} ({record.name}): {display(record.argv)}")
    _say(f"in {record.cwd}; log {record.log_path}")
    if not record.active and record.started is None:  # it never ran: say why
        from workbench.supervision.follow import exit_code, outcome_line

        _say(outcome_line(record))
        return Followed(exit_code(record) or 1, record.id, True)
    if getattr(args, "detach", False):
        _say(
            f"running in the background; follow: `{_command(args)} attach {record.id}`, "
            f"stop: `{_command(args)} stop {record.id}`"
        )
        return Followed(0, record.id, False)
    _say(f"following; Ctrl-C leaves it running (`{_command(args)} attach {record.id}` comes back)")
    code, finished = _follow_to_end(
        args, history, record.id, supervisor, backlog=False, out=out, idle_s=idle_s
    )
    return Followed(code, record.id, finished)


# -- following ----------------------------------------------------------------------------------


def _follow(
    args: argparse.Namespace,
    history: Any,
    build_id: int,
    supervisor: Any = None,
    backlog: bool = True,
) -> int:
    """Print the build's log and a status line until it ends; Ctrl-C detaches."""
    return _follow_to_end(args, history, build_id, supervisor, backlog)[0]


def _follow_to_end(
    args: argparse.Namespace,
    history: Any,
    build_id: int,
    supervisor: Any = None,
    backlog: bool = True,
    out: TextIO | None = None,
    idle_s: float = 0.5,
) -> tuple[int, bool]:
    """_follow, also saying whether the build ended while followed (False after Ctrl-C).

    `idle_s` is the pause between polls while the log is quiet.
    """
    import shutil

    from workbench.supervision.follow import Follower, exit_code, outcome_line, status_line

    follower = Follower(history, build_id)
    per_host = None
    if "matrix" in (follower.record.settings or {}):  # imported only for a matrix build
        from workbench.hosts.matrix_view import PerHostLines

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
                _say(outcome_line(update.record))
                if update.record.started is not None:
                    _say(f"measurements: `{_command(args)} report {build_id}`")
                return exit_code(update.record), True
            status = status_line(update.record)
            now = time.monotonic()
            if tty:
                width = shutil.get_terminal_size().columns
                sys.stderr.write("\r\x1b[K" + status[: max(10, width - 1)])
                sys.stderr.flush()
                shown_status = True
            elif status != last_status and now - last_status_at >= STATUS_EVERY_S:
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


def _exit_watch(supervisor: Any) -> int | None:
    """A descriptor that becomes readable when the supervisor (a Popen we started) exits, so
    that following wakes as the build ends rather than at the next poll; None without one."""
    if supervisor is None or supervisor.poll() is not None:
        return None  # once reaped, its pid may be another process's
    try:
        return os.pidfd_open(supervisor.pid)
    except (AttributeError, OSError):  # Linux < 5.3, or a Python without pidfd_open
        return None


def run_attach(args: argparse.Namespace) -> int:
    """`workbench attach [ID]`."""
    history = _history(args)
    record = _one_running(history, args.id, "attach", args)
    if not record.active:
        from workbench.supervision.follow import LogReader, outcome_line

        for line in LogReader(record.log_path).skip_to_tail(BACKLOG_LINES):
            print(line)
        _say(outcome_line(record))
        return 0
    _say(f"attached to build #{record.id} ({record.name}); Ctrl-C leaves it running")
    code, finished = _follow_to_end(args, history, record.id, None, True)
    if finished and "matrix" in (record.settings or {}):
        # A matrix build followed to its end: its per-target rows and out-links, as `build`.
        from workbench.cli.hosts_command import print_target_rows

        print_target_rows(_state(args), record.id, Path(record.cwd))
    return code


def _build_for_logs(history: Any, args: argparse.Namespace) -> Any:
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


def _log_without_row(history: Any, build_id: int) -> Path | None:
    """builds/ID/build.log of a build the history has no row for (a damaged history moved
    aside keeps its builds' folders: they are the record of what ran); None when there is none."""
    from workbench.supervision.history import build_directory

    path = build_directory(history.state_directory, build_id) / "build.log"
    return path if path.is_file() and not path.is_symlink() else None


def run_logs(args: argparse.Namespace) -> int:
    """`workbench logs ID [--follow] [--raw]`."""
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
    if record is not None and args.follow and record.active:
        return _follow(args, history, record.id, backlog=False)
    from workbench.logs.readable_map import copy_log, copy_readable

    # Both copy in the kernel (sendfile): the readable form was kept beside the log as it was
    # written (logs.readable_map); only what it does not cover is rendered here, block by block.
    sys.stdout.flush()
    out = sys.stdout.fileno()
    if args.raw:
        copy_log(path, out)
    else:
        copy_readable(path, out)
    return 0


# -- stopping -----------------------------------------------------------------------------------


def run_stop(args: argparse.Namespace) -> int:
    """`workbench stop [ID]`."""
    from workbench.logs.visible import visible
    from workbench.supervision import liveness
    from workbench.supervision.control import stop
    from workbench.supervision.follow import outcome_line

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


def _report_survivors(build_id: int, survivors: list[Any]) -> int:
    if survivors:
        listing = ", ".join(f"{m.name} ({m.pid})" for m in survivors[:10])
        _say(f"processes of build #{build_id} still run: {listing}")
        return 1
    _say(f"no process of build #{build_id} is left")
    return 0


# -- status, history, report ------------------------------------------------------------------


def run_status(args: argparse.Namespace) -> int:
    """`workbench status [--json]`."""
    from workbench.cli.common import print_json
    from workbench.logs.visible import visible
    from workbench.supervision import liveness
    from workbench.supervision.follow import (
        adoption_text,
        duration,
        loss_text,
        progress_text,
        status_line,
    )

    history = _history(args)
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


def run_history(args: argparse.Namespace) -> int:
    """`workbench history [--json]`."""
    from workbench.cli.common import print_json
    from workbench.logs.visible import visible
    from workbench.supervision import liveness
    from workbench.supervision.follow import adoption_text, duration, loss_text, size

    history = _history(args)
    records = liveness.check(history, history.builds(limit=args.limit))
    if args.json:
        documents = []
        for record in records:
            measured = history.measured(record.id)
            documents.append(
                {
                    **record.to_json(),
                    "measurements": measured.to_json() if measured else None,
                    "artefacts": history.artefacts(record.id),
                }
            )
        print_json({"builds": documents, "history": str(history.path)})
        return 0
    if not records:
        print(f"no builds yet in {history.path}")
        return 0
    from workbench.artefacts.sizes import from_json, human_bytes

    print(
        f"{'id':>4}  {'state':9}  {'name':32}  {'ORT':7}  {'jobs':>4}  {'time':>8}  {'CPU':>5}  "
        f"{'peak RSS':>9}  {'most':>4}  {'closure':>9}  note"
    )
    for record in records:
        measured = history.measured(record.id, slowest=0)
        cpu = f"{measured.cpu_utilisation:.0f}%" if measured else "-"
        peak = size(measured.peak_rss) if measured else "-"
        most = str(measured.most_jobs) if measured else "-"
        name, note = visible(record.name), visible(record.note or "")
        produced = from_json(history.artefacts(record.id))
        closure = human_bytes(produced.closure_size) if produced else "-"
        ort = visible(str((record.settings or {}).get("ort_version") or "-"))
        print(
            f"{record.id:>4}  {record.state:9}  {name[:32]:32}  {ort[:7]:7}  "
            f"{record.jobs if record.jobs else '-':>4}  {duration(record.elapsed()):>8}  "
            f"{cpu:>5}  {peak:>9}  {most:>4}  {closure:>9}  {note[:70]}"
        )
        for said in (loss_text(record), adoption_text(record)):
            if said:
                print(f"{'':>4}  {visible(said)}")
    return 0


def run_report(args: argparse.Namespace) -> int:
    """`workbench report ID [ID2] [--format md|json]`."""
    from workbench.cli.common import print_json
    from workbench.errors import WorkbenchError
    from workbench.supervision import report

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
        from workbench.logs.visible import visible_lines

        sys.stdout.write(visible_lines(report.markdown(builds)))
    return 0

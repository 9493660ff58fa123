"""`workbench build`: one variant or linkage flavour built with Nix (or Flox), supervised.

A thin layer over `workbench.supervision`: the supervisor process owns each build, so the
command may exit (or be killed) at any moment without touching the build.

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
from workbench.cli.build_common import launch_options as _launch_options
from workbench.cli.build_common import positive as _positive
from workbench.cli.build_common import say as _say
from workbench.cli.build_common import say_nix_plan, say_planned_jobs
from workbench.cli.follow_loop import launch_and_follow

if TYPE_CHECKING:
    from workbench.configs.matrix import Flavour
    from workbench.planning.launch import Target


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `workbench build` to the parser."""
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


def add_ort_option(parser: argparse.ArgumentParser) -> None:
    """`--ort VERSION`: the ONNX Runtime release, instead of settings.toml's ort_version."""
    parser.add_argument(
        "--ort",
        metavar="VERSION",
        help="ONNX Runtime release (configs/releases.toml; default: settings.toml's "
        "ort_version). Releases other than the nixpkgs pin's own have names ending -ort1_24_2",
    )


def run_build(args: argparse.Namespace) -> int:
    """`workbench build`."""
    from workbench.cli.common import load_config
    from workbench.configs.settings import load_settings
    from workbench.planning.launch import LaunchError, display, resolve_target
    from workbench.planning.plan import prepare_build

    if len(args.variant) > 1 or args.match:  # several targets: one build over the hosts
        from workbench.cli.hosts_command import run_matrix_build

        return run_matrix_build(args)
    args.variant = args.variant[0] if args.variant else None
    directory, matrix = load_config(args)
    settings = load_settings(directory, matrix)
    name = args.variant or settings.linkage
    ort = args.ort or settings.ort_version
    target = resolve_target(name, matrix, ort)
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
    history = _history(args)
    planned = prepare_build(
        directory,
        history,
        [name],
        jobs=args.jobs,
        max_jobs=args.max_jobs,
        backend=args.backend,
        flake=Path(args.directory).expanduser() if args.directory else None,
        ort=ort,
        forced=args.force,
        settings=settings,
    )
    problems = planned.problems
    if problems and not args.force:
        raise LaunchError("; ".join(problems) + " (--force builds it anyway)")
    if planned.unread_configs:
        _say(f"warning: {planned.unread_configs}")
    choice = planned.jobs
    plan = planned.build
    flake = Path(plan.cwd)
    note = planned.checks_note
    release = matrix.release(target.ort_version or None)
    release_line = f"ONNX Runtime {release.version}: " + (
        "nixpkgs' own, no override" if release.nixpkgs_own else f"{release.tag} ({release.why})"
    )
    from workbench.planning.launch import release_notes

    left_out = release_notes(target, directory)
    if args.dry_run:
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
        say_planned_jobs(choice)
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
    program = planned.missing_tool
    if program is not None:
        hint = (
            "install Nix (Debian: apt install nix-bin) or use --backend flox"
            if args.backend == "nix"
            else "install Flox (https://flox.dev) or use --backend nix"
        )
        raise LaunchError(f"{program}: command not found; {hint}")
    if args.backend == "nix":  # hosts.toml's push_to: its supervisor pushes it once it succeeded
        from workbench.remote.config import with_push_request

        plan = with_push_request(plan, directory)
    followed = launch_and_follow(args, history, plan, list(planned.warnings))
    if followed.finished:
        from workbench.cli.push_command import follow_push

        follow_push(args, history, followed.build_id)
    if followed.finished and followed.code == 0 and target.flavour is not None:
        return _check_flavour_layout(Path(plan.cwd), target.flavour)
    return followed.code


def _check_flavour_layout(checkout: Path, flavour: Flavour) -> int:
    """After a flavour builds: is every file its layout promises there? (exit 1 if not)."""
    from workbench.artefacts.layout import check_layout, find_flavour_result
    from workbench.progress.visible import visible

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


def _say_evaluation(flake: Path, target: Target) -> int:
    """A dry run asks Nix whether the target evaluates at the pin: 0 yes or unknown, 1 no."""
    from workbench.flake.evaluation import evaluate
    from workbench.planning.launch import host_platform

    verdict = evaluate(flake, host_platform(), target.attr)
    if verdict.evaluates is None:
        print(f"# evaluates at the pin: not known ({verdict.detail})", file=sys.stderr)
        return 0
    if verdict.evaluates:
        print(f"# evaluates at the pin: yes ({target.attr})", file=sys.stderr)
        return 0
    _say(f"{target.attr} does not evaluate at the pin: {verdict.detail}")
    return 1

"""`workbench iterate TARGET [--jobs N] [--smoke -- CMD...] [--check]`: the fast loop.

One cycle: the workspace's working copy brought in line with the patch series
(workbench.iterate.session), then one supervised build: the build phase's tool (ninja) in the
derivation's recorded environment, or, when the workspace is new or the derivation changed, the
derivation's own phases first (workbench.iterate.phases: `nix print-dev-env`, unpackPhase,
patchPhase, configurePhase only when its inputs changed, saying why); then the smoke command
(remembered in workspace.json) with the libraries just linked on its library path, a hang
captured and diagnosed, and a summary. `--json` prints the summary as one document (schema
"workbench-iterate/2"; the build's log then goes to stderr). `--check` builds the target
cleanly with Nix and says where the workspace disagrees (workbench.iterate.check).

Exit status: the build's when it failed, else 3 when the smoke command hung, 1 when it failed
(or --check found a disagreement), 0; 2 for an error before the build (a patch that does not
apply, an unknown variant, ...).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.cli.build_common import command as _command
from workbench.cli.build_common import positive as _positive
from workbench.cli.build_common import say as _say
from workbench.cli.build_common import state as _state

SCHEMA = "workbench-iterate/2"
CHECK_SCHEMA = "workbench-iterate-check/1"
DEFAULT_SMOKE_TIMEOUT_S = 120.0

if TYPE_CHECKING:
    from workbench.debugging.smoke import SmokeResult
    from workbench.history.records import BuildRecord
    from workbench.iterate.ninja_output import NinjaRun
    from workbench.iterate.session import Prepared
    from workbench.iterate.workspace import WorkingCopy


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"{value:g}: give more than 0 and at most 86400 seconds")
    return value


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `iterate` to the parser."""
    iterate = subcommands.add_parser(
        "iterate",
        help="patch, rebuild incrementally and smoke-test a variant in a workspace",
        usage="workbench iterate VARIANT [-j N] [--flake DIR] [--refresh] [--check] "
        "[--smoke-timeout S] [--no-smoke] [--json] [--smoke -- CMD ARGS...]",
        description="Work in the flake package's own build environment (`nix develop .#ATTR`): its "
        "unpackPhase, patchPhase and configurePhase run once into a workspace in the state "
        "directory (workspaces/VARIANT/src, a git working copy: the upstream source, nixpkgs'"
        " own patches as one commit, each enabled patch of patches/series.toml as its own, "
        "then postPatch, as patchPhase orders them), under the supervisor. Run it again after"
        " editing sources or a patch: the build phase's tool rebuilds only what changed in "
        "that recorded environment (a changed patch is re-applied, your uncommitted edits "
        "kept; a changed src, own patch or postPatch of the derivation is made again in the "
        "workspace; configure runs again only when its inputs changed; each says why), then "
        "the smoke command runs with the libraries just linked; a hang is captured and "
        "diagnosed. --check builds the target cleanly with Nix and says where the workspace "
        "disagrees (flags, source, files produced). A Flox package file (.flox/pkgs/NAME.nix,"
        " from `workbench flox sync`) works the same way: it is called with callPackage as "
        "Flox calls it, in a workspace of its own (workspaces/NAME.flox).",
        epilog="example: workbench iterate cuda-static "
        "--smoke -- ./onnxruntime_test_all --gtest_filter='*Static*'",
    )
    iterate.add_argument(
        "variant",
        metavar="VARIANT",
        help="a variant name (`workbench variants --names`), or a flavour: cpu, cuda-dyn, "
        "cuda-static or its flake attribute, or a Flox package file of one "
        "(.flox/pkgs/NAME.nix)",
    )
    _options(iterate)
    # Everything after VARIANT: its options (read again by _split_tail, since argparse hands
    # a REMAINDER all of it), then `--` and the smoke command.
    iterate.add_argument("tail", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    iterate.set_defaults(handler=run_iterate)


def _options(parser: argparse.ArgumentParser, tail: bool = False) -> None:
    """iterate's options; `tail` is the parser of what follows VARIANT (no defaults there)."""
    default: str | None = argparse.SUPPRESS if tail else None
    flag: str | bool = argparse.SUPPRESS if tail else False
    parser.add_argument(
        "--source",
        metavar="DIR",
        default=default,
        help=argparse.SUPPRESS,  # gone: the source is the derivation's (a warning says so)
    )
    parser.add_argument(
        "--ort",
        metavar="VERSION",
        default=default,
        help="the ONNX Runtime release to work on (default: settings.toml's ort_version); each "
        "release has its own workspace",
    )
    parser.add_argument(
        "--flake",
        metavar="DIR",
        default=default,
        help="the flake whose package the workspace is made from (default: the one beside "
        "the configs)",
    )
    parser.add_argument(
        "--refresh",
        action="store_true",
        default=flag,
        help="record the derivation's environment again even if its flake looks unchanged",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        default=flag,
        help="build the target cleanly with nix build and say where the workspace disagrees "
        "with it (no cycle is run)",
    )
    parser.add_argument(
        "-j", "--jobs", type=_positive, metavar="N", default=default, help="ninja jobs"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        default=flag,
        help="the command after -- is the smoke test, run after each build and remembered "
        "for later cycles; a relative program path is looked up in the build directory first",
    )
    parser.add_argument(
        "--no-smoke", action="store_true", default=flag, help="skip the smoke test this time"
    )
    parser.add_argument(
        "--smoke-timeout",
        type=_timeout,
        metavar="S",
        default=default,
        help="seconds before a smoke run counts as hung and its stacks are captured "
        f"(remembered; default {DEFAULT_SMOKE_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--json", action="store_true", default=flag, help="print the summary as JSON"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=flag,
        help="list each other build process on this host (else one line says how many)",
    )
    if tail:  # the global options, accepted after the command as everywhere else
        parser.add_argument("--config", metavar="DIR", default=argparse.SUPPRESS)
        parser.add_argument("--state-dir", metavar="DIR", default=argparse.SUPPRESS)


def _split_tail(args: argparse.Namespace) -> list[str]:
    """Read the options after VARIANT into `args`; the smoke command after `--` (or [])."""
    tail = list(args.tail)
    command: list[str] = []
    if "--" in tail:
        cut = tail.index("--")
        tail, command = tail[:cut], tail[cut + 1 :]
    if tail:
        parser = argparse.ArgumentParser(
            prog=f"workbench iterate {args.variant}", add_help=False, allow_abbrev=False
        )
        _options(parser, tail=True)
        if command:
            parser.parse_args(tail, namespace=args)
        else:  # argparse ate the `--` when options came before VARIANT: the rest is the command
            _, command = parser.parse_known_args(tail, namespace=args)
    return command


def _smoke_argv(args: argparse.Namespace) -> list[str] | None:
    command = _split_tail(args)
    if args.smoke and not command:
        from workbench.errors import WorkbenchError

        raise WorkbenchError(
            "--smoke needs the command after --, e.g. `workbench iterate cpu --smoke -- "
            "./onnxruntime_test_all`"
        )
    if command and not args.smoke:
        from workbench.errors import WorkbenchError

        raise WorkbenchError(
            f"unexpected {shlex.join(command)!r}: to set the smoke command, put --smoke before "
            f"it (`workbench iterate {args.variant} --smoke -- {shlex.join(command)}`)"
        )
    return command or None


def resolve_smoke_program(argv: list[str], build: Path) -> list[str]:
    """A relative program path (./x, bin/x) made absolute: in the build directory if it is
    there, else in the current directory, so a remembered command works from anywhere."""
    program = argv[0]
    if os.sep in program and not os.path.isabs(program):
        in_build = build / program
        chosen = in_build if in_build.exists() else Path.cwd() / program
        return [str(chosen.resolve()), *argv[1:]]
    return list(argv)


def run_iterate(args: argparse.Namespace) -> int:
    """`workbench iterate`."""
    from workbench.configs.paths import config_dir
    from workbench.iterate import ninja_output, session
    from workbench.iterate.workspace import Git, WorkspaceError
    from workbench.supervision.lock import LockBusy

    began = time.monotonic()
    # The cycle's supervisor starts now, while the cycle is prepared (before the history is
    # opened: see supervision.prestart).
    from workbench.supervision import prestart

    prestart.prestart()
    new_smoke = _smoke_argv(args)
    config = config_dir(args.config)
    state_directory = _state(args)
    say = _say
    try:
        prepared = session.prepare(
            config,
            state_directory,
            args.variant,
            Path(args.source) if args.source else None,
            say,
            flake_directory=Path(args.flake) if args.flake else None,
            refresh=bool(args.refresh),
            ort=getattr(args, "ort", None),
        )
    except LockBusy as busy:
        holder = busy.holder.get("build_id")
        raise WorkspaceError(
            f"build #{holder} of this workspace is still running ({busy.checkout}); its files "
            f"are not changed under it. Follow it (`{_command(args)} attach {holder}`) or stop it "
            f"(`{_command(args)} stop {holder}`), then run iterate again"
            if holder
            else f"another build of {busy.checkout} is running; wait for it, then run iterate again"
        ) from None
    for warning in prepared.warnings:
        say(f"warning: {warning}")
    if args.check:
        return run_check(args, prepared)
    _say_patches(prepared)
    if prepared.fast:
        say("environment and configure inputs unchanged: the build tool alone")
    else:
        say("this cycle runs the derivation's phases first: " + "; ".join(prepared.due))

    from workbench.cli.follow_loop import launch_and_follow
    from workbench.history.store import History

    history = History(state_directory)
    choice = session.choose_jobs(history, prepared, args.jobs)
    # The plan's warnings (the memory estimate's) go with the build, as `build` hands them on:
    # said with the launch's own, and in the summary's warnings.
    planned_warnings = [choice.warning] if choice.warning else []
    plan = session.plan(prepared, choice.jobs, choice.source)
    # The summary counts ninja's status lines, so they must have the default form.
    os.environ["NINJA_STATUS"] = ninja_output.NINJA_STATUS
    # On the fast path the build tool alone runs: git's view of the working copy is what it
    # is now, so it is read while the build runs (the phases change it: read after those).
    git = Git(prepared.paths.src)
    status = git.start_status() if prepared.fast else None
    cycle_began = time.time()
    started_at = time.monotonic()
    before_launch_s = started_at - began
    followed = launch_and_follow(
        args,
        history,
        plan,
        planned_warnings,
        out=sys.stderr if args.json else sys.stdout,
        idle_s=0.05,
    )
    followed_s = time.monotonic() - started_at
    record = history.get(followed.build_id)
    if status is None and (prepared.paths.src / ".git").is_dir():
        status = git.start_status()
    # None: the phases failed before making the working copy.
    working_copy = git.read_status(status) if status is not None else None
    if not followed.finished:
        say(
            f"the build goes on without this terminal; the smoke test and the summary are "
            f"skipped (`{_command(args)} iterate {args.variant}` again once it ended)"
        )
        return followed.code
    ninja = ninja_output.parse_log(record.log_path)
    from workbench.iterate.workspace import load_state

    prepared.state = load_state(prepared.paths)  # the phases may have made or configured it
    _reread_patches(prepared)
    configured_state = prepared.state.get("configured") or {}
    configured = float(configured_state.get("at") or 0) >= cycle_began
    reasons = list(configured_state.get("reasons") or []) if configured else []
    # The phases made layers of the source again (a new src, own patches or postPatch).
    remade = prepared.state.get("source_remade") or {}
    source_reasons = (
        list(remade.get("reasons") or []) if float(remade.get("at") or 0) >= cycle_began else []
    )
    failed_phase = prepared.state.get("failed_phase") or {}
    phase_failure = None
    if followed.code != 0 and float(failed_phase.get("at") or 0) >= cycle_began:
        from workbench.iterate.phase_log import phase_failure as read_failure

        phase_failure = read_failure(record.log_path, str(failed_phase.get("phase")))

    smoke_state = dict(prepared.state.get("smoke") or {})
    if new_smoke is not None:
        smoke_state["argv"] = resolve_smoke_program(new_smoke, prepared.build_dir)
    if args.smoke_timeout is not None:
        smoke_state["timeout_s"] = args.smoke_timeout
    prepared.state["smoke"] = smoke_state or None
    smoke_result = None
    smoke_note = ""
    smoke_began = time.monotonic()
    if followed.code != 0:
        smoke_note = "not run: the build failed"
    elif args.no_smoke:
        smoke_note = "skipped (--no-smoke)"
    elif not smoke_state.get("argv"):
        smoke_note = (
            f"none set; set one with `{_command(args)} iterate {args.variant} --smoke -- CMD "
            "ARGS...` (it is remembered for the next cycles)"
        )
    else:
        from workbench.debugging import smoke

        libraries = built_libraries(prepared.build_dir)
        runtime = next((lib for lib in libraries if lib.name.startswith("libonnxruntime.so")), None)
        if runtime is not None:  # the ort crate's way of finding the library (flavours.toml)
            os.environ["ORT_DYLIB_PATH"] = str(runtime)
        smoke_result = smoke.smoke_command(
            smoke_state["argv"],
            timeout=float(smoke_state.get("timeout_s") or DEFAULT_SMOKE_TIMEOUT_S),
            library_path=list(dict.fromkeys(str(lib.parent) for lib in libraries)),
            progress=None if args.json else (lambda message: say(f"smoke: {message}")),
        )
    smoke_s = time.monotonic() - smoke_began

    timings = {
        **{key: round(value, 3) for key, value in prepared.timings.items()},
        "build_s": round(record.duration_s or 0.0, 3),
        "before_launch_s": round(before_launch_s, 3),
        "launch_and_follow_s": round(followed_s, 3),
        "smoke_s": round(smoke_s, 3),
    }
    prepared.state["last"] = {
        "build_id": record.id,
        "state": record.state,
        "compiled": ninja.sources,
        "smoke": smoke_result.status if smoke_result else None,
        "at": time.time(),
    }
    prepared.save(durable=False)  # what the phases recorded was saved durably by them
    document = _document(
        prepared, working_copy, configured, reasons, record, ninja, smoke_result, smoke_note
    )
    document["warnings"] = [*prepared.warnings, *planned_warnings]
    document["failed_phase"] = phase_failure.to_json() if phase_failure else None
    document["source_remade"] = source_reasons
    document["steps"] = [
        *prepared.due,
        *(f"the source is made again: {reason}" for reason in source_reasons),
    ]
    ended = time.monotonic()
    # After the build, the smoke run aside: git's status, the log's ninja lines, the note.
    timings["after_build_s"] = round(ended - started_at - followed_s - smoke_s, 3)
    timings["total_s"] = round(ended - began, 3)
    document["timings"] = timings
    if args.json:
        from workbench.cli.common import print_json

        print_json(document)
    else:
        print(_summary(document, smoke_result))
    if followed.code != 0:
        return followed.code
    if smoke_result is not None:
        return {"passed": 0, "hung": 3}.get(smoke_result.status, 1)
    return 0


def _reread_patches(prepared: Prepared) -> None:
    """The patch commits as they are after the build (the phases make a new workspace's)."""
    from workbench.iterate.workspace import Git, read_history

    upstream = prepared.state.get("upstream_commit")
    if prepared.fast or not upstream or not (prepared.paths.src / ".git").is_dir():
        return  # the build tool alone changes no commit
    prepared.patches = read_history(Git(prepared.paths.src), upstream).patches
    if not (prepared.paths.src / ".git").is_dir() or not prepared.due:
        return
    if any("workspace is made" in step for step in prepared.due):
        prepared.applied.created = True
        prepared.applied.applied = [patch.name for patch in prepared.patches]


def built_libraries(build: Path) -> list[Path]:
    """The shared libraries the build directory holds (the ones a consumer would load)."""
    found = []
    for directory, subdirectories, files in os.walk(build):
        subdirectories[:] = [d for d in subdirectories if d != "CMakeFiles"]
        for name in files:
            path = Path(directory) / name
            if ".so" in name and not path.is_symlink() and path.is_file():
                found.append(path)
    return sorted(found)


def run_check(args: argparse.Namespace, prepared: Prepared) -> int:
    """`workbench iterate TARGET --check`."""
    import tempfile

    from workbench.cli.follow_loop import launch_and_follow
    from workbench.history.records import NewBuild
    from workbench.history.store import History
    from workbench.iterate import check, dev_env
    from workbench.planning.launch import eta_key

    if not prepared.fast and not (prepared.paths.src / ".git").is_dir():
        from workbench.errors import WorkbenchError

        raise WorkbenchError(
            f"there is no workspace for {prepared.target.name} yet: run `{_command(args)} "
            f"iterate {args.variant}` first"
        )
    result = check.CheckResult()
    root = prepared.paths.root
    _say(f"check: the environment {prepared.origin.label} has now")
    now, script = dev_env.fresh(prepared.origin, root)
    check.compare_flags(result, prepared.state, now)
    _say("check: the derivation's unpackPhase and patchPhase in a scratch directory")
    with tempfile.TemporaryDirectory(prefix="workbench-check-") as scratch:
        tree = check.patched_tree(script, Path(scratch))
        check.compare_source(result, prepared.paths, tree)
    result_link = root / "check" / "result"
    result_link.parent.mkdir(exist_ok=True)
    argv = [
        *dev_env.nix("build", *prepared.origin.installable()),
        "-L",
        "--log-format",
        "internal-json",
        "--out-link",
        str(result_link),
    ]
    name = f"iterate {prepared.target.name} --check"
    recorded = {"argv": argv, "iterate": prepared.target.name, "check": True}
    plan = NewBuild(
        name=name,
        backend="run",
        argv=tuple(argv),
        cwd=str(root.resolve()),
        checkout=str((root / "check").resolve()),
        settings=recorded,
        eta_key=eta_key("run", name, recorded),
        nix=True,
        target=prepared.target.attr,
    )
    history = History(_state(args))
    _say("check: the clean nix build")
    followed = launch_and_follow(args, history, plan, [], out=sys.stderr, idle_s=0.05)
    if followed.code != 0 or not result_link.exists():
        _say(f"check: the clean nix build failed (build #{followed.build_id})")
        return followed.code or 1
    ours = check.install_workspace(prepared.paths, prepared.state, args.jobs or 1)
    check.compare_outputs(result, ours, result_link.resolve())
    document = {
        "schema": CHECK_SCHEMA,
        "target": prepared.target.name,
        "workspace": str(prepared.paths.src),
        "nix_build": str(result_link.resolve()),
        "nix_build_id": followed.build_id,
        **result.to_json(),
    }
    if args.json:
        from workbench.cli.common import print_json

        print_json(document)
    else:
        print(render_check(document))
    return 0 if result.agrees else 1


def render_check(document: dict[str, Any]) -> str:
    """--check in words: agrees or not, then each disagreement by area."""
    from workbench.progress.visible import visible

    lines = [
        f"iterate {document['target']} --check: the workspace "
        + ("AGREES with" if document["agrees"] else "DISAGREES with")
        + f" nix build ({document['nix_build']})"
    ]
    for area in ("flags", "source", "files"):
        found = [d["what"] for d in document["disagreements"] if d["area"] == area]
        lines.append(f"  {area + ':':8} {'agree' if not found else f'{len(found)} differ'}")
        lines += [f"    {visible(what)}" for what in found]
    lines.append("  compared: " + "; ".join(document["checked"]))
    return "\n".join(lines)


def _say_patches(prepared: Prepared) -> None:
    applied = prepared.applied
    names = [patch.name for patch in prepared.patches]
    total = len(prepared.wanted)
    if applied.created:
        _say(
            f"workspace made: upstream source + {len(applied.applied)} patch commits "
            f"({', '.join(applied.applied) or 'the series has none for ' + prepared.target.name})"
        )
    elif applied.replaced_from is not None:
        _say(
            f"series changed: reverted {', '.join(applied.reverted) or 'nothing'}; applied "
            f"{', '.join(applied.applied) or 'nothing'}"
            + (f"; your edits kept: {', '.join(applied.edits_kept)}" if applied.edits_kept else "")
            + ("; postPatch run again on top" if applied.post_patch else "")
            + f"; {applied.kept_mtimes} unchanged files keep their modification time"
        )
    else:
        _say(f"series unchanged: {total} patches ({', '.join(names) or 'none'})")


def _document(
    prepared: Prepared,
    working_copy: WorkingCopy | None,
    configured: bool,
    reasons: list[str],
    record: BuildRecord,
    ninja: NinjaRun,
    smoke_result: SmokeResult | None,
    smoke_note: str,
) -> dict[str, Any]:
    """The cycle's summary as data; `working_copy` is None when the phases failed before
    making it (Nix could not evaluate or build the environment)."""
    from workbench.reading.follow import exit_code

    return {
        "schema": SCHEMA,
        "target": prepared.target.name,
        "attr": prepared.target.attr,
        "kind": "variant" if prepared.target.variant is not None else "flavour",
        "workspace": {
            "root": str(prepared.paths.root),
            "src": str(prepared.paths.src),
            "build": str(prepared.build_dir),
            "flake": str(prepared.flake),
            "attr": prepared.attr,
            "package_file": (
                str(prepared.origin.package_file) if prepared.origin.package_file else None
            ),
            "drv_path": prepared.state.get("drv_path"),
            "environment": str(prepared.paths.root / "env.json"),
            "pristine_commit": prepared.state.get("pristine_commit"),
            "state_file": str(prepared.paths.state_file),
            "source": prepared.state.get("source"),
            "upstream_commit": prepared.state.get("upstream_commit"),
            "head": working_copy.head if working_copy else None,
            "edits": working_copy.edits if working_copy else [],
        },
        "patches": [patch.to_json() for patch in prepared.patches],
        "series_change": prepared.applied.to_json(),
        "steps": prepared.due,
        "configured": configured,
        "configure_reasons": reasons,
        "warnings": prepared.warnings,
        "build": {
            "id": record.id,
            "name": record.name,
            "state": record.state,
            "exit_code": exit_code(record),
            "duration_s": record.duration_s,
            "log": record.log_path,
            "note": record.note,
        },
        "ninja": ninja.to_json(),
        "smoke": smoke_result.to_json() if smoke_result is not None else None,
        "smoke_note": smoke_note,
        "failed_phase": None,
        "source_remade": [],
        "timings": {},
    }


def _summary(document: dict[str, Any], smoke_result: SmokeResult | None) -> str:
    from workbench.host.units import duration
    from workbench.progress.visible import visible

    change = document["series_change"]
    build = document["build"]
    ninja = document["ninja"]
    names = [patch["name"] for patch in document["patches"]]
    lines = [f"iterate {document['target']}: {document['workspace']['src']}"]
    if change["created"]:
        patches = f"{len(change['applied'])} applied as commits ({', '.join(names) or 'none'})"
    elif change["replaced_from"] is not None:
        patches = (
            f"re-applied from #{change['replaced_from'] + 1}: reverted "
            f"{', '.join(change['reverted']) or 'nothing'}, applied "
            f"{', '.join(change['applied']) or 'nothing'}"
        )
    elif document["workspace"]["head"] is None:
        patches = "no working copy yet: the derivation's phases failed before making it"
    else:
        patches = f"unchanged ({', '.join(names) or 'none'})"
    lines.append(f"  patches:   {patches}")
    if document["source_remade"]:
        lines.append(f"  source:    made again: {visible('; '.join(document['source_remade']))}")
    if document["workspace"]["edits"]:
        lines.append(f"  your edits (uncommitted): {', '.join(document['workspace']['edits'])}")
    failed = document.get("failed_phase")
    if failed:
        configure_failed = failed["phase"] == "configurePhase"
        lines.append(
            f"  configure: FAILED: {failed['error']}"
            if configure_failed
            else f"  phases:    {failed['phase']} FAILED: {failed['error']}"
        )
        lines.append(f"             log: {visible(failed['log'])}")
    if failed and failed["phase"] == "configurePhase":
        pass  # said above
    elif document["configured"]:
        lines.append(f"  configure: ran: {'; '.join(document['configure_reasons'])}")
    elif build["state"] != "succeeded":
        lines.append("  configure: not run this cycle")
    else:
        lines.append("  configure: not run (its inputs are unchanged)")
    compiled = ninja["sources"]
    shown = ", ".join(compiled[:8]) + (" ..." if len(compiled) > 8 else "")
    work = (
        "the build tool did not run (a phase failed before it)"
        if failed
        else "nothing to do"
        if ninja["edges"] == 0
        else f"{len(compiled)} {'file' if len(compiled) == 1 else 'files'} compiled"
        f"{f' ({shown})' if compiled else ''}, "
        f"{len(ninja['linked'])} linked, {ninja['edges']} of {ninja['total']} edges"
    )
    lines.append(
        f"  build:     #{build['id']} {build['state']} in {duration(build['duration_s'])}: {work}"
    )
    if smoke_result is not None:
        from workbench.debugging.smoke import render_text

        text = render_text(smoke_result).splitlines()
        lines.append(f"  smoke:     {text[0]}")
        lines += [f"  {line}" for line in text[1:]]
    else:
        lines.append(f"  smoke:     {document['smoke_note']}")
    return "\n".join(lines)

"""`workbench bt`, `workbench debug-bt` and `workbench smoke`: hung programs, captured.

    workbench bt PID [--samples N] [--interval S] [--json] [--source ORT_DIR]
    workbench debug-bt [--after S] [--samples N] -- CMD...
    workbench smoke VARIANT | --python PATH | -- CMD... [--timeout S]

Exit status: bt and debug-bt return 0 when the capture is complete, 1 when the process
exited part-way (or, for debug-bt, before the capture), 2 on an error; smoke returns 0 when
the run passed, 1 when it failed, 3 when it hung (its stacks are in the report).
The JSON documents are described in workbench.debugging.bt_report and workbench.debugging.smoke.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from workbench.cli.common import print_json
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from pathlib import Path

    from workbench.artefacts.smoke_target import SmokeTarget
    from workbench.debugging.capture.options import CaptureOptions, Progress
    from workbench.debugging.model import BridgePair, Capture, Diagnosis
    from workbench.debugging.smoke import SmokeResult


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the bt, debug-bt and smoke parsers."""
    bt = subcommands.add_parser(
        "bt",
        help="capture every thread's stack of a running process and diagnose a hang",
        description="Attach gdb to PID, take samples of all threads' stacks (detaching between "
        "them), and say whether and why it hangs: call cycles (the provider bridge's loop), "
        "static-initialisation hangs, lock cycles. The process is left as it was found.",
    )
    bt.add_argument("pid", type=int, help="process id")
    _capture_options(bt)
    bt.set_defaults(handler=run_bt)

    debug_bt = subcommands.add_parser(
        "debug-bt",
        help="start a program, capture its stacks after a few seconds, diagnose, stop it",
        description="The builder flake's debug-bt: run CMD in its own process group, wait "
        "--after seconds, capture and diagnose, then end the program (TERM, then KILL).",
    )
    debug_bt.add_argument(
        "--after", type=float, default=2.0, metavar="S", help="seconds to wait (default 2)"
    )
    _capture_options(debug_bt)
    debug_bt.add_argument("argv", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    debug_bt.set_defaults(handler=run_debug_bt)

    smoke = subcommands.add_parser(
        "smoke",
        help="run a built artifact's smoke check; a hang is captured and diagnosed",
        description="VARIANT runs ./result-VARIANT/bin/python; --python PATH runs that "
        "interpreter; -- CMD runs a command (a flake test app) with ONNX_TEST_MODEL and "
        "LD_LIBRARY_PATH set. A Python imports onnxruntime, lists providers and runs a tiny "
        "MatMul model on each.",
    )
    smoke.add_argument("--python", metavar="PATH", help="the Python interpreter to check")
    smoke.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="hung after S seconds (120)"
    )
    smoke.add_argument(
        "--ld-library-path",
        action="append",
        default=[],
        metavar="DIR",
        help="prepend DIR to LD_LIBRARY_PATH for -- CMD (cuDNN, as the flake's apps do)",
    )
    smoke.add_argument("--samples", type=int, default=3, help="samples of a hung run (3)")
    smoke.add_argument("--interval", type=float, default=0.2, help="seconds between samples")
    smoke.add_argument("--gdb", metavar="PATH", help="gdb to use (default: gdb, else cuda-gdb)")
    smoke.add_argument("--json", action="store_true", help="print the result as JSON")
    smoke.add_argument(
        "--ort",
        metavar="VERSION",
        help="the ONNX Runtime release it was built as (a VARIANT's: default settings.toml's "
        "ort_version); the check fails when the library reports another version",
    )
    smoke.add_argument(
        "--library",
        action="append",
        default=[],
        metavar="PATH",
        help="a libonnxruntime.so whose C API version string must be the --ort release too "
        "(with --python; a VARIANT's own is found in its output)",
    )
    smoke.add_argument("target", nargs=argparse.REMAINDER, help="VARIANT, or -- CMD [ARGS...]")
    smoke.set_defaults(handler=run_smoke)


def _capture_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--samples",
        type=int,
        default=1,
        help="stack samples to take, each one gdb attach (default 1: the program counters of "
        "every running thread are sampled before it; more samples show stacks growing)",
    )
    parser.add_argument(
        "--interval", type=float, default=0.2, metavar="S", help="seconds between samples (0.2)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--gdb", metavar="PATH", help="gdb to use (default: gdb, else cuda-gdb)")
    parser.add_argument(
        "--max-frames", type=int, default=256, help="frames read per thread (default 256)"
    )
    parser.add_argument(
        "--attach-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds gdb may take to attach and read symbols before falling back to ELF "
        "symbols only (default 30)",
    )
    parser.add_argument(
        "--no-step",
        action="store_true",
        help="do not single-step running threads to trace tight loops",
    )
    parser.add_argument(
        "--debug-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="where separate debug files are (DIR/.build-id/xx/yyyy.debug, or by debuglink); "
        "searched before NIX_DEBUG_INFO_DIRS and /usr/lib/debug",
    )
    parser.add_argument(
        "--source",
        metavar="ORT_DIR",
        help="ONNX Runtime source tree: write the proposed guard for a bridge loop to patches/",
    )
    parser.add_argument("--patch-name", metavar="NAME", help="file name for the written patch")


def _options(args: argparse.Namespace) -> CaptureOptions:
    from pathlib import Path

    from workbench.debugging.capture.options import CaptureOptions

    if args.samples < 1:
        raise WorkbenchError("--samples must be at least 1")
    if args.interval < 0:
        raise WorkbenchError("--interval must not be negative")
    return CaptureOptions(
        samples=args.samples,
        interval=args.interval,
        gdb=args.gdb,
        max_frames=max(8, args.max_frames),
        attach_timeout=args.attach_timeout,
        step_probe=0 if args.no_step else 40,
        debug_dirs=tuple(str(Path(directory).expanduser()) for directory in args.debug_dir),
        wait_for_gdb_exit=False,
    )


def _progress(args: argparse.Namespace) -> Progress | None:
    if args.json or not sys.stderr.isatty():
        return None
    return lambda message: print(f"  {message}", file=sys.stderr)


def _diagnose_and_patch(args: argparse.Namespace, captured: Capture) -> Diagnosis:
    from workbench.debugging.diagnosis.verdict import diagnose

    diagnosis = diagnose(captured)
    bridge = next((finding.bridge for finding in diagnosis.findings if finding.bridge), None)
    if args.source and bridge:
        from pathlib import Path

        from workbench.configs.paths import config_dir, patches_dir
        from workbench.debugging.bridge.bridge_patch import write_patch

        config = config_dir(args.config)
        proposed = write_patch(
            bridge, Path(args.source).expanduser(), patches_dir(config), args.patch_name
        )
        diagnosis.proposed_patch = proposed
        assert proposed.path is not None  # write_patch says where it wrote
        _add_to_series(config, Path(proposed.path), bridge)
    return diagnosis


def _add_to_series(config: Path, file: Path, bridge: BridgePair) -> None:
    """The written guard joins the series (for the static flavour, enabled) unless it is in."""
    from workbench.patches.series import NewPatch, add_patch, load_series

    series = load_series(config)
    if any(series.file_of(patch) == file for patch in series.patches):
        return
    fixes = f"{bridge.host_method} and {bridge.counterpart} call each other in a static build"
    new = NewPatch(file.stem, "bridge-loop", fixes, flavours=("cuda-static",))
    add_patch(config, new, None)
    print(f"added {file.stem} to {series.path} (for cuda-static, enabled)", file=sys.stderr)


def run_bt(args: argparse.Namespace) -> int:
    """Capture PID, diagnose, print; 0 complete, 1 partial (the process exited part-way)."""
    from workbench.debugging.gdb.gdb_session import GdbSession, find_gdb
    from workbench.debugging.gdb.gdb_start import take_early

    # gdb first (main started it before parsing, unless it could not): it loads itself
    # while Python imports the capture and diagnosis code.
    gdb = find_gdb(args.gdb)
    early = take_early(gdb)
    session = GdbSession(
        gdb,
        started=early.process if early else None,
        preloaded=early.preloaded if early else None,
    )
    try:
        from workbench.debugging.bt_report import bt_document, render_text
        from workbench.debugging.capture.loop import capture
        from workbench.debugging.debug_errors import ProcessExitedError

        options = _options(args)
    except BaseException:
        session.close()
        raise
    try:
        captured = capture(args.pid, options, _progress(args), session=session)
    except ProcessExitedError as exc:
        # It was there and ended by itself: not the user's error (2), the partial case (1).
        if args.json:
            print_json(
                {"schema": "workbench-bt/1", "pid": args.pid, "exited": True, "message": str(exc)}
            )
        else:
            print(str(exc))
        return 1
    diagnosis = _diagnose_and_patch(args, captured)
    if args.json:
        print_json(bt_document(captured, diagnosis))
    else:
        print(render_text(captured, diagnosis))
    return 0 if captured.complete else 1


def _command(argv: list[str], what: str) -> list[str]:
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise WorkbenchError(f"{what}: give the command after --, e.g. {what} -- ./prog ARGS")
    return argv


def run_debug_bt(args: argparse.Namespace) -> int:
    """Start CMD, capture after --after seconds, diagnose, stop it; nothing is left running."""
    from workbench.debugging.bt_report import bt_document, render_text
    from workbench.debugging.capture.loop import capture
    from workbench.debugging.debug_errors import ProcessGoneError
    from workbench.debugging.program import Program, describe_status, pick_target

    argv = _command(args.argv, "workbench debug-bt")
    options = _options(args)
    with Program(argv) as program:
        status = program.wait(args.after)
        if status is None:
            try:
                captured = capture(pick_target(program.pid), options, _progress(args))
            except ProcessGoneError:
                captured = None
        else:
            captured = None
        # poll() reads the exit status of a program that ended by itself during the capture;
        # only one still running when the capture is done is stopped by the workbench.
        status = program.process.poll()
        diagnosis = _diagnose_and_patch(args, captured) if captured else None
        final = program.stop()
        info: dict[str, Any] = {
            "argv": argv,
            "status": describe_status(status) if status is not None else "stopped by the workbench",
            "exit_status": final,
            "ended_by_itself": status is not None,
            "output_tail": program.output_tail(),
        }
        if captured is None or diagnosis is None:
            message = (
                f"{argv[0]} ended ({describe_status(final)}) before the capture at "
                f"{args.after:g} s: it did not hang"
            )
            if args.json:
                exited = {"schema": "workbench-bt/1", "program": info, "exited": True}
                print_json({**exited, "message": message})
            else:
                print(message)
                tail = info["output_tail"]
                if tail:
                    from workbench.progress.visible import terminal_text

                    lines = "\n".join(f"  {terminal_text(line)}" for line in tail.splitlines())
                    print(f"output (last lines):\n{lines}")
            return 1
        if args.json:
            print_json(bt_document(captured, diagnosis, program=info))
        else:
            print(render_text(captured, diagnosis))
            if status is None:
                print(
                    f"\n{argv[0]}: stopped by the workbench (TERM, then KILL, to its process group)"
                )
            else:
                print(f"\n{argv[0]}: ended by itself during the capture ({info['status']})")
        return 0 if captured.complete and status is None else 1


def run_smoke(args: argparse.Namespace) -> int:
    """Run the smoke check; 0 passed, 1 failed or error, 3 hung (stacks captured)."""
    from workbench.debugging import smoke

    target = list(args.target)
    # `smoke NAME --ort V`: the remainder took the option; take it back (not after `--`).
    if target and target[0] != "--":
        for index, word in enumerate(target):
            if word == "--ort" and index + 1 < len(target):
                args.ort = target[index + 1]
                del target[index : index + 2]
                break
            if word.startswith("--ort="):
                args.ort = word.split("=", 1)[1]
                del target[index]
                break
    progress = _progress(args)
    common = {
        "timeout": args.timeout,
        "samples": max(1, args.samples),
        "interval": args.interval,
        "gdb": args.gdb,
        "progress": progress,
    }
    if target and target[0] == "--":
        if args.python:
            raise WorkbenchError("give either --python PATH or -- CMD, not both")
        if args.library:
            raise WorkbenchError("--library goes with --python PATH or a VARIANT, not -- CMD")
        result = smoke.smoke_command(
            _command(target, "workbench smoke"), library_path=args.ld_library_path, **common
        )
    elif args.python:
        if target:
            raise WorkbenchError(f"unexpected {' '.join(target)!r} after --python PATH")
        result = smoke.smoke_python(args.python, libraries=args.library, **common)
        if args.ort:
            _require_release(result, args.ort)
    elif len(target) == 1:
        resolved, cuda, release = _built_variant(args, target[0])
        if not args.json:
            print(resolved.said)
        libraries = [*resolved.libraries, *args.library]
        result = smoke.smoke_python(resolved.python, libraries=libraries, **common)
        if not libraries:
            result.notes.append(
                "no libonnxruntime.so in the output or its closure: the C API's version string "
                "was not checked"
            )
        _require_providers(result, cuda)
        _require_release(result, release)
    else:
        raise WorkbenchError("workbench smoke: give a VARIANT, --python PATH, or -- CMD [ARGS...]")
    if args.json:
        print_json(result.to_json())
    else:
        print(smoke.render_text(result))
    return {"passed": 0, "hung": 3}.get(result.status, 1)


def _built_variant(args: argparse.Namespace, name: str) -> tuple[SmokeTarget, bool, str]:
    """The interpreter of the variant built in the checkout (either backend), and whether it is
    a CUDA variant (which must run on the CUDA provider)."""
    from workbench.artefacts.smoke_target import resolve
    from workbench.cli.common import load_config
    from workbench.configs.paths import state_dir
    from workbench.configs.releases import UnknownReleaseError
    from workbench.configs.settings import load_settings
    from workbench.configs.variants import parse
    from workbench.history.store import History, database_path
    from workbench.planning.launch import default_flake_directory

    directory, matrix = load_config(args)
    try:
        base, named = matrix.releases.split_name(name) if matrix.releases else (name, None)
        ort = args.ort or (named.version if named else load_settings(directory, matrix).ort_version)
        variant = parse(base, matrix, matrix.release(ort).version)
    except UnknownReleaseError as error:
        raise WorkbenchError(str(error)) from None
    checkout = default_flake_directory(directory)
    state = state_dir(getattr(args, "state_dir", None))
    if database_path(state).is_file():
        with History(state) as history:
            return resolve(variant.name, checkout, history), variant.is_gpu, variant.ort_version
    return resolve(variant.name, checkout), variant.is_gpu, variant.ort_version


def _require_release(result: SmokeResult, version: str) -> None:
    """A library that reports another ONNX Runtime release than it was built as has failed."""
    from workbench.artefacts.smoke_target import require_release

    if result.status != "passed":
        return
    why = require_release(result.check, version)
    if why:
        result.status = "failed"
        result.message = why


def _require_providers(result: SmokeResult, cuda: bool) -> None:
    """A CUDA variant whose CUDA provider is missing or fails has failed, not passed."""
    from workbench.artefacts.smoke_target import require_providers

    if result.status != "passed":
        return
    why = require_providers(result.check, cuda)
    if why:
        result.status = "failed"
        result.message = why

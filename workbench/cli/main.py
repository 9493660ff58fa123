"""Entry point of the `workbench` command: global options, then one module per command.

Each command module exposes `register(subcommands)`, which adds its parser and sets
`handler=function(args) -> int`. Command modules keep heavy imports inside their handlers so
that `workbench --version` stays fast.
"""

from __future__ import annotations

import sys

# typing.TYPE_CHECKING without importing typing: 7 ms before `bt` can start gdb.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

COMMAND_MODULES = (
    "workbench.cli.variants_command",
    "workbench.cli.doctor_command",
    "workbench.cli.config_command",
    "workbench.cli.debug_command",
    "workbench.cli.build_command",
    "workbench.cli.run_command",
    "workbench.cli.status_command",
    "workbench.cli.attach_command",
    "workbench.cli.logs_command",
    "workbench.cli.stop_command",
    "workbench.cli.history_command",
    "workbench.cli.report_command",
    "workbench.cli.patches_command",
    "workbench.cli.iterate_command",
    "workbench.cli.artefact_command",
    "workbench.cli.trace_command",
    "workbench.cli.flox_command",
    "workbench.cli.hosts_command",
    "workbench.cli.push_command",
    "workbench.cli.init_command",
    "workbench.cli.completion",
)


# Commands run every few seconds in a loop get a parser of their own module alone: importing
# every other command's module would cost each `workbench iterate` cycle a tenth of a second.
SOLE_COMMANDS = {
    "iterate": "workbench.cli.iterate_command",
    # `bt PID` races plain gdb end to end: its parser alone, not every command's.
    "bt": "workbench.cli.debug_command",
    "debug-bt": "workbench.cli.debug_command",
}
# Commands that leave the process without the interpreter's teardown once they have said
# everything: the history's SQLite connection, closed last, would checkpoint its WAL (three
# fdatasyncs) and every module be torn down, 20-40 ms of each `workbench iterate` cycle. The
# WAL stays valid and is checkpointed by the next connection that closes last. `bt` races
# plain gdb end to end: its teardown took about 10 ms after the diagnosis was printed (its
# gdb, already detached, was told to exit and does so by itself).
LEAVE_WITHOUT_TEARDOWN = frozenset({"iterate", "bt"})


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole argument parser, with every command module registered (or only `only`)."""
    import argparse  # here: opening the TUI needs no parser
    import importlib

    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Build ONNX Runtime from source with CUDA through Nix or Flox, and watch it.",
    )
    parser.add_argument(
        "--version",
        action=_version_action(),
        nargs=0,
        help="show the version and commit, then exit",
    )
    parser.add_argument(
        "--config",
        metavar="DIR",
        help="config directory (default: $WORKBENCH_CONFIG, else the configs/ of the checkout "
        "you are in, else your default checkout's, else the installed defaults)",
    )
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="state directory (default: $WORKBENCH_STATE_DIR, else the XDG state directory)",
    )
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in (only,) if only else COMMAND_MODULES:
        importlib.import_module(module_name).register(subcommands)
    # The global options are accepted after the command too (`workbench doctor --state-dir D`);
    # SUPPRESS keeps a value given before the command from being reset. An action's parser
    # (`config get`, `patches show`) gets them too: argparse hands a sub-parser's leftovers to
    # no one, so `config get KEY --config D` would be "unrecognized arguments".
    commands = list(subcommands.choices.values())
    while commands:
        command = commands.pop()
        command.add_argument(
            "--config", metavar="DIR", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        command.add_argument(
            "--state-dir", metavar="DIR", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                commands += action.choices.values()
    return parser


GLOBAL_OPTIONS = ("--config", "--state-dir")


def _version_action() -> type:
    import argparse

    class Version(argparse.Action):
        """--version: asks git (from a checkout) only when given, not whenever a parser is
        built."""

        def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
            from workbench.version import version_line

            print(version_line())
            parser.exit()

    return Version


def command_word(args_list: Sequence[str]) -> str | None:
    """The command `args_list` names: its first word past the global options and their values
    (None when an option comes first that is not one of them, such as --help)."""
    rest = list(args_list)
    while rest:
        word = rest.pop(0)
        name = word.partition("=")[0]
        if name in GLOBAL_OPTIONS:
            if "=" not in word and rest:
                rest.pop(0)
            continue
        return None if word.startswith("-") else word
    return None


def tui_options(args_list: Sequence[str]) -> dict[str, str] | None:
    """The global options when `args_list` holds nothing else (the TUI's launch), else None.

    Lets `workbench` open the TUI without building the parser, which imports every command
    module; anything unusual (a command, --help, a missing value) returns None and goes
    through the parser as usual.
    """
    options: dict[str, str] = {}
    rest = list(args_list)
    while rest:
        name, equals, value = rest.pop(0).partition("=")
        if name not in GLOBAL_OPTIONS or (equals and not value):
            return None
        if not equals:
            if not rest or rest[0].startswith("-"):
                return None
            value = rest.pop(0)
        options[name[2:].replace("-", "_")] = value
    return options


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; with no command, open the TUI."""
    import os

    if argv is None and "_ARGCOMPLETE" in os.environ:  # the shell asks for completions
        from workbench.cli.completion import complete

        complete()  # argcomplete answers and exits
        return 0
    args_list = list(sys.argv[1:] if argv is None else argv)
    if argv is None:
        from workbench.ascii_output import use_ascii_when_needed

        use_ascii_when_needed()  # LANG=C: ★ and ✓ would reach the terminal as garbage
    if args_list == ["--version"]:  # the fast path: no parser, no imports
        from workbench.version import version_line

        print(version_line())
        return 0
    options = tui_options(args_list)
    if options is not None:  # the TUI's fast path: its first screen is drawn sooner
        return open_tui(options.get("config"), options.get("state_dir"))
    command = command_word(args_list) or ""
    if command == "bt":  # gdb starts first, as plain gdb does: it loads while we parse
        from workbench.debugging.gdb.gdb_start import start_early

        start_early(args_list[args_list.index(command) + 1 :])
    parser = build_parser(SOLE_COMMANDS.get(command))
    args = parser.parse_args(args_list)
    from workbench.errors import WorkbenchError

    try:
        if args.command is None:
            return open_tui(args.config, args.state_dir)
        if getattr(args, "json", False) and isinstance(args.command, str):
            from workbench.cli import common

            action = next(
                (value for key, value in vars(args).items() if key.endswith("_action")), None
            )
            common.json_command = "-".join(w for w in (args.command, action) if w)
        code = int(args.handler(args) or 0)
        # `run` keeps its own argv in `command` (a list): only a command word can match.
        if (
            argv is None
            and isinstance(args.command, str)
            and args.command in LEAVE_WITHOUT_TEARDOWN
        ):
            leave_now(code)
        return code
    except WorkbenchError as exc:
        print(f"workbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into `head`: not an error worth a traceback
        sys.stderr.close()
        return 0
    except Exception as exc:
        message = known_failure(exc)
        if message is None:
            raise  # a bug: its traceback is what a report needs
        print(f"workbench: error: {message}", file=sys.stderr)
        return 2


def leave_now(code: int) -> None:
    """End the process with `code` at once: output flushed, no interpreter teardown."""
    import contextlib
    import os

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a reader gone (`| head`): nothing reaches it
            stream.flush()
    os._exit(code)


# What the system says when a disk is full or a file may not be written, and what to do.
_SYSTEM_ADVICE = {
    "ENOSPC": "the disk is full: free space there (`df -h`) and try again",
    "EDQUOT": "your disk quota is used up: free space and try again",
    "EROFS": "that file system is read-only: choose a writable place (--state-dir, --config)",
    "EACCES": "you may not write there: fix its permissions, or choose another place "
    "(--state-dir, --config)",
    "EPERM": "the operation is not permitted there: choose another place (--state-dir, --config)",
    "EIO": "the disk reported an input/output error: check the disk, then try again",
    "ELOOP": "a symbolic link is in the way: remove it",
}


def known_failure(exc: BaseException) -> str | None:
    """The one-line explanation of a failure of the system rather than of the workbench (a full
    disk, a read-only file system, a damaged database), or None for anything else."""
    import errno
    import sqlite3

    if isinstance(exc, sqlite3.Error):
        return f"the build history database failed ({exc}); free space or fix its permissions"
    if isinstance(exc, OSError) and exc.errno is not None:
        advice = _SYSTEM_ADVICE.get(errno.errorcode.get(exc.errno, ""))
        if advice is None:
            return None
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror}; {advice}"
    return None


def open_tui(config: str | None, state_dir: str | None) -> int:
    """Run the TUI; an error before it starts (a bad config) is reported like a command's."""
    from workbench.errors import WorkbenchError
    from workbench.tui.app import run_app

    try:
        return run_app(config=config, state_dir=state_dir)
    except WorkbenchError as exc:
        print(f"workbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        message = known_failure(exc)
        if message is None:
            raise
        print(f"workbench: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

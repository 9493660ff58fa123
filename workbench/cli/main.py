"""Entry point of the `workbench` command: global options, then one module per command.

Each command module exposes `register(subcommands)`, which adds its parser and sets
`handler=function(args) -> int`. Command modules keep heavy imports inside their handlers so
that `workbench --version` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from workbench import __version__

COMMAND_MODULES = (
    "workbench.cli.variants_command",
    "workbench.cli.doctor_command",
    "workbench.cli.config_command",
    "workbench.cli.debug_command",
    "workbench.cli.build_commands",
)


def build_parser() -> argparse.ArgumentParser:
    """The whole argument parser, with every command module registered."""
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Build ONNX Runtime from source with CUDA through Nix or Flox, and watch it.",
    )
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    parser.add_argument(
        "--config",
        metavar="DIR",
        help="config directory (default: $WORKBENCH_CONFIG, else the repository's configs/)",
    )
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="state directory (default: $WORKBENCH_STATE_DIR, else the XDG state directory)",
    )
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subcommands)
    # The global options are accepted after the command too (`workbench doctor --state-dir D`);
    # SUPPRESS keeps a value given before the command from being reset.
    for command in subcommands.choices.values():
        command.add_argument(
            "--config", metavar="DIR", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        command.add_argument(
            "--state-dir", metavar="DIR", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; with no command, open the TUI."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list == ["--version"]:  # the fast path: no parser, no imports
        print(f"workbench {__version__}")
        return 0
    parser = build_parser()
    args = parser.parse_args(args_list)
    from workbench.errors import WorkbenchError

    try:
        if args.command is None:
            from workbench.tui.app import run_app

            return run_app(config=args.config, state_dir=args.state_dir)
        return int(args.handler(args) or 0)
    except WorkbenchError as exc:
        print(f"workbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into `head`: not an error worth a traceback
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())

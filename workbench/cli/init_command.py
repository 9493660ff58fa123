"""`workbench init DIR`: write a checkout (flake, nix/, configs/, patches/, .flox/) to build in."""

from __future__ import annotations

import argparse


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "init",
        help="write a checkout to build in (flake, nix/, configs/, patches/, .flox/)",
        description="Write a checkout of the installed version into DIR: flake.nix, nix/, "
        "configs/, patches/, .flox/ and the workbench's sources, as a git repository with every "
        "file tracked (a flake sees tracked files only). Commands run inside DIR use it; "
        "--default makes it the one used everywhere else too.",
    )
    parser.add_argument("directory", metavar="DIR", help="a new (or empty) directory")
    parser.add_argument(
        "--default",
        action="store_true",
        help="make it your default checkout (`checkout` in your per-user settings)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.cli.common import print_json
    from workbench.configs.checkout import write_checkout
    from workbench.configs.user_settings import write_user_settings

    written = write_checkout(Path(args.directory))
    settings_file = None
    if args.default:
        settings_file = write_user_settings({"checkout": str(written.directory)})
    if args.json:
        print_json(
            {
                "directory": str(written.directory),
                "files": written.files,
                "committed": written.committed,
                "default_in": str(settings_file) if settings_file else None,
            }
        )
        return 0
    print(f"wrote a checkout to {written.directory}: {written.files} files, {written.note}")
    if settings_file:
        print(f"made it your default checkout (checkout = ... in {settings_file})")
    print(f"next: cd {written.directory} && workbench doctor   (then `workbench build`)")
    return 0

"""`workbench flox sync [--check]`: the repository's Flox environment, from configs/."""

from __future__ import annotations

import argparse


def register(subcommands: argparse._SubParsersAction) -> None:
    parser = subcommands.add_parser(
        "flox",
        help="the Flox environment (.flox/) generated from configs/",
        description="One .flox/pkgs/NAME.nix per variant and flavour the flake offers, each a "
        "thin call into nix/ that builds what `nix build .#NAME` builds; `flox build NAME` "
        "and `flox publish NAME` work in the checkout.",
    )
    actions = parser.add_subparsers(dest="flox_action", metavar="ACTION", required=True)
    sync = actions.add_parser("sync", help="write .flox/ from configs/ (generated files only)")
    sync.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if .flox/ is out of date"
    )
    sync.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.cli.common import load_config, print_json
    from workbench.flox.sync import sync
    from workbench.supervision.launch import default_flake_directory

    directory, matrix = load_config(args)
    checkout = default_flake_directory(directory)
    result = sync(checkout, matrix, check_only=args.check)
    if args.json:
        print_json(
            {
                "checkout": str(checkout),
                "check": args.check,
                "in_sync": result.in_sync,
                "written": list(result.written),
                "removed": list(result.removed),
                "unchanged": result.unchanged,
                "skipped": [{"name": n, "why": w} for n, w in result.skipped],
            }
        )
    else:
        verb = "would write" if args.check else "wrote"
        for relative in result.written:
            print(f"{verb} {relative}")
        for relative in result.removed:
            print(f"{'would remove' if args.check else 'removed'} {relative}")
        if result.skipped:
            print(
                f"skipped {len(result.skipped)} variants the flake does not offer: "
                f"{result.skipped[0][1]}"
            )
        state = "in sync" if result.in_sync else ("out of date" if args.check else "synced")
        print(
            f".flox/ {state}: {result.unchanged} unchanged, {len(result.written)} "
            f"{'to write' if args.check else 'written'}, {len(result.removed)} "
            f"{'to remove' if args.check else 'removed'} in {checkout}"
        )
        if args.check and not result.in_sync:
            print("run `workbench flox sync` (and `git add .flox`: Flox sees tracked files only)")
    return 1 if args.check and not result.in_sync else 0

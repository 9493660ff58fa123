"""`workbench flox sync [--check]`: the repository's Flox environment, from configs/."""

from __future__ import annotations

import argparse


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    sync.add_argument(
        "--ort",
        metavar="VERSION",
        help="also write the packages of this ONNX Runtime release (default: settings.toml's "
        "ort_version; the pin's own are always written)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.cli.common import load_config, print_json
    from workbench.configs.releases import UnknownReleaseError
    from workbench.configs.settings import load_settings
    from workbench.errors import WorkbenchError
    from workbench.flox.sync import sync
    from workbench.planning.launch import default_flake_directory

    directory, matrix = load_config(args)
    checkout = default_flake_directory(directory)
    ort = args.ort or load_settings(directory, matrix).ort_version
    try:
        matrix.release(ort)
    except UnknownReleaseError as error:
        raise WorkbenchError(str(error)) from None
    result = sync(checkout, matrix, check_only=args.check, ort=ort)
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
        reasons: dict[str, int] = {}
        for _, why in result.skipped:
            reasons[why.split(":")[0]] = reasons.get(why.split(":")[0], 0) + 1
        for _, why in dict((w.split(":")[0], (n, w)) for n, w in result.skipped).values():
            count = reasons[why.split(":")[0]]
            print(f"skipped {count} packages the flake does not offer: {why}")
        state = "in sync" if result.in_sync else ("out of date" if args.check else "synced")
        print(
            f".flox/ {state}: {result.unchanged} unchanged, {len(result.written)} "
            f"{'to write' if args.check else 'written'}, {len(result.removed)} "
            f"{'to remove' if args.check else 'removed'} in {checkout}"
        )
        if args.check and not result.in_sync:
            again = f" --ort {args.ort}" if args.ort else ""
            print(
                f"run `workbench flox sync{again}` (and `git add .flox`: Flox sees tracked files "
                "only)"
            )
    return 1 if args.check and not result.in_sync else 0

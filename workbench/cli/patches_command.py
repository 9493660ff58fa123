"""`workbench patches list|show|enable|disable|check|new`: the patch series in patches/."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.configs.matrix import Matrix


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "patches",
        help="the patch series (patches/series.toml): list, toggle, check, make new ones",
        description="The patch series the flake applies, in order. Edits keep series.toml's "
        "comments and are written atomically; a failed command changes nothing.",
    )
    actions = parser.add_subparsers(dest="patches_action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="every patch: group, status, what it fixes")
    listing.add_argument(
        "--for",
        dest="target",
        metavar="PACKAGE",
        help="only those applied to this variant or flavour",
    )
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    show = actions.add_parser("show", help="print one patch's diff")
    show.add_argument("name")
    for verb in ("enable", "disable"):
        toggle = actions.add_parser(verb, help=f"{verb} a patch (series.toml's `enabled`)")
        toggle.add_argument("name")
    check = actions.add_parser(
        "check",
        help="apply the series to a copy of a source tree; report per patch and hunk",
        description="Applies the patches in series order to a scratch copy of the files they "
        "touch (the tree itself is never changed) and says, per patch and hunk, what applies, "
        "what is already applied, and what fails and why. Exit status 1 if any patch does "
        "not apply cleanly.",
    )
    check.add_argument("--source", required=True, metavar="DIR", help="the source tree")
    check.add_argument(
        "--for",
        dest="target",
        metavar="PACKAGE",
        help="the patches this variant or flavour gets (default: every enabled)",
    )
    check.add_argument("--all", action="store_true", help="disabled patches too")
    check.add_argument(
        "--ort",
        metavar="VERSION",
        help="the patches for this ONNX Runtime release (series `releases`), against its source: "
        "DIR's VERSION_NUMBER must say VERSION",
    )
    check.add_argument("--json", action="store_true", help="machine-readable output")
    new = actions.add_parser(
        "new",
        help="turn a working copy's changes into patches/NAME.patch plus a series entry",
    )
    new.add_argument("name", help="lower-case letters, digits, '.', '_', '-'")
    new.add_argument(
        "--from",
        dest="source",
        metavar="DIR",
        default=".",
        help="the git working copy (an iterate workspace; default: here)",
    )
    new.add_argument("--group", default="local", help="static-init, bridge-loop, ... (local)")
    new.add_argument("--fixes", required=True, help="what the patch fixes, in a sentence")
    new.add_argument(
        "--flavour",
        action="append",
        default=[],
        metavar="NAME",
        help="a linkage flavour it applies to (repeatable)",
    )
    new.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="PATTERN",
        help="variant names it applies to, '*' as wildcard (repeatable)",
    )
    new.add_argument("--disabled", action="store_true", help="add it switched off")
    imported = actions.add_parser(
        "import",
        help="bring another checkout's patch files into the series, checked first",
        description="Takes DIR's *.patch files (such as the builder flake's patches/): a file "
        "the series already lists fills that entry, any other becomes a new entry for the "
        "flavours given. Each is checked against the pinned ORT tree (--source) in series "
        "order; the files and series entries are then written together, or nothing is (exit 1).",
    )
    imported.add_argument("directory", metavar="DIR", help="a folder of .patch files")
    imported.add_argument(
        "--source", required=True, metavar="DIR", help="the pinned ONNX Runtime source tree"
    )
    imported.add_argument(
        "--flavour",
        action="append",
        default=[],
        metavar="NAME",
        help="flavour(s) new entries apply to (default: cuda-static)",
    )
    imported.add_argument("--group", default="local", help="new entries' group (local)")
    imported.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from workbench.cli.common import load_config

    config, matrix = load_config(args)
    handler = {
        "list": _list,
        "show": _show,
        "enable": _toggle,
        "disable": _toggle,
        "check": _check,
        "new": _new,
        "import": _import,
    }[args.patches_action]
    return handler(args, config, matrix)


def _list(args: argparse.Namespace, config: Path, matrix: Matrix) -> int:
    from workbench.cli.common import print_json
    from workbench.patches.series import load_series, target_name

    series = load_series(config, matrix)
    patches = list(series.patches)
    if args.target:
        target = target_name(matrix, args.target)
        patches = series.for_target(target)
    if args.json:
        print_json(
            {
                "file": str(series.path),
                "patches": [
                    {
                        "position": series.patches.index(p) + 1,
                        "name": p.name,
                        "file": p.file,
                        "present": series.file_of(p).is_file(),
                        "group": p.group,
                        "fixes": p.fixes,
                        "flavours": list(p.flavours),
                        "variants": list(p.variants),
                        "enabled": p.enabled,
                    }
                    for p in patches
                ],
            }
        )
        return 0
    # Plain lines, not a table: readable at 80 columns however long a name or sentence is.
    count = f"{len(series.patches)} {'patch' if len(series.patches) == 1 else 'patches'}"
    if args.target:
        print(f"{series.path}: {len(patches)} of its {count} apply to {target}, in this order")
        if not patches:
            print(f"  none: no patch names {target}'s flavour or matches its name")
    else:
        print(f"{series.path}: {count}, applied in this order")
    width = max((len(p.name) for p in patches), default=0)
    group_width = max((len(p.group) for p in patches), default=0)
    for patch in patches:
        position = series.patches.index(patch) + 1
        applies = ", ".join([*patch.flavours, *patch.variants]) or "nothing"
        state = "on " if patch.enabled else "off"
        name, group = f"{patch.name:<{width}}", f"{patch.group:<{group_width}}"
        print(f"{position:>3} {state} {name}  {group}  {applies}")
        print(f"        {patch.fixes}")
        if not series.file_of(patch).is_file():
            print(f"        file missing: {series.file_of(patch)}")
    return 0


def _show(args: argparse.Namespace, config: Path, matrix: Matrix) -> int:
    from workbench.errors import PatchError
    from workbench.patches.series import load_series

    series = load_series(config, matrix)
    file = series.file_of(series.get(args.name))
    if not file.is_file():
        raise PatchError(f"{file}: the file of patch {args.name!r} does not exist")
    print(file.read_text(errors="replace"), end="")
    return 0


def _toggle(args: argparse.Namespace, config: Path, matrix: Matrix) -> int:
    from workbench.patches.series import set_enabled

    enabled = args.patches_action == "enable"
    series = set_enabled(config, args.name, enabled, matrix)
    print(f"{args.name}: {'enabled' if enabled else 'disabled'}  (written to {series.path})")
    return 0


def _check(args: argparse.Namespace, config: Path, matrix: Matrix) -> int:
    from workbench.cli.common import print_json
    from workbench.patches.checking import check_series, render_check
    from workbench.patches.series import load_series, target_name

    series = load_series(config, matrix)
    source = Path(args.source).expanduser()
    if args.target:
        target = target_name(matrix, args.target)
        chosen = [p for p in series.for_target(target) if p.enabled or args.all]
    else:
        chosen = [p for p in series.patches if p.enabled or args.all]
    left_out = []
    if args.ort:
        version = _release_of_source(matrix, args.ort, source)
        left_out = [p for p in chosen if not p.for_release(version)]
        chosen = [p for p in chosen if p.for_release(version)]
    result = check_series(series, chosen, source)
    if args.json:
        document = result.to_json()
        if args.ort:
            document["ort_version"] = args.ort
            document["not_for_release"] = [
                {"name": p.name, "releases": list(p.releases or ())} for p in left_out
            ]
        print_json(document)
    else:
        print(render_check(result))
        for patch in left_out:
            print(
                f"  {patch.name}: not for ONNX Runtime {args.ort} (series: releases = "
                f"{', '.join(patch.releases or ())}); a build of {args.ort} goes without it"
            )
    return 0 if result.ok else 1


def _release_of_source(matrix: Matrix, version: str, source: Path) -> str:
    """`version`, an offered release, checked against the ORT tree's VERSION_NUMBER."""
    from workbench.configs.releases import UnknownReleaseError
    from workbench.errors import WorkbenchError

    try:
        release = matrix.release(version)
    except UnknownReleaseError as error:
        raise WorkbenchError(str(error)) from None
    number = source / "VERSION_NUMBER"
    if not number.is_file():
        raise WorkbenchError(
            f"{source}: no VERSION_NUMBER file, so not an ONNX Runtime source tree whose release "
            f"can be checked (--ort {version} needs the tree of {release.tag or version})"
        )
    found = number.read_text(errors="replace").strip()
    if found != release.version:
        raise WorkbenchError(
            f"{number}: the tree is ONNX Runtime {found}, not {release.version}; check out "
            f"{release.tag or 'v' + release.version} (or give --ort {found})"
        )
    return release.version


def _new(args: argparse.Namespace, config: Path, matrix: Matrix) -> int:
    from workbench.patches.creating import new_patch
    from workbench.patches.series import load_series

    patch = new_patch(
        config,
        matrix,
        args.name,
        Path(args.source).expanduser(),
        group=args.group,
        fixes=args.fixes,
        flavours=tuple(args.flavour),
        variants=tuple(args.variant),
        enabled=not args.disabled,
    )
    series = load_series(config, matrix)
    print(
        f"{series.file_of(patch)}: written; {patch.name} is patch "
        f"{series.patches.index(patch) + 1} of {len(series.patches)} in {series.path}"
        f" ({'enabled' if patch.enabled else 'disabled'})"
    )
    return 0


def _import(args: argparse.Namespace, config: Path, matrix: Matrix) -> int:
    from workbench.cli.common import print_json
    from workbench.patches.importing import import_patches
    from workbench.progress.visible import visible

    result = import_patches(
        config,
        matrix,
        Path(args.directory).expanduser(),
        Path(args.source).expanduser(),
        tuple(args.flavour) or ("cuda-static",),
        args.group,
    )
    if args.json:
        print_json(result.to_json())
        return 0 if result.written else 1
    width = max(len(p.name) for p in result.patches)
    for patch in result.patches:
        kind = "new entry" if patch.new_entry else "fills its entry"
        detail = f": {visible(patch.detail)}" if patch.detail else ""
        print(f"  {patch.name:<{width}}  {patch.status} ({kind}){detail}")
    if result.written:
        print(f"Imported {len(result.patches)} patches into the series.")
        return 0
    print("Nothing written: every patch must apply for any to be imported.")
    return 1

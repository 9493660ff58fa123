"""`workbench variants`: every variant and linkage flavour of the matrix."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.configs.matrix import Matrix
    from workbench.configs.releases import Release
    from workbench.configs.variants import Variant


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subcommands.add_parser(
        "variants",
        help="list the variant matrix and linkage flavours",
        description="List every variant of configs/matrix.toml and the builder flake's "
        "linkage flavours.",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--names", action="store_true", help="variant names only, one per line")
    parser.add_argument(
        "--match", metavar="TEXT", help="only variants whose name contains every word of TEXT"
    )
    parser.add_argument(
        "--ort",
        metavar="VERSION",
        help="the variants of this ONNX Runtime release (default: settings.toml's ort_version)",
    )
    parser.add_argument(
        "--releases",
        action="store_true",
        help="the ONNX Runtime releases of configs/releases.toml: offered or not, and why",
    )
    parser.set_defaults(handler=run)


def _all_releases(matrix: Matrix) -> tuple[Release, ...]:
    """configs/releases.toml's releases (load_matrix reads them; a Matrix made without them
    has the pin's own release alone)."""
    return matrix.releases.all if matrix.releases is not None else (matrix.release(),)


def _release_rows(matrix: Matrix) -> list[dict[str, Any]]:
    return [release.to_json() for release in _all_releases(matrix)]


def print_releases(matrix: Matrix, chosen: str) -> None:
    """The releases table: version, offered, source, pins and fixes, and why."""
    from rich.console import Console
    from rich.table import Table

    piped = not sys.stdout.isatty()
    console = Console(highlight=False, width=200 if piped else None, soft_wrap=piped)
    table = Table(
        title="ONNX Runtime releases", title_justify="left", box=None, header_style="bold"
    )
    for column in ("release", "offered", "source", "bundled (FETCHCONTENT_SOURCE_DIR_*)", "fixes"):
        table.add_column(column)
    for release in _all_releases(matrix):
        mark = " *" if release.version == chosen else ""
        source = "nixpkgs' own" if release.nixpkgs_own else f"{release.tag} ({release.flox_branch})"
        deps = ", ".join(f"{d.fetchcontent} {d.tag or (d.rev or '')[:8]}" for d in release.deps)
        table.add_row(
            release.version + mark,
            "yes" if release.offered else "no",
            source,
            deps or "-",
            ", ".join(f.name for f in release.fixes) or "-",
        )
    console.print(table)
    console.print("* the release builds are of (settings.toml ort_version, or --ort)")
    for release in _all_releases(matrix):
        limits = [release.why]
        if release.unsupported_sms:
            sms = ", ".join(release.unsupported_sms)
            limits.append(f"not {sms}: {release.unsupported_sms_why}")
        if release.flavours_not_offered:
            limits.append(
                f"not as {', '.join(release.flavours_not_offered)}: {release.flavours_why}"
            )
        console.print(f"{release.version}: " + "; ".join(limits))


def variant_to_json(variant: Variant, matrix: Matrix) -> dict[str, Any]:
    """One variant in `variants --json` form."""
    from workbench.planning.availability import of_variant

    at_pin = of_variant(variant, matrix)
    return {
        "name": variant.name,
        "kind": "gpu" if variant.is_gpu else "cpu",
        "onnxruntime": variant.ort_version,
        "python": variant.python,
        "cuda": variant.toolkit.version if variant.toolkit else None,
        "min_driver": variant.toolkit.min_driver if variant.toolkit else None,
        "sm": variant.sm.name if variant.sm else None,
        "cmake_cuda_architectures": variant.cmake_cuda_architectures,
        "gpus": list(variant.sm.gpus) if variant.sm else [],
        "isa": variant.isa.name,
        "isa_flags": list(variant.isa.flags),
        "platform": variant.platform,
        "description": variant.description,
        "caveat": variant.caveat,
        "evaluates_at_pin": at_pin.evaluates,
        "unavailable": at_pin.reason,
        "instead": at_pin.instead,
    }


def run(args: argparse.Namespace) -> int:
    from workbench.cli.common import load_config, print_json
    from workbench.configs.releases import UnknownReleaseError
    from workbench.configs.settings import load_settings
    from workbench.configs.variants import expand

    config, matrix = load_config(args)
    chosen = args.ort or load_settings(config, matrix).ort_version
    try:
        release = matrix.release(chosen)
    except UnknownReleaseError as error:
        from workbench.errors import WorkbenchError

        raise WorkbenchError(str(error)) from None
    if args.releases:
        if args.json:
            print_json({"releases": _release_rows(matrix), "ort_version": release.version})
        else:
            print_releases(matrix, release.version)
        return 0
    words = (args.match or "").lower().split()
    variants = [v for v in expand(matrix, release.version) if all(word in v.name for word in words)]
    if words and not variants:
        # Like grep: nothing matched is exit 1 and no tables (they would read as an answer).
        print(f"workbench: no variant name contains all of: {' '.join(words)}", file=sys.stderr)
        return 1
    if args.json:
        from workbench.patches.series import load_series

        series = load_series(config, matrix)
        from workbench.planning.availability import toolkit_offers

        print_json(
            {
                "ort_version": release.version,
                "release": release.to_json(),
                "toolkits": [offer.to_json() for offer in toolkit_offers(matrix)],
                "variants": [variant_to_json(v, matrix) for v in variants],
                "flavours": [
                    {
                        "name": f.name + release.suffix,
                        "attr": f.attr + release.suffix,
                        "unavailable": release.flavour_problem(f.name),
                        "description": f.description,
                        "cuda": f.cuda,
                        "shared": f.shared,
                        "experimental": f.experimental,
                        "patches": [p.name for p in series.applied_to(f.name, release.version)],
                        "defines": list(f.defines),
                    }
                    for f in matrix.flavours
                ],
            }
        )
        return 0
    if args.names:
        for variant in variants:
            print(variant.name)
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # Piped (not a terminal), Rich would wrap at 80 columns: a name must stay on its line.
    piped = not sys.stdout.isatty()
    console = Console(highlight=False, width=200 if piped else None, soft_wrap=piped)
    source = (
        "nixpkgs' own, no override"
        if release.nixpkgs_own
        else f"source override {release.tag}; names end {release.suffix}"
    )
    table = Table(
        title=f"ONNX Runtime {release.version} ({source}): {len(variants)} variants",
        title_justify="left",
        box=None,
        header_style="bold",
    )
    table.add_column("variant", no_wrap=True)
    table.add_column("min driver", no_wrap=True)
    table.add_column("", no_wrap=True)
    from workbench.planning.availability import unavailable_reason

    gone = [v for v in variants if unavailable_reason(v, matrix)]
    for v in variants:
        mark = "[red]✗[/]" if v in gone else "[yellow]![/]" if v.caveat else ""
        table.add_row(v.name, v.toolkit.min_driver if v.toolkit else "-", mark)
    console.print(table)
    reasons: dict[str, list[Variant]] = {}
    for v in gone:
        reasons.setdefault(unavailable_reason(v, matrix) or "", []).append(v)
    for reason, these in reasons.items():
        first = these[0]
        toolkit = first.toolkit
        # load_matrix refuses a toolkit missing at the pin without an `instead`.
        if toolkit is not None and not toolkit.at_pin and toolkit.instead is not None:
            instead = matrix.toolkit(toolkit.instead)
            console.print(
                f"✗ not offered by the flake ({len(these)}): {reason}; build the {instead.name} "
                f"variant of the same SM and ISA instead (driver ≥ {instead.min_driver})"
            )
        else:
            console.print(f"✗ not offered by the flake ({len(these)}): {reason}")
    from workbench.planning.availability import toolkit_offers

    for offer in toolkit_offers(matrix):
        mark = "[green]✓[/]" if offer.offered else "[red]✗[/]"
        console.print(f"{mark} toolkit {escape(offer.line())}")
    caveat = next((v.caveat for v in variants if v.caveat and v not in gone), None)
    if caveat:
        console.print(f"! cannot build as named: {caveat}")
    guide = Table(
        title="\nwhich SM for which GPU", title_justify="left", box=None, header_style="bold"
    )
    for column in ("SM", "capability", "family", "GPUs"):
        guide.add_column(column)
    for sm in matrix.sms:
        guide.add_row(sm.name, sm.capability, sm.family, ", ".join(sm.gpus))
    console.print(guide)
    flavours = Table(
        title="\nlinkage flavours", title_justify="left", box=None, header_style="bold"
    )
    for column in ("flavour", "flake package", "description"):
        flavours.add_column(column)
    for f in matrix.flavours:
        problem = release.flavour_problem(f.name)
        flavours.add_row(
            f.name + release.suffix,
            f".#{f.attr}{release.suffix}",
            f"✗ {problem}" if problem else f.description,
        )
    console.print(flavours)
    return 0

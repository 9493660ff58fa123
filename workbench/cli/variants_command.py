"""`workbench variants`: every variant and linkage flavour of the matrix."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subcommands: argparse._SubParsersAction) -> None:
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
    parser.set_defaults(handler=run)


def variant_to_json(variant: Any, matrix: Any) -> dict[str, Any]:
    """One variant in `variants --json` form."""
    from workbench.configs.availability import of_variant

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
    from workbench.configs.variants import expand

    config, matrix = load_config(args)
    words = (args.match or "").lower().split()
    variants = [v for v in expand(matrix) if all(word in v.name for word in words)]
    if words and not variants:
        # Like grep: nothing matched is exit 1 and no tables (they would read as an answer).
        print(f"workbench: no variant name contains all of: {' '.join(words)}", file=sys.stderr)
        return 1
    if args.json:
        from workbench.patches.series import load_series

        series = load_series(config, matrix)
        print_json(
            {
                "variants": [variant_to_json(v, matrix) for v in variants],
                "flavours": [
                    {
                        "name": f.name,
                        "attr": f.attr,
                        "description": f.description,
                        "cuda": f.cuda,
                        "shared": f.shared,
                        "experimental": f.experimental,
                        "patches": [p.name for p in series.applied_to(f.name)],
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
    from rich.table import Table

    # Piped (not a terminal), Rich would wrap at 80 columns: a name must stay on its line.
    piped = not sys.stdout.isatty()
    console = Console(highlight=False, width=200 if piped else None, soft_wrap=piped)
    table = Table(
        title=f"ONNX Runtime {matrix.ort_version}: {len(variants)} variants",
        title_justify="left",
        box=None,
        header_style="bold",
    )
    table.add_column("variant", no_wrap=True)
    table.add_column("min driver", no_wrap=True)
    table.add_column("", no_wrap=True)
    from workbench.configs.availability import of_variant, unavailable_reason

    gone = [v for v in variants if unavailable_reason(v, matrix)]
    for v in variants:
        mark = "[red]✗[/]" if v in gone else "[yellow]![/]" if v.caveat else ""
        table.add_row(v.name, v.toolkit.min_driver if v.toolkit else "-", mark)
    console.print(table)
    if gone:
        reason = of_variant(gone[0], matrix).reason
        instead = matrix.toolkit(gone[0].toolkit.instead)
        console.print(
            f"✗ not offered by the flake ({len(gone)}): {reason}; build the {instead.name} "
            f"variant of the same SM and ISA instead (driver ≥ {instead.min_driver})"
        )
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
        flavours.add_row(f.name, f".#{f.attr}", f.description)
    console.print(flavours)
    return 0

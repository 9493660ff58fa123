"""`workbench env FLAVOUR` and `workbench layout FLAVOUR`: a built flavour as a consumer sees it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.configs.matrix import Flavour


def register(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = subcommands.add_parser(
        "env",
        help="the environment a Rust/C++ consumer sets for a built flavour",
        description="Print `export` lines (ORT_LIB_LOCATION or ORT_DYLIB_PATH, PKG_CONFIG_PATH, "
        'and LD_LIBRARY_PATH for cuDNN) for a built flavour: eval "$(workbench env cuda-hybrid)".',
    )
    layout = subcommands.add_parser(
        "layout",
        help="check that a built flavour holds every file its layout promises",
        description="Check a built flavour's output against configs/flavours.toml's `produces` "
        "(and, for cuda-hybrid, that the static core's runtime path is the output's lib/).",
    )
    for parser in (env, layout):
        parser.add_argument("flavour", help="cpu, cuda-hybrid, cuda-dyn, cuda-static (or the attr)")
        parser.add_argument(
            "--result",
            metavar="PATH",
            help="the built output (default: the checkout's result-ATTR or result-FLAVOUR, "
            "else result if it is a build of this flavour)",
        )
        parser.add_argument("--json", action="store_true", help="print JSON")
    env.set_defaults(handler=run_env)
    layout.set_defaults(handler=run_layout)


def _built(args: argparse.Namespace) -> tuple[Flavour, Path]:
    from workbench.artefacts.layout import find_flavour_result
    from workbench.cli.common import load_config
    from workbench.errors import WorkbenchError
    from workbench.planning.launch import default_flake_directory
    from workbench.progress.visible import visible

    directory, matrix = load_config(args)
    try:
        flavour = matrix.flavour(args.flavour)
    except KeyError:
        names = ", ".join(f.name for f in matrix.flavours)
        raise WorkbenchError(
            f"{args.flavour!r} is not a linkage flavour ({names}); a variant is a Python "
            "package: `workbench smoke NAME` runs it"
        ) from None
    if args.result:
        output = Path(args.result).expanduser()
    else:
        checkout = default_flake_directory(directory)
        found = find_flavour_result(checkout, flavour)
        if found.link is None:
            raise WorkbenchError(
                f"{visible(found.note or '')}: build it first "
                f"(`workbench build {flavour.name}`), or name it with --result PATH"
            )
        if found.note:
            print(f"workbench: note: {visible(found.note)}", file=sys.stderr)
        output = found.link
    if not output.exists():
        raise WorkbenchError(f"{output}: does not exist (--result names the built output)")
    return flavour, output


def run_env(args: argparse.Namespace) -> int:
    from workbench.artefacts.consumer_env import as_shell, consumer_environment
    from workbench.cli.common import print_json

    flavour, output = _built(args)
    environment = consumer_environment(output, flavour)
    if args.json:
        print_json({"flavour": flavour.name, "output": str(output.resolve()), "env": environment})
    else:
        print(as_shell(environment))
    return 0


def run_layout(args: argparse.Namespace) -> int:
    from workbench.artefacts.layout import check_layout
    from workbench.cli.common import print_json
    from workbench.progress.visible import visible

    flavour, output = _built(args)
    problems = check_layout(output, flavour)
    if args.json:
        print_json({"flavour": flavour.name, "output": str(output.resolve()), "problems": problems})
    elif problems:
        for problem in problems:
            print(f"✗ {visible(problem)}")
    else:
        print(f"✓ {flavour.name}: {len(flavour.produces)} promised files in {output.resolve()}")
    return 1 if problems else 0

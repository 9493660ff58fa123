"""What every command needs: the config directory and the matrix it holds, and JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.paths import config_dir

if TYPE_CHECKING:
    from workbench.configs.matrix import Matrix


def load_config(args: argparse.Namespace) -> tuple[Path, Matrix]:
    """The config directory chosen by --config / $WORKBENCH_CONFIG / the repo, and its matrix."""
    # Here, not at the top: `bt` prints JSON through this module and races plain gdb.
    from workbench.configs.matrix import load_matrix

    directory = config_dir(args.config)
    return directory, load_matrix(directory)


def print_json(document: Any) -> None:
    """Stable JSON on stdout, as the README promises for every `--json`: sorted keys at every
    level, two-space indent."""
    json.dump(document, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")

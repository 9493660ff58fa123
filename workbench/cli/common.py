"""What every command needs: the config directory and the matrix it holds, and JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from workbench.configs.matrix import Matrix, load_matrix
from workbench.paths import config_dir


def load_config(args: argparse.Namespace) -> tuple[Path, Matrix]:
    """The config directory chosen by --config / $WORKBENCH_CONFIG / the repo, and its matrix."""
    directory = config_dir(args.config)
    return directory, load_matrix(directory)


def print_json(document: Any) -> None:
    """Stable JSON on stdout: sorted keys, two-space indent."""
    json.dump(document, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")

"""What every command needs: the config directory and the matrix it holds, and JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.configs.paths import config_dir

if TYPE_CHECKING:
    from workbench.configs.matrix import Matrix


def load_config(args: argparse.Namespace) -> tuple[Path, Matrix]:
    """The config directory chosen by --config / $WORKBENCH_CONFIG / the repo, and its matrix."""
    # Here, not at the top: `bt` prints JSON through this module and races plain gdb.
    from workbench.configs.matrix import load_matrix

    directory = config_dir(args.config)
    return directory, load_matrix(directory)


# The command whose `--json` is being printed ("doctor", "patches-check"), set by cli.main:
# every document gets `"schema": "workbench-NAME/1"` unless it names its own (the README's "JSON
# output" lists them). The number goes up when a field changes meaning or goes away.
json_command: str | None = None
SCHEMA_VERSION = 1


def schema_name(command: str) -> str:
    """The versioned schema of a command's --json document."""
    return f"workbench-{command}/{SCHEMA_VERSION}"


def print_json(document: Any) -> None:
    """Stable JSON on stdout, as the README promises for every `--json`: sorted keys at every
    level, two-space indent, and a versioned `schema` field."""
    if isinstance(document, dict) and "schema" not in document and json_command:
        document = {**document, "schema": schema_name(json_command)}
    json.dump(document, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")

"""Hatchling build hook: the wheel and the sdist carry the git commit they were built from
(workbench/_commit.txt, read by `workbench --version`), when they are built from a git checkout.

Built from an sdist, the wheel takes the sdist's file as it is; built where there is no git
checkout (Nix copies the sources without .git), there is none and `--version` says so. Editable
installs carry none: they ask git at run time (workbench/version.py).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

COMMIT_FILE = "workbench/_commit.txt"


def _commit(root: str) -> str | None:
    try:
        head = subprocess.run(
            ["git", "-C", root, "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}{' (modified)' if status else ''}" if head else None


class CommitHook(BuildHookInterface):
    """Adds workbench/_commit.txt when the sources are a git checkout."""

    def initialize(self, version: str, build_data: dict) -> None:
        if version == "editable" or (Path(self.root) / COMMIT_FILE).is_file():
            return
        if not (Path(self.root) / ".git").exists():
            return
        commit = _commit(self.root)
        if commit is None:
            return
        handle = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)  # noqa: SIM115
        with handle:
            handle.write(commit + "\n")
        build_data["force_include"][handle.name] = COMMIT_FILE

"""`workbench --version`: the release and the git commit the running code came from.

Installed from a wheel or sdist built in a git checkout, the commit is the one hatch_build.py
wrote into workbench/_commit.txt at build time. Run from a checkout (scripts/run.sh, an
editable install), it is asked of git, with "(modified)" when tracked files differ from it.
Elsewhere (a Nix build, which copies the sources without .git) it says the commit is unknown.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from workbench import __version__


def commit() -> str | None:
    """The full commit id (with " (modified)" when so), or None when it cannot be known."""
    package = Path(__file__).resolve().parent
    recorded = package / "_commit.txt"
    if recorded.is_file():
        return recorded.read_text().strip() or None
    root = package.parent
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}{' (modified)' if dirty else ''}" if head else None


def version_line() -> str:
    """`workbench 0.1.0 (commit 21b60bd6..., modified)` or `... (commit unknown: ...)`."""
    found = commit()
    if found is None:
        return f"workbench {__version__} (commit unknown: not built from a git checkout)"
    head, _, rest = found.partition(" ")
    return f"workbench {__version__} (commit {head[:12]}{', modified' if rest else ''})"

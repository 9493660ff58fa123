"""`workbench init DIR`: a checkout of one's own from the installed version.

A checkout is what the flake needs to build: flake.nix, nix/, configs/, patches/, .flox/ and
the package's sources (the flake's `workbench` package is built from them), as a git repository
with every file tracked, since a flake sees tracked files only.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workbench.configs.paths import CHECKOUT_FILES, packaged_data
from workbench.errors import WorkbenchError

_GITIGNORE = "result\nresult-*\n.venv/\n__pycache__/\n*.pyc\n"


@dataclass(frozen=True)
class Written:
    """What `write_checkout` made."""

    directory: Path
    files: int
    committed: bool
    note: str  # how the files are tracked, in words


def _ignored(directory: str, names: list[str]) -> set[str]:
    return {name for name in names if name in ("__pycache__", "_data") or name.endswith(".pyc")}


def write_checkout(target: Path) -> Written:
    """Write a checkout into `target` (which must not exist, or be an empty directory) from the
    installed version, then `git init` it and track every file."""
    git = shutil.which("git")
    if git is None:
        raise WorkbenchError(
            "git is not installed: a flake sees only the files git tracks, so `workbench init` "
            "makes a git repository (install git, then run it again)"
        )
    target = target.expanduser().resolve()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise WorkbenchError(
            f"{target}: exists and is not an empty directory; allowed: a new directory "
            "(`workbench init` never writes over files)"
        )
    source = packaged_data()
    missing = [name for name in CHECKOUT_FILES if not (source / name).exists()]
    if missing:
        raise WorkbenchError(
            f"{source}: this installation lacks {', '.join(missing)}; reinstall ort-workbench "
            "from its wheel or sdist"
        )
    target.mkdir(parents=True, exist_ok=True)
    for name in CHECKOUT_FILES:
        path = source / name
        if path.is_dir():
            shutil.copytree(path, target / name, ignore=_ignored)
        else:
            shutil.copy2(path, target / name)
    package = Path(__file__).resolve().parents[1]  # workbench/configs/checkout.py
    shutil.copytree(package, target / "workbench", ignore=_ignored)
    (target / ".gitignore").write_text(_GITIGNORE)
    for path in target.rglob("*"):  # copies of a read-only installation stay editable
        path.chmod(path.stat().st_mode | 0o200)

    def git_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [git, "-C", str(target), *args], capture_output=True, text=True, check=False
        )

    for args in (("init", "-q"), ("add", "-A")):
        result = git_run(*args)
        if result.returncode != 0:
            raise WorkbenchError(f"{target}: git {args[0]} failed: {result.stderr.strip()}")
    from workbench import __version__

    committed = git_run("commit", "-q", "-m", f"workbench init from ort-workbench {__version__}")
    files = len(git_run("ls-files").stdout.splitlines())
    if committed.returncode == 0:
        note = "committed"
    else:
        note = "tracked (staged, not committed: git has no user.name/user.email here)"
    return Written(target, files, committed.returncode == 0, note)

"""Where a workspace's pristine source comes from: a directory (`--source DIR`) or the flake.

A directory that is a git working tree contributes the files git knows (tracked, and untracked
ones it does not ignore), as they are in the working tree; any other directory is copied whole.
Either way its .git stays behind: the workspace starts its own history with the copy as the
first commit. On a Nix host without --source, the flake's own `src` of the package is built
(`nix build --no-link --json .#ATTR.src`: fetched, or taken from the store) and copied.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.supervision.launch import Target

NIX_FEATURES = "nix-command flakes"
Say = Callable[[str], None]


class SourceError(WorkbenchError):
    """The source tree cannot be found or copied; the message says what to pass instead."""


@dataclass(frozen=True)
class SourceTree:
    """A pristine source tree and how the workspace got it."""

    path: Path
    kind: str
    """"directory" (--source DIR) or "nix" (the flake's src)."""
    description: str
    """For the first commit's message and workspace.json: the directory, or the flake attr."""

    def to_json(self) -> dict[str, str]:
        return {"path": str(self.path), "kind": self.kind, "description": self.description}


def from_directory(directory: Path) -> SourceTree:
    """`--source DIR`, checked: it must be a directory."""
    resolved = directory.expanduser().resolve()
    if not resolved.is_dir():
        raise SourceError(
            f"--source {directory}: not a directory; give the ONNX Runtime source tree "
            "(a git clone or an unpacked release)"
        )
    return SourceTree(resolved, "directory", str(resolved))


def source_attr(target: Target) -> str:
    """The flake attribute of the package's source: a variant's C++ package, or the flavour."""
    if target.variant is not None:
        return f"{target.attr}.cpp.src"
    return f"{target.attr}.src"


def from_flake(flake: Path, attr: str, say: Say) -> SourceTree:
    """The flake's `src` of a package, built (fetched) with Nix; SourceError without Nix."""
    if shutil.which("nix") is None:
        raise SourceError(
            "no --source given and nix is not installed: pass the ONNX Runtime source tree "
            "with --source DIR (a git clone of github.com/microsoft/onnxruntime at the "
            "version configs/matrix.toml names), or run on a Nix host"
        )
    if not (flake / "flake.nix").is_file():
        raise SourceError(f"{flake}: no flake.nix there to take the source from; pass --source DIR")
    argv = [
        "nix",
        "--extra-experimental-features",
        NIX_FEATURES,
        "build",
        "--no-link",
        "--json",
        f".#{attr}",
    ]
    say(f"fetching the source with `{' '.join(argv)}` in {flake}")
    done = subprocess.run(argv, cwd=flake, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise SourceError(
            f"`nix build .#{attr}` failed in {flake} (exit {done.returncode}):\n{tail}\n"
            "pass the source tree with --source DIR instead"
        )
    try:
        outputs = json.loads(done.stdout)
        path = Path(outputs[0]["outputs"]["out"])
    except (ValueError, LookupError, TypeError):
        raise SourceError(
            f"`nix build --json .#{attr}` printed no output path ({done.stdout.strip()[:200]!r}); "
            "pass --source DIR"
        ) from None
    if not path.is_dir():
        raise SourceError(f".#{attr} built {path}, which is not a source directory")
    return SourceTree(path, "nix", f"{flake}#{attr}")


def _git_listed(directory: Path) -> list[str] | None:
    """The files of a git working tree (tracked, and untracked not ignored); None if not one."""
    if not (directory / ".git").exists():
        return None
    done = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=directory,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        return None
    names = [name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name]
    return list(dict.fromkeys(names))


def _writable(root: Path) -> None:
    """Owner-writable everywhere (a copy of the Nix store is read-only)."""
    for directory, subdirectories, files in os.walk(root):
        for name in [*subdirectories, *files]:
            path = os.path.join(directory, name)
            mode = os.lstat(path).st_mode
            if not stat.S_ISLNK(mode) and not mode & stat.S_IWUSR:
                os.chmod(path, stat.S_IMODE(mode) | stat.S_IWUSR)
    mode = os.stat(root).st_mode
    os.chmod(root, stat.S_IMODE(mode) | stat.S_IWUSR)


def copy_source(source: SourceTree, destination: Path) -> int:
    """Copy the tree into `destination` (which must not exist), without any .git; file count."""
    listed = _git_listed(source.path)
    if listed is None:
        shutil.copytree(
            source.path,
            destination,
            symlinks=True,
            ignore=shutil.ignore_patterns(".git"),
        )
        _writable(destination)
        return sum(len(files) for _, _, files in os.walk(destination))
    destination.mkdir(parents=True)
    copied = 0
    for name in listed:
        origin = source.path / name
        if name == ".git" or name.startswith(".git/") or "/.git/" in name:
            continue
        if not origin.is_symlink() and not origin.exists():
            continue  # deleted in the working tree
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_symlink():
            os.symlink(os.readlink(origin), target)
        elif origin.is_dir():  # a submodule or nested repository: copy it whole, minus .git
            shutil.copytree(origin, target, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        else:
            shutil.copy2(origin, target)
        copied += 1
    _writable(destination)
    return copied

"""Turning a working copy's changes into a patch file and a series entry (`patches new`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from workbench.configs.matrix import Matrix
from workbench.errors import PatchError
from workbench.patches.series import NewPatch, SeriesPatch, add_patch, validate_name


def _git(tree: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=tree,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if done.returncode != 0:
        raise PatchError(f"{tree}: git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def working_copy_root(directory: Path) -> Path:
    """The top of the git working copy holding `directory`, or a PatchError saying it is none."""
    if not directory.is_dir():
        raise PatchError(f"{directory}: no such directory (--from takes a git working copy)")
    done = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise PatchError(
            f"{directory}: not a git working copy; --from takes one, such as the iterate "
            "workspace `workbench iterate VARIANT` prepares"
        )
    return Path(done.stdout.strip())


def changes_as_patch(directory: Path) -> str:
    """Everything changed in the working copy since its last commit, new files included, as a
    `git diff` (paths a/... b/..., applied with -p1).

    A temporary index is used, so the working copy's own index and files are left untouched.
    """
    root = working_copy_root(directory)
    index = Path(_git(root, "rev-parse", "--git-path", "index").strip())
    index = index if index.is_absolute() else root / index
    with tempfile.TemporaryDirectory(prefix="workbench-new-patch-") as temporary:
        scratch_index = Path(temporary) / "index"
        if index.exists():
            shutil.copy2(index, scratch_index)
        env = {"GIT_INDEX_FILE": str(scratch_index)}
        _git(root, "add", "--all", ".", env=env)
        return _git(root, "diff", "--cached", "--no-color", "--no-ext-diff", "HEAD", env=env)


def new_patch(
    config_directory: Path,
    matrix: Matrix,
    name: str,
    directory: Path,
    group: str,
    fixes: str,
    flavours: tuple[str, ...] = (),
    variants: tuple[str, ...] = (),
    enabled: bool = True,
) -> SeriesPatch:
    """Write the changes in `directory`'s working copy as patches/NAME.patch and append its
    entry to series.toml (both or neither)."""
    validate_name(name)
    if not flavours and not variants:
        raise PatchError(
            f"patch {name!r} would apply to nothing: give --flavour (cpu, cuda-dyn, cuda-static) "
            "or --variant PATTERN ('*' for every variant)"
        )
    diff = changes_as_patch(directory)
    if not diff.strip():
        raise PatchError(
            f"{working_copy_root(directory)}: no changes since the last commit; edit the "
            "sources first (the series' own patches are commits already)"
        )
    new = NewPatch(name, group, fixes, tuple(flavours), tuple(variants), enabled)
    return add_patch(config_directory, new, diff, matrix)

"""Does a patch apply to a source tree? Per patch and per hunk, with the reason when it does not.

Every check runs on a scratch copy of just the files the patches touch, so the tree being
checked is never modified and nothing can be left half-applied. `git apply` (outside any
repository it acts as a strict `patch -p1`, no fuzz) decides what applies; unidiff splits a
patch into hunks so each can be tried alone, forwards (applies) and backwards (already applied).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unidiff import Hunk, PatchedFile, PatchSet
from unidiff.errors import UnidiffParseError

from workbench.errors import PatchError
from workbench.patches.series import Series, SeriesPatch

APPLIES = "applies"
ALREADY_APPLIED = "already applied"
FAILS = "fails"
FILE_MISSING = "file missing"
FILE_EXISTS = "file exists"
CONTEXT_CHANGED = "context changed"
PATCH_MISSING = "patch file missing"
UNREADABLE = "not a patch"


@dataclass(frozen=True)
class HunkCheck:
    """One hunk of a patch against the tree."""

    path: str
    """The file the hunk changes, relative to the tree."""
    number: int
    """1-based, counted through the whole patch."""
    header: str
    """The hunk's @@ line."""
    status: str
    detail: str = ""
    """Why, when it does not apply: the first line that differs, the missing file, ..."""


@dataclass(frozen=True)
class PatchCheck:
    """One patch against the tree, with every hunk's result when it does not simply apply."""

    name: str
    file: str
    status: str
    """APPLIES, ALREADY_APPLIED, FAILS, PATCH_MISSING or UNREADABLE."""
    hunks: tuple[HunkCheck, ...] = ()
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == APPLIES

    def failing(self) -> list[HunkCheck]:
        """The hunks that neither apply nor are already there."""
        return [h for h in self.hunks if h.status not in (APPLIES, ALREADY_APPLIED)]


@dataclass
class SeriesCheck:
    """A whole series applied in order to a copy of a source tree."""

    source: Path
    patches: list[PatchCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.patches)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "ok": self.ok,
            "patches": [
                {
                    "name": p.name,
                    "file": p.file,
                    "status": p.status,
                    "detail": p.detail,
                    "hunks": [
                        {
                            "path": h.path,
                            "number": h.number,
                            "header": h.header,
                            "status": h.status,
                            "detail": h.detail,
                        }
                        for h in p.hunks
                    ],
                }
                for p in self.patches
            ],
        }


def _git(scratch: Path, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    # GIT_CEILING_DIRECTORIES keeps git from finding a repository above the scratch directory:
    # `git apply` then works on plain files, like patch -p1.
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(scratch.parent)}
    return subprocess.run(
        ["git", "apply", *args],
        cwd=scratch,
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def _parse(text: str, where: str) -> PatchSet:
    try:
        patch = PatchSet(text)
    except UnidiffParseError as exc:
        raise PatchError(f"{where}: not a unified diff: {exc}") from None
    if not len(patch):
        raise PatchError(f"{where}: holds no file changes (a patch has ---/+++ and @@ lines)")
    return patch


def _paths(patch: PatchSet) -> set[str]:
    paths: set[str] = set()
    for changed in patch:
        for name in (changed.source_file, changed.target_file):
            if name and name != "/dev/null":
                paths.add(name.split("/", 1)[1] if "/" in name else name)
    return paths


@contextmanager
def scratch_copy(tree: Path, paths: Iterable[str]) -> Iterator[Path]:
    """A temporary directory holding just `paths` copied from `tree` (those that exist)."""
    root = Path(tempfile.mkdtemp(prefix="workbench-check-"))
    scratch = root / "tree"
    scratch.mkdir()
    try:
        for relative in paths:
            origin = tree / relative
            if origin.is_file():
                destination = scratch / relative
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, destination)
        yield scratch
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _file_header(changed: PatchedFile) -> str:
    return f"--- {changed.source_file}\n+++ {changed.target_file}\n"


def _why_context_changed(scratch: Path, path: str, hunk: Hunk) -> str:
    """The first line where the file differs from what the hunk expects, at the hunk's place."""
    expected = [line.value.rstrip("\n") for line in hunk if line.is_context or line.is_removed]
    actual = (scratch / path).read_text(errors="replace").splitlines()
    start = max(hunk.source_start - 1, 0)
    for offset, wanted in enumerate(expected):
        number = start + offset
        found = actual[number] if number < len(actual) else None
        if found != wanted:
            if found is None:
                return f"{path} ends at line {len(actual)}; the patch expects {wanted!r} there"
            return f"{path}:{number + 1} reads {found!r}; the patch expects {wanted!r}"
    return f"{path}: the lines match at {hunk.source_start} but git apply refuses the hunk"


def _check_hunks(scratch: Path, patch: PatchSet) -> list[HunkCheck]:
    results: list[HunkCheck] = []
    number = 0
    for changed in patch:
        path = changed.path
        target = scratch / path
        for hunk in changed:
            number += 1
            header = str(hunk).splitlines()[0]
            if changed.is_added_file:
                status = FILE_EXISTS if target.exists() else APPLIES
                detail = f"{path} already exists" if target.exists() else ""
                results.append(HunkCheck(path, number, header, status, detail))
                continue
            if not target.exists():
                detail = f"{path} does not exist in the source tree"
                results.append(HunkCheck(path, number, header, FILE_MISSING, detail))
                continue
            text = _file_header(changed) + str(hunk)
            if _git(scratch, "--check", stdin=text).returncode == 0:
                results.append(HunkCheck(path, number, header, APPLIES))
            elif _git(scratch, "--check", "--reverse", stdin=text).returncode == 0:
                results.append(
                    HunkCheck(path, number, header, ALREADY_APPLIED, "its change is already there")
                )
            else:
                detail = _why_context_changed(scratch, path, hunk)
                results.append(HunkCheck(path, number, header, CONTEXT_CHANGED, detail))
    return results


def _check_in_scratch(scratch: Path, name: str, file: Path, apply: bool) -> PatchCheck:
    if not file.is_file():
        return PatchCheck(name, file.name, PATCH_MISSING, detail=f"{file} does not exist")
    text = file.read_text(errors="replace")
    try:
        patch = _parse(text, str(file))
    except PatchError as exc:
        return PatchCheck(name, file.name, UNREADABLE, detail=str(exc))
    forward = _git(scratch, "--check", stdin=text)
    if forward.returncode == 0:
        if apply:
            _git(scratch, stdin=text).check_returncode()
        return PatchCheck(name, file.name, APPLIES)
    if _git(scratch, "--check", "--reverse", stdin=text).returncode == 0:
        return PatchCheck(name, file.name, ALREADY_APPLIED, detail="every hunk is already there")
    hunks = tuple(_check_hunks(scratch, patch))
    failing = [h for h in hunks if h.status not in (APPLIES, ALREADY_APPLIED)]
    if failing:
        detail = f"{len(failing)} of {len(hunks)} hunks do not apply"
    else:
        detail = "each hunk applies alone but not together: " + forward.stderr.strip()
    return PatchCheck(name, file.name, FAILS, hunks, detail)


def check_patch_in_place(tree: Path, patch_file: Path, name: str | None = None) -> PatchCheck:
    """Would `patch_file` apply to `tree`? The tree is not modified (a scratch copy is used)."""
    label = name or patch_file.stem
    try:
        paths = _paths(_parse(patch_file.read_text(errors="replace"), str(patch_file)))
    except (OSError, PatchError):
        paths = set()
    with scratch_copy(tree, paths) as scratch:
        return _check_in_scratch(scratch, label, patch_file, apply=False)


def check_series(series: Series, patches: Iterable[SeriesPatch], source: Path) -> SeriesCheck:
    """Apply `patches` in order to a copy of `source`; each is checked against the tree as the
    patches before it left it (a failing patch is reported and skipped, never half-applied)."""
    if not source.is_dir():
        raise PatchError(f"{source}: not a directory (--source must be a source tree)")
    chosen = list(patches)
    paths: set[str] = set()
    for patch in chosen:
        file = series.file_of(patch)
        if file.is_file():
            try:
                paths |= _paths(_parse(file.read_text(errors="replace"), str(file)))
            except PatchError:
                continue
    result = SeriesCheck(source)
    with scratch_copy(source, paths) as scratch:
        for patch in chosen:
            result.patches.append(
                _check_in_scratch(scratch, patch.name, series.file_of(patch), apply=True)
            )
    return result


def render_check(check: SeriesCheck) -> str:
    """The check as text: one line per patch, and under a failing one each hunk and why."""
    lines = [f"Checking {len(check.patches)} patches against {check.source}:"]
    width = max((len(p.name) for p in check.patches), default=0)
    for patch in check.patches:
        line = f"  {patch.name:<{width}}  {patch.status}"
        if patch.detail and patch.status != FAILS:
            line += f": {patch.detail}"
        elif patch.status == FAILS:
            line += f" ({patch.detail})"
        lines.append(line)
        for hunk in patch.hunks:
            text = f"      hunk #{hunk.number} {hunk.path} {hunk.header}: {hunk.status}"
            lines.append(text + (f": {hunk.detail}" if hunk.detail else ""))
    failed = [p.name for p in check.patches if not p.ok]
    lines.append(
        "All patches apply." if not failed else f"Do not apply cleanly: {', '.join(failed)}."
    )
    return "\n".join(lines)

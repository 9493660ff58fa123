"""Bringing patch files from another checkout into the series (`patches import DIR`).

A patch file whose name the series already lists (the static flavour's eight, listed without
their files) fills that entry; any other becomes a new entry for the flavours given. Every
imported patch is first checked against the pinned ORT source tree, in series order after the
patches before it, and then the files and the series entries are written together, or nothing
is: a stale patch (its context changed, or upstream already has it) or a conflicting one (a
file of that name with other content, or one that no longer applies after the patches before
it) leaves the repository as it was.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import tomlkit

from workbench.configs.matrix import Matrix
from workbench.configs.paths import patches_dir
from workbench.configs.toml_files import load_document, locked_directory, write_atomically
from workbench.errors import PatchError
from workbench.patches.checking import APPLIES, SeriesCheck, check_series
from workbench.patches.series import (
    GROUP,
    SeriesPatch,
    load_series,
    series_path,
    validate_name,
)


@dataclass(frozen=True)
class Imported:
    """One patch file of the directory and what becomes of it."""

    name: str
    file: Path
    new_entry: bool  # False: it fills an entry the series lists already
    status: str  # the check's status (APPLIES when it can be imported)
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "file": str(self.file),
            "new_entry": self.new_entry,
            "status": self.status,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class ImportResult:
    patches: tuple[Imported, ...]
    written: bool
    checks: tuple[SeriesCheck, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "written": self.written,
            "patches": [p.to_json() for p in self.patches],
            "checks": [c.to_json() for c in self.checks],
        }


def _entry_name(file: Path) -> str:
    return validate_name(file.stem.lower().replace(" ", "-"))


def import_patches(
    config_directory: Path,
    matrix: Matrix,
    directory: Path,
    source: Path,
    flavours: tuple[str, ...] = ("cuda-static",),
    group: str = "local",
) -> ImportResult:
    """Check every *.patch of `directory` against `source` (the pinned ORT tree) in series
    order, then write the files and the series entries together, or nothing."""
    if not directory.is_dir():
        raise PatchError(f"{directory}: no such directory (import takes a folder of .patch files)")
    files = sorted(directory.glob("*.patch"))
    if not files:
        raise PatchError(f"{directory}: no *.patch files to import")
    if not GROUP.match(group):
        raise PatchError(f"group {group!r}: lower-case letters, digits and '-'")
    known = {f.name for f in matrix.flavours}
    unknown = [f for f in flavours if f not in known]
    if unknown:
        raise PatchError(f"--flavour {unknown[0]!r} is not a flavour ({', '.join(sorted(known))})")
    series = load_series(config_directory, matrix)
    by_file = {patch.file: patch for patch in series.patches}
    target_directory = patches_dir(config_directory)
    plan: list[tuple[SeriesPatch, Path, bool]] = []
    conflicts: dict[str, str] = {}
    for file in files:
        existing = by_file.get(file.name)
        entry = existing or SeriesPatch(
            name=_entry_name(file),
            file=file.name,
            group=group,
            fixes=f"imported from {directory.resolve()}",
            flavours=flavours,
            variants=(),
            enabled=True,
            line=0,
        )
        if existing is None and any(p.name == entry.name for p in series.patches):
            conflicts[entry.name] = f"a different patch named {entry.name!r} is in the series"
        destination = target_directory / file.name
        if destination.exists() and destination.read_bytes() != file.read_bytes():
            conflicts[entry.name] = f"{destination} exists with other content"
        plan.append((entry, file, existing is None))
    with tempfile.TemporaryDirectory(prefix="workbench-import-") as temporary:
        scratch = Path(temporary)
        for patch in series.patches:
            if series.file_of(patch).is_file():
                shutil.copy2(series.file_of(patch), scratch / patch.file)
        for _, file, _ in plan:
            shutil.copy2(file, scratch / file.name)
        new_entries = [entry for entry, _, new in plan if new]
        trial = replace(series, directory=scratch, patches=(*series.patches, *new_entries))
        imported = {entry.name for entry, _, _ in plan}
        targets = sorted({f for entry, _, _ in plan for f in entry.flavours}) or sorted(known)
        checks = tuple(check_series(trial, trial.applied_to(target), source) for target in targets)
    found: dict[str, tuple[str, str]] = {}
    for check in checks:
        for checked in check.patches:
            if checked.name in imported and found.get(checked.name, (APPLIES, ""))[0] == APPLIES:
                found[checked.name] = (checked.status, checked.detail)
    results = []
    for entry, file, new in plan:
        status, detail = found.get(entry.name, ("not checked", "applies to none of the flavours"))
        if entry.name in conflicts:
            status, detail = "conflict", conflicts[entry.name]
        elif "already" in status:
            detail = detail or "stale: the pinned ORT already has it"
        results.append(Imported(entry.name, file, new, status, detail))
    if not all(r.status == APPLIES for r in results):
        return ImportResult(tuple(results), False, checks)
    _write(config_directory, target_directory, plan)
    return ImportResult(tuple(results), True, checks)


def _write(
    config_directory: Path, target_directory: Path, plan: list[tuple[SeriesPatch, Path, bool]]
) -> None:
    """Copy the files and append the new entries, both or neither."""
    path = series_path(config_directory)
    copied: list[Path] = []
    with locked_directory(target_directory):
        document = load_document(path) if path.exists() else tomlkit.document()
        if "patches" not in document:
            document["patches"] = tomlkit.aot()
        for entry, _, new in plan:
            if not new:
                continue
            item = tomlkit.table()
            for key, value in (
                ("name", entry.name),
                ("file", entry.file),
                ("group", entry.group),
                ("fixes", entry.fixes),
                ("flavours", list(entry.flavours)),
                ("variants", list(entry.variants)),
                ("enabled", entry.enabled),
            ):
                item[key] = value
            document["patches"].append(item)
        try:
            for _, file, _ in plan:
                destination = target_directory / file.name
                if not destination.exists():
                    write_atomically(destination, file.read_text())
                    copied.append(destination)
            write_atomically(path, tomlkit.dumps(document))
        except BaseException:
            for destination in copied:
                destination.unlink(missing_ok=True)
            raise

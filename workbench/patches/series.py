"""The patch series in patches/series.toml: read, validated, selected per package, edited.

The flake reads the same file (nix/overrides.nix, builtins.fromTOML) and applies exactly the
enabled patches that apply to a package, in series order; `Series.applied_to` is that selection
on the Python side, and the Nix tests check the two agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.configs.matrix import Matrix
from workbench.configs.paths import patches_dir
from workbench.configs.releases import Releases
from workbench.configs.toml_files import (
    load_document,
    load_toml,
    locked_directory,
    read_text,
    write_atomically,
)
from workbench.errors import ConfigError, PatchError

SERIES_FILE = "series.toml"
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.patch$")
VARIANT_PATTERN = re.compile(r"^[a-z0-9_*-]+$")
GROUP = re.compile(r"^[a-z0-9][a-z0-9-]*$")
KEYS = ("name", "file", "group", "fixes", "flavours", "variants", "enabled")
# Optional: `releases`, the ONNX Runtime versions (configs/releases.toml) a patch is for;
# without it, a patch is for every release.
OPTIONAL_KEYS = ("releases",)
KNOWN_GROUPS = ("static-init", "bridge-loop", "build-system", "portability", "local")


@dataclass(frozen=True)
class SeriesPatch:
    """One [[patches]] table of series.toml."""

    name: str
    file: str
    group: str
    fixes: str
    flavours: tuple[str, ...]
    variants: tuple[str, ...]
    """Variant-name patterns; '*' matches any run of characters."""
    enabled: bool
    line: int
    """The line of its [[patches]] header in series.toml (for messages)."""
    releases: tuple[str, ...] | None = None
    """The ONNX Runtime releases it is for; None: every release."""

    def for_release(self, version: str) -> bool:
        """Whether this patch is for ONNX Runtime `version`."""
        return self.releases is None or version in self.releases

    def applies_to(self, target: str, flavour: bool) -> bool:
        """True if this patch is for `target` (enabled or not): a flavour's name if `flavour`,
        else a variant's name."""
        if flavour:
            return target in self.flavours
        return any(_pattern(pattern).fullmatch(target) for pattern in self.variants)


@dataclass(frozen=True)
class Series:
    """The whole series, in order, and where its files live."""

    directory: Path
    patches: tuple[SeriesPatch, ...]
    flavour_names: frozenset[str]
    """The linkage flavours of configs/flavours.toml; any other target is a variant."""
    releases: Releases | None = None
    """configs/releases.toml: a target name may carry a release (`cpu-ort1_24_2`)."""

    def release_of(self, target: str, ort: str | None = None) -> tuple[str, str | None]:
        """`target` without its release suffix, and the release meant (`ort`, else the one
        its name carries, else the pin's; None without releases.toml)."""
        if self.releases is None:
            return target, ort
        base, named = self.releases.split_name(target)
        return base, ort or (named.version if named else self.releases.default)

    @property
    def path(self) -> Path:
        return self.directory / SERIES_FILE

    def get(self, name: str) -> SeriesPatch:
        """The patch called `name`, or a ConfigError listing the names there are."""
        for patch in self.patches:
            if patch.name == name:
                return patch
        names = ", ".join(p.name for p in self.patches) or "none yet"
        raise ConfigError(f"{self.path}: no patch named {name!r} (the series has: {names})")

    def file_of(self, patch: SeriesPatch) -> Path:
        """The patch's file on disk (it may not exist yet)."""
        return self.directory / patch.file

    def for_target(self, target: str) -> list[SeriesPatch]:
        """Every patch for `target` (flavour or variant name), enabled or not, in order."""
        target, _ = self.release_of(target)
        flavour = target in self.flavour_names
        return [p for p in self.patches if p.applies_to(target, flavour)]

    def applied_to(self, target: str, ort: str | None = None) -> list[SeriesPatch]:
        """The enabled patches for `target` (flavour or variant name) at its release (`ort`,
        else the one its name carries, else the pin's), in series order: as nix/series.nix."""
        _, version = self.release_of(target, ort)
        return [
            p
            for p in self.for_target(target)
            if p.enabled and (version is None or p.for_release(version))
        ]

    def left_out_at(self, target: str, ort: str | None = None) -> list[SeriesPatch]:
        """The enabled patches for `target` that its release does NOT get (their `releases`
        leave it out): what a build of that release goes without."""
        _, version = self.release_of(target, ort)
        if version is None:
            return []
        return [p for p in self.for_target(target) if p.enabled and not p.for_release(version)]


def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def series_path(config_directory: Path) -> Path:
    """patches/series.toml for this config directory (see `paths.patches_dir`)."""
    return patches_dir(config_directory) / SERIES_FILE


def validate_name(name: str) -> str:
    """A new patch's name, checked; PatchError says what a name may contain."""
    if not NAME.match(name):
        raise PatchError(
            f"{name!r} is not a patch name: use lower-case letters, digits, '.', '_' and '-', "
            "starting with a letter or digit (e.g. fix-datatype-loop)"
        )
    if name.endswith(".patch"):
        raise PatchError(f"{name!r}: give the name without .patch (the file is NAME.patch)")
    return name


def _header_lines(text: str) -> list[int]:
    """1-based lines of each [[patches]] header, in order."""
    return [
        number
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip().startswith("[[patches]]")
    ]


def _key_line(lines: list[str], header: int, key: str) -> int | None:
    """The line of `key = ...` inside the [[patches]] table starting at line `header`."""
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for number in range(header + 1, len(lines) + 1):
        text = lines[number - 1]
        if text.lstrip().startswith("["):
            return None
        if pattern.match(text):
            return number
    return None


def _check_table(
    table: dict[str, Any],
    line: int,
    path: Path,
    matrix: Matrix,
    variant_names: set[str],
    lines: list[str] | None = None,
) -> SeriesPatch:
    where = f"{path}:{line}"
    label = table.get("name", "?")

    def fail(key: str, value: Any, allowed: str) -> ConfigError:
        at = _key_line(lines or [], line, key) or line
        return ConfigError(f"{path}:{at}: patch {label!r}: {key} = {value!r}: {allowed}")

    unknown = [key for key in table if key not in KEYS and key not in OPTIONAL_KEYS]
    if unknown:
        allowed = ", ".join(KEYS + OPTIONAL_KEYS)
        raise fail(unknown[0], table[unknown[0]], f"unknown key; the keys are {allowed}")
    releases = table.get("releases")
    if releases is not None:
        versions = list(matrix.releases.versions) if matrix.releases else [matrix.ort_version]
        if not isinstance(releases, list) or not all(isinstance(v, str) for v in releases):
            raise fail("releases", releases, f"a list of ONNX Runtime versions ({versions})")
        for version in releases:
            if version not in versions:
                raise fail(
                    "releases", version, f"not a release of configs/releases.toml ({versions})"
                )
    for key in KEYS:
        if key not in table:
            raise ConfigError(f"{where}: patch {label!r}: key {key!r} is missing")
    name, file, group, fixes = (table[k] for k in ("name", "file", "group", "fixes"))
    if not isinstance(name, str) or not NAME.match(name):
        raise fail("name", name, "lower-case letters, digits, '.', '_' and '-'")
    if not isinstance(file, str) or not FILE.match(file):
        raise fail("file", file, "a file name in this folder ending in .patch, no directories")
    if not isinstance(group, str) or not GROUP.match(group):
        raise fail("group", group, f"a word such as {', '.join(KNOWN_GROUPS)}")
    if not isinstance(fixes, str) or not fixes.strip():
        raise fail("fixes", fixes, "a sentence saying what the patch fixes")
    if not isinstance(table["enabled"], bool):
        raise fail("enabled", table["enabled"], "true or false")
    flavours = table["flavours"]
    if not isinstance(flavours, list) or not all(isinstance(f, str) for f in flavours):
        raise fail("flavours", flavours, "a list of flavour names")
    known = [f.name for f in matrix.flavours]
    for flavour in flavours:
        if flavour not in known:
            raise fail("flavours", flavour, f"not a flavour; the flavours are {known}")
    variants = table["variants"]
    if not isinstance(variants, list) or not all(isinstance(v, str) for v in variants):
        raise fail("variants", variants, "a list of variant names or patterns with '*'")
    for pattern in variants:
        if not VARIANT_PATTERN.match(pattern):
            raise fail("variants", pattern, "letters, digits, '_', '-' and '*' only")
        if not any(_pattern(pattern).fullmatch(v) for v in variant_names):
            raise fail("variants", pattern, "matches no variant (`workbench variants --names`)")
    return SeriesPatch(
        name=name,
        file=file,
        group=group,
        fixes=fixes.strip(),
        flavours=tuple(flavours),
        variants=tuple(variants),
        enabled=table["enabled"],
        line=line,
        releases=tuple(releases) if releases is not None else None,
    )


def load_series(config_directory: Path, matrix: Matrix | None = None) -> Series:
    """patches/series.toml, validated against the matrix (`matrix`, else the config's own).

    A folder without series.toml has an empty series.
    """
    if matrix is None:
        matrix = _matrix_of(config_directory)
    flavour_names = frozenset(f.name for f in matrix.flavours)
    path = series_path(config_directory)
    if not path.exists():
        return Series(path.parent, (), flavour_names, matrix.releases)
    data = load_toml(path)
    unknown = [key for key in data if key != "patches"]
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key {unknown[0]!r}; only [[patches]] tables")
    tables = data.get("patches", [])
    if not isinstance(tables, list):
        raise ConfigError(f"{path}: patches must be [[patches]] tables")
    text = read_text(path)
    lines = _header_lines(text)
    variant_names = _variant_names(matrix)
    patches: list[SeriesPatch] = []
    for index, table in enumerate(tables):
        line = lines[index] if index < len(lines) else 0
        patch = _check_table(table, line, path, matrix, variant_names, text.splitlines())
        for earlier in patches:
            if earlier.name == patch.name:
                raise ConfigError(
                    f"{path}:{line}: patch name {patch.name!r} is used twice "
                    f"(first at line {earlier.line}); names must be unique"
                )
        patches.append(patch)
    return Series(path.parent, tuple(patches), flavour_names, matrix.releases)


def set_enabled(
    config_directory: Path, name: str, enabled: bool, matrix: Matrix | None = None
) -> Series:
    """Enable or disable one patch in series.toml, keeping comments; returns the new series."""
    import tomlkit  # only where series.toml is written: reading it needs none (faster start)

    path = series_path(config_directory)
    with locked_directory(path.parent):
        series = load_series(config_directory, matrix)
        series.get(name)  # unknown names fail here, naming the ones there are
        document = load_document(path)
        for table in document["patches"]:
            if table["name"] == name:
                table["enabled"] = enabled
        write_atomically(path, tomlkit.dumps(document))
    return load_series(config_directory, matrix)


@dataclass(frozen=True)
class NewPatch:
    """What `add_patch` writes: the series entry (its file is NAME.patch)."""

    name: str
    group: str
    fixes: str
    flavours: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    enabled: bool = True


def add_patch(
    config_directory: Path, new: NewPatch, diff: str | None, matrix: Matrix | None = None
) -> SeriesPatch:
    """Write NAME.patch and append its entry to series.toml, both or neither.

    Refuses a name already in the series or a file already there; the entry is checked the
    same way `load_series` checks the file before anything is written. `diff` None: the file
    NAME.patch was written already (by `workbench bt --source`) and only the entry is added.
    """
    import tomlkit

    validate_name(new.name)
    if diff is not None and not diff.strip():
        raise PatchError("the diff is empty: there are no changes to turn into a patch")
    directory = patches_dir(config_directory)
    path = directory / SERIES_FILE
    file = directory / f"{new.name}.patch"
    with locked_directory(directory):
        series = load_series(config_directory, matrix)
        if any(p.name == new.name for p in series.patches):
            raise PatchError(f"{path}: a patch named {new.name!r} is already in the series")
        if diff is not None and file.exists():
            raise PatchError(f"{file} already exists; choose another name")
        if diff is None and not file.is_file():
            raise PatchError(f"{file} does not exist")
        table = {
            "name": new.name,
            "file": file.name,
            "group": new.group,
            "fixes": new.fixes,
            "flavours": list(new.flavours),
            "variants": list(new.variants),
            "enabled": new.enabled,
        }
        checked_against = matrix or _matrix_of(config_directory)
        entry = _check_table(table, 0, path, checked_against, _variant_names(checked_against))
        document = load_document(path) if path.exists() else tomlkit.document()
        if "patches" not in document:
            document["patches"] = tomlkit.aot()
        item = tomlkit.table()
        for key, value in table.items():
            item[key] = value
        document["patches"].append(item)
        if diff is not None:
            write_atomically(file, diff if diff.endswith("\n") else diff + "\n")
        try:
            write_atomically(path, tomlkit.dumps(document))
        except BaseException:
            if diff is not None:
                file.unlink(missing_ok=True)
            raise
    return load_series(config_directory, matrix).get(entry.name)


def _variant_names(matrix: Matrix) -> set[str]:
    from workbench.configs.variants import expand

    return {variant.name for variant in expand(matrix)}


def _matrix_of(config_directory: Path) -> Matrix:
    from workbench.configs.matrix import load_matrix

    return load_matrix(config_directory)


def target_name(matrix: Matrix, name: str) -> str:
    """The series' name for a package: a flavour's name (given its name or flake attribute) or
    a variant's name; an unknown name fails with the nearest real ones suggested."""
    try:
        return matrix.flavour(name).name
    except KeyError:
        from workbench.configs.variants import parse

        return parse(name, matrix).name

"""ONNX Runtime releases as data: configs/releases.toml, the file nix/releases.nix reads too.

The pin's own release (nixpkgs' recipe, no override) keeps the seeds' names; every other
release is a source override whose packages carry the release in their names
(`onnxruntime-python313-cpu-avx2-ort1_24_2`, `result-...-ort1_24_2`), so releases of one
variant build and sit side by side. Which release a command builds: `--ort VERSION`, else
settings.toml's `ort_version`, else the pin's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.configs.toml_files import line_of_key, load_toml, read_text
from workbench.errors import ConfigError, WorkbenchError

RELEASES_FILE = "releases.toml"
SUFFIX = re.compile(r"-ort(\d+)_(\d+)_(\d+)$")


class UnknownReleaseError(WorkbenchError):
    """A release that configs/releases.toml does not list or does not offer."""


@dataclass(frozen=True)
class Fix:
    """One postPatch step a release's source needs, and why."""

    name: str
    why: str
    cuda_only: bool
    script: str


@dataclass(frozen=True)
class Dependency:
    """A dependency ORT would download, given to CMake as FETCHCONTENT_SOURCE_DIR_<NAME>."""

    fetchcontent: str
    owner: str
    repo: str
    tag: str | None
    rev: str | None
    hash: str
    cuda_only: bool

    @property
    def pin(self) -> str:
        """`onnx/onnx v1.20.1` or `pytorch/cpuinfo @ca67895`."""
        where = self.tag if self.tag else f"@{(self.rev or '')[:8]}"
        return f"{self.owner}/{self.repo} {where}"


@dataclass(frozen=True)
class Release:
    """One ONNX Runtime release of configs/releases.toml."""

    version: str
    nixpkgs_own: bool
    offered: bool
    why: str
    flox_branch: str
    suffix: str  # "" for the pin's own, else "-ort1_24_2"
    tag: str | None = None
    hash: str | None = None
    fixes: tuple[Fix, ...] = ()
    cmake_flags: tuple[str, ...] = ()
    cxxflags: tuple[str, ...] = ()
    deps: tuple[Dependency, ...] = ()
    unsupported_sms: tuple[str, ...] = ()
    unsupported_sms_why: str = ""
    flavours_not_offered: tuple[str, ...] = ()
    flavours_why: str = ""

    def fixes_for(self, cuda: bool) -> tuple[Fix, ...]:
        """The fixes a CUDA or CPU build of this release runs."""
        return tuple(fix for fix in self.fixes if cuda or not fix.cuda_only)

    def deps_for(self, cuda: bool) -> tuple[Dependency, ...]:
        """The bundled dependencies a CUDA or CPU build of this release is given."""
        return tuple(dep for dep in self.deps if cuda or not dep.cuda_only)

    def sm_problem(self, sm: str | None) -> str | None:
        """Why this release cannot build `sm`, or None."""
        if sm is not None and sm in self.unsupported_sms:
            return f"ONNX Runtime {self.version} cannot build {sm}: {self.unsupported_sms_why}"
        return None

    def flavour_problem(self, flavour: str) -> str | None:
        """Why this release is not offered as `flavour`, or None."""
        if flavour in self.flavours_not_offered:
            return f"ONNX Runtime {self.version} is not offered as {flavour}: {self.flavours_why}"
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "nixpkgs_own": self.nixpkgs_own,
            "offered": self.offered,
            "why": self.why,
            "flox_branch": self.flox_branch,
            "suffix": self.suffix,
            "tag": self.tag,
            "hash": self.hash,
            "deps": [
                {
                    "fetchcontent": d.fetchcontent,
                    "owner": d.owner,
                    "repo": d.repo,
                    "tag": d.tag,
                    "rev": d.rev,
                    "hash": d.hash,
                    "cuda_only": d.cuda_only,
                }
                for d in self.deps
            ],
            "fixes": [{"name": f.name, "why": f.why, "cuda_only": f.cuda_only} for f in self.fixes],
            "cmake_flags": list(self.cmake_flags),
            "cxxflags": list(self.cxxflags),
            "unsupported_sms": list(self.unsupported_sms),
            "unsupported_sms_why": self.unsupported_sms_why or None,
            "flavours_not_offered": list(self.flavours_not_offered),
            "flavours_why": self.flavours_why or None,
        }


def suffix_of(version: str, default: str) -> str:
    """ "" for the pin's release, else "-ort" and the version with underscores."""
    return "" if version == default else "-ort" + version.replace(".", "_")


@dataclass(frozen=True)
class Releases:
    """Every release, and the pin's own (the default)."""

    default: str
    all: tuple[Release, ...]

    @property
    def versions(self) -> tuple[str, ...]:
        return tuple(r.version for r in self.all)

    @property
    def offered(self) -> tuple[Release, ...]:
        return tuple(r for r in self.all if r.offered)

    def get(self, version: str) -> Release:
        """The release `version`, offered; else UnknownReleaseError saying what there is."""
        for release in self.all:
            if release.version == version:
                if not release.offered:
                    raise UnknownReleaseError(
                        f"ONNX Runtime {version} is not offered: {release.why}"
                    )
                return release
        offered = ", ".join(r.version for r in self.offered)
        raise UnknownReleaseError(
            f"no ONNX Runtime release {version!r} in configs/{RELEASES_FILE} (offered: {offered})"
        )

    def split_name(self, name: str) -> tuple[str, Release | None]:
        """A target name without its release suffix, and the release it names (None: none)."""
        found = SUFFIX.search(name)
        if not found:
            return name, None
        version = ".".join(found.groups())
        return name[: found.start()], self.get(version)


def _fail(path: Path, key: str, problem: str) -> ConfigError:
    line = line_of_key(read_text(path), key)
    where = f"{path}:{line}" if line else str(path)
    return ConfigError(f"{where}: {key}: {problem}")


def _strings(path: Path, table: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(path, key, f"{where}: must be a list of strings, not {value!r}")
    return tuple(value)


def _string(path: Path, table: dict[str, Any], key: str, where: str) -> str:
    value = table.get(key)
    if not isinstance(value, str):
        raise _fail(path, key, f"{where}: must be a string, not {value!r}")
    return value


def _bool(path: Path, table: dict[str, Any], key: str, where: str) -> bool:
    value = table.get(key)
    if not isinstance(value, bool):
        raise _fail(path, key, f"{where}: must be true or false, not {value!r}")
    return value


CMAKE_DEFINITION = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=.*$")


def load_releases(config_directory: Path, pin_version: str) -> Releases:
    """configs/releases.toml, checked; without the file, the pin's release alone."""
    path = config_directory / RELEASES_FILE
    if not path.is_file():
        pinned = Release(pin_version, True, True, "nixpkgs' own, no override", "", "")
        return Releases(pin_version, (pinned,))
    data = load_toml(path)
    default = data.get("default")
    if default != pin_version:
        raise _fail(
            path,
            "default",
            f"{default!r} must be the nixpkgs pin's own release, {pin_version} "
            "(configs/matrix.toml [onnxruntime] version)",
        )
    fix_tables = data.get("fixes", {})
    fixes: dict[str, Fix] = {}
    for name, table in fix_tables.items():
        where = f"[fixes.{name}]"
        fixes[name] = Fix(
            name,
            " ".join(_string(path, table, "why", where).split()),
            _bool(path, table, "cuda_only", where),
            _string(path, table, "script", where),
        )
    releases = []
    for table in data.get("releases", []):
        version = _string(path, table, "version", "[[releases]]")
        where = f"[[releases]] {version}"
        own = _bool(path, table, "nixpkgs_own", where)
        common = {
            "version": version,
            "nixpkgs_own": own,
            "offered": _bool(path, table, "offered", where),
            "why": _string(path, table, "why", where),
            "flox_branch": table.get("flox_branch", ""),
            "suffix": suffix_of(version, pin_version),
        }
        if own:
            releases.append(Release(**common))
            continue
        named = _strings(path, table, "fixes", where)
        unknown = [name for name in named if name not in fixes]
        if unknown:
            raise _fail(path, "fixes", f"{where}: no [fixes.{unknown[0]}] table ({sorted(fixes)})")
        flags = _strings(path, table, "cmake_flags", where)
        bad = [flag for flag in flags if not CMAKE_DEFINITION.match(flag)]
        if bad:
            raise _fail(path, "cmake_flags", f"{where}: {bad[0]!r} is not NAME[:TYPE]=VALUE")
        deps = []
        for dep in table.get("deps", []):
            at = f"{where} [[releases.deps]]"
            tag, rev = dep.get("tag"), dep.get("rev")
            if (tag is None) == (rev is None):
                raise _fail(path, "tag", f"{at}: give exactly one of tag or rev")
            deps.append(
                Dependency(
                    _string(path, dep, "fetchcontent", at),
                    _string(path, dep, "owner", at),
                    _string(path, dep, "repo", at),
                    tag,
                    rev,
                    _string(path, dep, "hash", at),
                    _bool(path, dep, "cuda_only", at),
                )
            )
        releases.append(
            Release(
                **common,
                tag=_string(path, table, "tag", where),
                hash=_string(path, table, "hash", where),
                fixes=tuple(fixes[name] for name in named),
                cmake_flags=flags,
                cxxflags=_strings(path, table, "cxxflags", where),
                deps=tuple(deps),
                unsupported_sms=_strings(path, table, "unsupported_sms", where),
                unsupported_sms_why=" ".join(
                    _string(path, table, "unsupported_sms_why", where).split()
                ),
                flavours_not_offered=_strings(path, table, "flavours_not_offered", where),
                flavours_why=" ".join(_string(path, table, "flavours_why", where).split()),
            )
        )
    if pin_version not in [r.version for r in releases]:
        raise _fail(path, "default", f"no [[releases]] table for the default {pin_version}")
    return Releases(pin_version, tuple(releases))

"""Build settings in configs/settings.toml: typed, validated, edited keeping the user's comments."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from workbench.configs.cuda_arch import ArchitectureError, normalise_list
from workbench.configs.matrix import Matrix
from workbench.configs.toml_files import (
    line_of_key,
    load_document,
    load_toml,
    locate_key,
    locked_directory,
    read_text,
    write_atomically,
)
from workbench.errors import ConfigError

SETTINGS_FILE = "settings.toml"
# Compiler flags reach argv lists, never a shell; this still refuses anything that is not a
# plain flag so a typo cannot smuggle a second argument or a file name in.
COMPILER_FLAG = re.compile(r"^-[A-Za-z0-9_=.,+:/-]+$")
MAX_JOBS = 4096


@dataclass(frozen=True)
class BuildSettings:
    """The validated contents of settings.toml."""

    ninja_jobs: int | str  # a count, or "auto" for the recommendation
    max_jobs: int
    nvcc_threads: int
    cuda_architectures: tuple[str, ...]
    optimization_flags: tuple[str, ...]
    nvcc_host_isa_flags: bool
    ccache: bool
    linkage: str
    cxx_job_memory_gb: float
    cuda_job_memory_gb: float
    # The ONNX Runtime release builds are of (configs/releases.toml); `--ort` overrides it.
    ort_version: str = ""


class Refused(ValueError):
    """A value that is not allowed; the message says what is."""


@dataclass(frozen=True)
class Context:
    """What validation needs to know: the matrix."""

    matrix: Matrix


@dataclass(frozen=True)
class SettingSpec:
    """One key: its meaning, what it allows, and how text or TOML values become a checked value."""

    key: str
    meaning: str
    allowed: Callable[[Context], str]
    check: Callable[[Any, Context], Any]  # a TOML value -> the checked value, or Refused
    from_text: Callable[[str], Any]  # command-line text -> a TOML value


def _whole_number(value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused("not a whole number")
    if not low <= value <= high:
        raise Refused("out of range")
    return value


# No setting takes a number this long; longer ones are refused as out of range without being
# converted (Python refuses to convert more than 4300 digits at all).
_MAX_DIGITS = 19


def _text_to_int(text: str) -> Any:
    text = text.strip()
    if not re.fullmatch(r"[+-]?\d+", text):
        return text
    if len(text.lstrip("+-").lstrip("0")) > _MAX_DIGITS:
        return -(10**_MAX_DIGITS) if text.startswith("-") else 10**_MAX_DIGITS
    return int(text)


def _shown(value: Any, limit: int = 60) -> str:
    """A refused value for a message: a value thousands of characters long is cut short."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 20]}... ({len(text)} characters)"


def _text_to_float(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def _text_to_list(text: str) -> list[str]:
    return [item for item in re.split(r"[,;\s]+", text.strip()) if item]


def _text_to_bool(text: str) -> Any:
    lowered = text.strip().lower()
    if lowered in ("true", "on", "yes", "1"):
        return True
    if lowered in ("false", "off", "no", "0"):
        return False
    return text


def _check_jobs(value: Any, _: Context) -> int | str:
    if value == "auto":
        return "auto"
    return _whole_number(value, 1, MAX_JOBS)


def _check_count(high: int) -> Callable[[Any, Context], int]:
    return lambda value, _: _whole_number(value, 1, high)


def _check_architectures(value: Any, context: Context) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise Refused("not a list of architectures")
    try:
        return tuple(normalise_list(value, context.matrix.known_cuda_architectures))
    except ArchitectureError as exc:
        raise Refused(str(exc).split(";")[0]) from None


def _check_flags(value: Any, _: Context) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise Refused("not a list of flags")
    bad = [flag for flag in value if not COMPILER_FLAG.match(flag)]
    if bad:
        raise Refused(f"{bad[0]!r} is not a compiler flag")
    return tuple(value)


def _check_bool(value: Any, _: Context) -> bool:
    if not isinstance(value, bool):
        raise Refused("not true or false")
    return value


def _check_linkage(value: Any, context: Context) -> str:
    names = [flavour.name for flavour in context.matrix.flavours]
    if value not in names:
        raise Refused("not a linkage flavour")
    return str(value)  # one of the names


def _check_release(value: Any, context: Context) -> str:
    from workbench.configs.releases import UnknownReleaseError

    if not isinstance(value, str):
        raise Refused("not a version string")
    try:
        return context.matrix.release(value.strip()).version
    except UnknownReleaseError:
        raise Refused("not an offered release") from None


def _offered_releases(context: Context) -> str:
    releases = context.matrix.releases
    offered = [r.version for r in releases.offered] if releases else [context.matrix.ort_version]
    pin = context.matrix.ort_version
    return f"one of {', '.join(offered)} (configs/releases.toml; {pin} is the nixpkgs pin's own)"


def _check_gigabytes(value: Any, _: Context) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Refused("not a number")
    if not (math.isfinite(value) and 0 < value <= 1024):
        raise Refused("out of range")
    return float(value)


SPECS: dict[str, SettingSpec] = {
    spec.key: spec
    for spec in (
        SettingSpec(
            "ninja_jobs",
            "parallel compile jobs (nix build --cores N / ninja -j)",
            lambda _: f'a whole number from 1 to {MAX_JOBS}, or "auto"',
            _check_jobs,
            _text_to_int,
        ),
        SettingSpec(
            "max_jobs",
            "derivations Nix builds at once (nix build --max-jobs)",
            lambda _: "a whole number from 1 to 64",
            _check_count(64),
            _text_to_int,
        ),
        SettingSpec(
            "nvcc_threads",
            "nvcc threads per CUDA compile (onnxruntime_NVCC_THREADS)",
            lambda _: "a whole number from 1 to 64",
            _check_count(64),
            _text_to_int,
        ),
        SettingSpec(
            "cuda_architectures",
            "CMAKE_CUDA_ARCHITECTURES override (empty: the variant's SM)",
            lambda c: (
                "a comma-separated list of: "
                + ", ".join(c.matrix.known_cuda_architectures)
                + " (also sm_90, compute_90, 9.0, 90-real), or empty"
            ),
            _check_architectures,
            _text_to_list,
        ),
        SettingSpec(
            "optimization_flags",
            "extra C/C++ compiler flags",
            lambda _: "compiler flags separated by spaces or commas, each starting with -",
            _check_flags,
            _text_to_list,
        ),
        SettingSpec(
            "nvcc_host_isa_flags",
            "also pass the ISA flags to nvcc's host compiler (-Xcompiler)",
            lambda _: "true or false (also on/off, yes/no)",
            _check_bool,
            _text_to_bool,
        ),
        SettingSpec(
            "ccache",
            "compile through ccache when installed",
            lambda _: "true or false (also on/off, yes/no)",
            _check_bool,
            _text_to_bool,
        ),
        SettingSpec(
            "linkage",
            "linkage flavour for builds without a variant",
            lambda c: "one of " + ", ".join(f.name for f in c.matrix.flavours),
            _check_linkage,
            str.strip,
        ),
        SettingSpec(
            "cxx_job_memory_gb",
            "peak GiB of one C++ compile job until measured",
            lambda _: "a number of GiB above 0, at most 1024",
            _check_gigabytes,
            _text_to_float,
        ),
        SettingSpec(
            "cuda_job_memory_gb",
            "peak GiB of one nvcc thread until measured",
            lambda _: "a number of GiB above 0, at most 1024",
            _check_gigabytes,
            _text_to_float,
        ),
        SettingSpec(
            "ort_version",
            "ONNX Runtime release to build (--ort overrides it)",
            _offered_releases,
            _check_release,
            str.strip,
        ),
    )
}
assert set(SPECS) == {f.name for f in fields(BuildSettings)}


# Settings newer than some settings.toml files in use: a file without them means this value
# (the flake reads them the same way, nix/config.nix).
ADDED_LATER: dict[str, Any] = {"nvcc_host_isa_flags": False}

MOVED = {
    "enabled_patches": "patches are switched on and off in patches/series.toml now "
    "(`workbench patches enable NAME`, or the patches screen); delete this line",
}


def _spec(key: str) -> SettingSpec:
    if key in MOVED:
        raise ConfigError(f"{key!r} is no longer a setting: {MOVED[key]}")
    if key not in SPECS:
        raise ConfigError(f"unknown setting {key!r}; settings: {', '.join(SPECS)}")
    return SPECS[key]


def _refusal(
    path: Path, line: int | None, key: str, shown: Any, why: Refused, context: Context
) -> ConfigError:
    where = f"{path}:{line}" if line else str(path)
    allowed = _spec(key).allowed(context)
    return ConfigError(
        f"{where}: {key} = {_shown(_one_line(shown))}: refused ({why}); allowed: {allowed}"
    )


def _one_line(shown: Any) -> Any:
    """A value as one line of a message: a table (`[key]` and its lines) as an inline table."""
    if not isinstance(shown, str) or "\n" not in shown.strip():
        return shown.strip() if isinstance(shown, str) else shown
    lines = [line.strip() for line in shown.strip().splitlines() if line.strip()]
    return "{" + ", ".join(lines) + "}"


def _toml_value(value: Any) -> str:
    """A value as TOML text for a message (tomlkit: only to show a refused value)."""
    import tomlkit

    text: str = tomlkit.item(value).as_string()
    return text


def _where(path: Path, text: str, key: str) -> str:
    """`path:line:column` of `key` in the file's text (`path:1` if it cannot be found)."""
    found = locate_key(text, key)
    return f"{path}:{found[0]}:{found[1]}" if found else f"{path}:1"


def _validate(data: dict[str, Any], path: Path, text: str, context: Context) -> BuildSettings:
    unknown = [key for key in data if key not in SPECS]
    if unknown:
        key = unknown[0]
        if key in MOVED:
            raise ConfigError(f"{_where(path, text, key)}: {key!r}: {MOVED[key]}")
        raise ConfigError(
            f"{_where(path, text, key)}: unknown setting {key!r}; settings: {', '.join(SPECS)}"
        )
    values = {}
    for key, spec in SPECS.items():
        if key not in data and key in ADDED_LATER:
            values[key] = ADDED_LATER[key]
            continue
        if key not in data and key == "ort_version":  # older files: the pin's own release
            values[key] = context.matrix.ort_version
            continue
        if key not in data:
            # Where to add it: after the file's last line.
            last = text.rstrip("\n").count("\n") + 1
            raise ConfigError(
                f"{path}:{last}: setting {key!r} is missing ({spec.meaning}); add a line "
                f"`{key} = ...` (allowed: {spec.allowed(context)})"
            )
        try:
            values[key] = spec.check(data[key], context)
        except Refused as why:
            shown = _toml_value(data[key])
            raise _refusal(path, line_of_key(text, key), key, shown, why, context) from None
    return BuildSettings(**values)


def settings_path(config_directory: Path) -> Path:
    """configs/settings.toml."""
    return config_directory / SETTINGS_FILE


def load_settings(config_directory: Path, matrix: Matrix) -> BuildSettings:
    """Read and validate settings.toml, with the per-user file's values over it for the keys
    kept per user (workbench.configs.user_settings.BUILD_KEYS); any bad value is reported with
    file and line."""
    path = settings_path(config_directory)
    context = Context(matrix)
    settings = _validate(load_toml(path), path, read_text(path), context)
    return _with_user_values(settings, context)


def _with_user_values(settings: BuildSettings, context: Context) -> BuildSettings:
    """`settings` with the per-user file's values of BUILD_KEYS, each checked."""
    from dataclasses import replace

    from workbench.configs.user_settings import BUILD_KEYS, load_user_settings, user_settings_path

    data, text = load_user_settings()
    values = {}
    for key in BUILD_KEYS:
        if key not in data:
            continue
        try:
            values[key] = SPECS[key].check(data[key], context)
        except Refused as why:
            shown = _toml_value(data[key])
            path = user_settings_path()
            raise _refusal(path, line_of_key(text, key), key, shown, why, context) from None
    return replace(settings, **values) if values else settings


def per_user(key: str) -> bool:
    """Whether `key` is kept per user and host (the user's config directory) rather than in the
    checkout's tracked settings.toml (where it changes what Nix builds)."""
    from workbench.configs.user_settings import BUILD_KEYS

    return key in BUILD_KEYS


def origin(key: str) -> str:
    """Where a setting's value in force comes from, for labels: "your settings" when the
    per-user file sets it, else "settings.toml" (the checkout's)."""
    from workbench.configs.user_settings import load_user_settings

    return "your settings" if per_user(key) and key in load_user_settings()[0] else "settings.toml"


def written_to(config_directory: Path, key: str) -> Path:
    """The file `set_settings` writes `key` to."""
    from workbench.configs.user_settings import user_settings_path

    return user_settings_path() if per_user(key) else settings_path(config_directory)


def format_value(value: Any) -> str:
    """A setting's value as the CLI prints it and accepts it back."""
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def get_setting(settings: BuildSettings, key: str) -> Any:
    """One setting's checked value."""
    _spec(key)
    return getattr(settings, key)


def check_value(config_directory: Path, matrix: Matrix, key: str, value: Any) -> Any:
    """The checked value for `key` from command-line text or a typed value.

    Raises ConfigError naming the key, the value and what is allowed (the TUI shows it as the
    user types).
    """
    spec = _spec(key)
    context = Context(matrix)
    typed = spec.from_text(value) if isinstance(value, str) else value
    try:
        return spec.check(typed, context)
    except Refused as why:
        path = settings_path(config_directory)
        raise _refusal(path, None, key, repr(value), why, context) from None


def set_settings(config_directory: Path, matrix: Matrix, changes: dict[str, Any]) -> BuildSettings:
    """Change several settings in one atomic write, keeping comments and layout.

    Values are command-line text or typed values (from the TUI). If any is refused, ConfigError
    names file, key, value and what is allowed, and the file is not touched.
    """
    import tomlkit  # only where settings.toml is written: reading it needs none (faster start)

    checked = {
        key: check_value(config_directory, matrix, key, value) for key, value in changes.items()
    }
    mine = {key: value for key, value in checked.items() if per_user(key)}
    tracked = {key: value for key, value in checked.items() if not per_user(key)}
    path = settings_path(config_directory)
    context = Context(matrix)
    if mine:
        from workbench.configs.user_settings import write_user_settings

        write_user_settings(mine)
    if not tracked:
        return load_settings(config_directory, matrix)
    from workbench.configs.paths import needs_checkout

    needs_checkout(config_directory, f"changing {', '.join(tracked)} (it changes what Nix builds)")
    with locked_directory(config_directory):
        document = load_document(path)
        for key, value in tracked.items():
            stored: Any = value
            if isinstance(value, tuple):
                stored = tomlkit.array()
                stored.extend(value)
            if key not in document:
                document.add(tomlkit.nl())
                document.add(tomlkit.comment(SPECS[key].meaning))
            document[key] = stored
        text = tomlkit.dumps(document)
        settings = _validate(document.unwrap(), path, text, context)
        write_atomically(path, text)
    return _with_user_values(settings, context)


def set_setting(config_directory: Path, matrix: Matrix, key: str, value: Any) -> BuildSettings:
    """Change one setting (see set_settings)."""
    return set_settings(config_directory, matrix, {key: value})

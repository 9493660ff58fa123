"""Per-user, per-host settings: the user's config directory's settings.toml, never a checkout's.

What belongs here changes how this user works on this host and never what Nix builds: the
compile jobs and the derivations built at once (`nix build --cores/--max-jobs`, which leave the
derivation's hash alone), the per-job memory estimates of this host, the default checkout, the
TUI's theme and key bindings. What changes a derivation (CUDA architectures, nvcc threads,
optimisation flags, the ORT release) stays in the checkout's tracked configs/, where the flake
reads it. Writing a per-user setting therefore never dirties a repository.

The file (XDG: ~/.config/workbench/settings.toml; $WORKBENCH_USER_CONFIG_DIR moves it) is made
private to its user (0700 directory, 0600 file) and written atomically, keeping comments.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from workbench.configs.paths import user_config_dir
from workbench.errors import ConfigError

USER_SETTINGS_FILE = "settings.toml"
# Build settings kept per user and host: settings.toml keys of workbench.configs.settings.
BUILD_KEYS = ("ninja_jobs", "max_jobs", "cxx_job_memory_gb", "cuda_job_memory_gb")
# The build screen's panes are drawn every this many seconds (`refresh`; htop's default is
# 1.5 s, btop's 2 s, top's 3 s); the supervisor samples once a second whatever it is.
REFRESH_DEFAULT_S = 2
REFRESH_RANGE = (1, 60)
# Settings of the workbench itself, kept only here.
OWN_KEYS = {
    "checkout": "the checkout used when the current directory is in none (a directory with "
    "configs/; `workbench init DIR` writes one)",
    "theme": "the TUI's colour theme (a Textual theme name, e.g. textual-dark)",
    "refresh": "seconds between redraws of the build screen's processes, graphs and log "
    f"(whole seconds {REFRESH_RANGE[0]}-{REFRESH_RANGE[1]}, default {REFRESH_DEFAULT_S}; "
    "as htop's -d): the build's samples stay once a second",
}
KEYS_TABLE = "keys"  # [keys] binding-id = "key", remapping the TUI's bindings
_HEADER = (
    "# The workbench's per-user, per-host settings (never in a checkout: nothing here changes\n"
    "# what Nix builds). Edit here or with `workbench config set KEY VALUE`.\n"
)
_KEY_NAME = re.compile(r"^[A-Za-z0-9_+\-]+(,[A-Za-z0-9_+\-]+)*$")


def user_settings_path() -> Path:
    """The per-user settings file."""
    return user_config_dir() / USER_SETTINGS_FILE


def load_user_settings() -> tuple[dict[str, Any], str]:
    """The per-user file's values and text ({} and "" when there is none yet)."""
    from workbench.configs.toml_files import load_toml, read_text

    path = user_settings_path()
    if not path.is_file():
        return {}, ""
    return load_toml(path), read_text(path)


def _line(text: str, key: str) -> str:
    from workbench.configs.toml_files import line_of_key

    line = line_of_key(text, key)
    return f":{line}" if line else ""


def default_checkout() -> tuple[Path, str] | None:
    """The default checkout the user named (`checkout`), and the file that names it."""
    data, text = load_user_settings()
    value = data.get("checkout")
    if value is None:
        return None
    path = user_settings_path()
    if not isinstance(value, str) or not value:
        raise ConfigError(
            f"{path}{_line(text, 'checkout')}: checkout = {value!r}: refused (not a directory "
            "name); allowed: a checkout's directory, such as one `workbench init DIR` wrote"
        )
    checkout = Path(value).expanduser()
    if not (checkout / "configs" / "matrix.toml").is_file():
        raise ConfigError(
            f"{path}{_line(text, 'checkout')}: checkout = {value!r}: refused ({checkout}/configs/"
            "matrix.toml does not exist); allowed: a checkout's directory, such as one "
            "`workbench init DIR` wrote (or delete the line)"
        )
    return checkout, str(path)


def check_own(key: str, value: Any) -> Any:
    """A checked value for one of OWN_KEYS, or ConfigError saying what is allowed."""
    path = user_settings_path()
    if key == "checkout":
        checkout = Path(str(value)).expanduser().resolve()
        if not (checkout / "configs" / "matrix.toml").is_file():
            raise ConfigError(
                f"{path}: checkout = {value!r}: refused ({checkout}/configs/matrix.toml does "
                "not exist); allowed: a checkout's directory (`workbench init DIR` writes one)"
            )
        return str(checkout)
    if key == "theme":
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_\-]+", value):
            raise ConfigError(
                f"{path}: theme = {value!r}: refused (not a theme name); allowed: a Textual "
                "theme name such as textual-dark, textual-light, nord, gruvbox"
            )
        return value
    if key == "refresh":
        return _refresh_seconds(value, f"{path}: refresh = {value!r}")
    raise ConfigError(f"unknown per-user setting {key!r}; settings: {', '.join(OWN_KEYS)}")


def get_own(key: str) -> Any:
    """One of OWN_KEYS as the file has it (None when unset)."""
    if key not in OWN_KEYS:
        raise ConfigError(f"unknown per-user setting {key!r}; settings: {', '.join(OWN_KEYS)}")
    data, _ = load_user_settings()
    return data.get(key)


def _refresh_seconds(value: Any, where: str) -> int:
    low, high = REFRESH_RANGE
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or not low <= int(text) <= high:
        raise ConfigError(
            f"{where}: refused (not a whole number of seconds from {low} to {high}); allowed: "
            f"{low}-{high}, e.g. 1 for a redraw every second (default {REFRESH_DEFAULT_S})"
        )
    return int(text)


def refresh_seconds() -> int:
    """`refresh`, checked: seconds between redraws of the build screen's panes."""
    data, text = load_user_settings()
    value = data.get("refresh")
    if value is None:
        return REFRESH_DEFAULT_S
    where = f"{user_settings_path()}{_line(text, 'refresh')}: refresh = {value!r}"
    return _refresh_seconds(value, where)


def key_bindings() -> dict[str, str]:
    """[keys]: binding id -> keys (comma-separated), checked; {} when none are remapped."""
    data, text = load_user_settings()
    table = data.get(KEYS_TABLE, {})
    path = user_settings_path()
    if not isinstance(table, dict):
        raise ConfigError(
            f"{path}{_line(text, KEYS_TABLE)}: {KEYS_TABLE} must be a table of "
            'binding-id = "key" lines'
        )
    for binding, keys in table.items():
        if not isinstance(keys, str) or not _KEY_NAME.match(keys):
            raise ConfigError(
                f"{path}: [keys] {binding} = {keys!r}: refused (not a key name); allowed: "
                'Textual key names, comma-separated, e.g. "ctrl+b" or "f5,ctrl+r"'
            )
    return dict(table)


def write_user_settings(changes: dict[str, Any], keys: dict[str, str] | None = None) -> Path:
    """Set these top-level values (and [keys] entries) in the per-user file, keeping its
    comments; the directory is made 0700 and the file 0600. Returns the file's path."""
    import tomlkit

    from workbench.configs.toml_files import load_document, locked_directory, write_atomically

    path = user_settings_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    with locked_directory(path.parent):
        document = load_document(path) if path.is_file() else tomlkit.parse(_HEADER)
        for key, value in changes.items():
            stored: Any = value
            if isinstance(value, tuple):
                stored = tomlkit.array()
                stored.extend(value)
            document[key] = stored  # tomlkit keeps top-level keys above [keys]
        if keys:
            table = document.setdefault(KEYS_TABLE, tomlkit.table())
            for binding, value in keys.items():
                table[binding] = value
        text = tomlkit.dumps(document)
        new = not path.exists()
        write_atomically(path, text)
        if new:
            os.chmod(path, 0o600)
    return path

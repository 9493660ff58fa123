"""Where the workbench finds its configs and keeps its state."""

from __future__ import annotations

import os
from pathlib import Path

from workbench.errors import ConfigError

CONFIG_ENV = "WORKBENCH_CONFIG"
STATE_ENV = "WORKBENCH_STATE_DIR"
REQUIRED_CONFIG_FILES = ("matrix.toml", "flavours.toml", "settings.toml")


def repo_root() -> Path:
    """The checkout this package lives in (its configs/, patches/ and flake.nix)."""
    return Path(__file__).resolve().parent.parent


def _default_config_dir() -> Path:
    """The checkout's configs/; for an installed package, the nearest configs/ above the cwd."""
    beside_package = repo_root() / "configs"
    if (beside_package / "matrix.toml").is_file():
        return beside_package
    for directory in (Path.cwd(), *Path.cwd().parents):
        if (directory / "configs" / "matrix.toml").is_file():
            return directory / "configs"
    return beside_package


def config_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--config`, else $WORKBENCH_CONFIG, else the repository's configs/ folder."""
    chosen = explicit or os.environ.get(CONFIG_ENV)
    directory = Path(chosen).expanduser() if chosen else _default_config_dir()
    if not directory.is_dir():
        origin = "--config" if explicit else (CONFIG_ENV if chosen else "the repository")
        raise ConfigError(
            f"{directory}: config directory (from {origin}) does not exist; it must hold "
            f"{', '.join(REQUIRED_CONFIG_FILES)} (copy the repository's configs/ to start)"
        )
    return directory


def state_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--state-dir`, else $WORKBENCH_STATE_DIR, else the XDG state directory."""
    chosen = explicit or os.environ.get(STATE_ENV)
    if chosen:
        return Path(chosen).expanduser()
    import platformdirs  # imported here: only commands that keep state pay for it

    return Path(platformdirs.user_state_dir("workbench"))


def patches_dir(config_directory: Path) -> Path:
    """patches/ beside the config directory when there is one, else the repository's."""
    beside = config_directory.parent / "patches"
    return beside if beside.is_dir() else repo_root() / "patches"

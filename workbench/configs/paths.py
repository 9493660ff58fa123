"""Where the workbench finds its configs and keeps its state.

The config directory is, in this order: `--config`, $WORKBENCH_CONFIG, the configs/ of the
checkout the current directory is in, the checkout the user named as their default
(`checkout` in the per-user settings file, `workbench.configs.user_settings`), the checkout
this package runs from (an editable install), and last the defaults installed with the package
(read-only: building needs a flake, which `workbench init DIR` writes).
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.errors import ConfigError

CONFIG_ENV = "WORKBENCH_CONFIG"
STATE_ENV = "WORKBENCH_STATE_DIR"
USER_CONFIG_ENV = "WORKBENCH_USER_CONFIG_DIR"
APP_NAME = "workbench"
REQUIRED_CONFIG_FILES = ("matrix.toml", "flavours.toml", "settings.toml")
# What a checkout holds beside the package's sources, as the wheel carries it under
# workbench/_data/ (pyproject.toml's force-include) and `workbench init DIR` writes it out.
CHECKOUT_FILES = (
    "flake.nix",
    "nix",
    "configs",
    "patches",
    ".flox",
    "LICENSE",
    "README.md",
    "pyproject.toml",
    "hatch_build.py",  # pyproject.toml's build hook: the flake's `workbench` package needs it
)


def repo_root() -> Path:
    """The checkout this package lives in (its configs/, patches/ and flake.nix)."""
    return Path(__file__).resolve().parents[2]  # workbench/configs/paths.py


def packaged_data() -> Path:
    """The installed package's copy of the checkout's files (workbench/_data/ in the wheel); for
    a package run from its checkout (an editable install), the checkout itself."""
    installed = Path(__file__).resolve().parents[1] / "_data"
    if (installed / "configs" / "matrix.toml").is_file():
        return installed
    return repo_root()


def packaged_configs() -> Path:
    """The default configs installed with the package."""
    return packaged_data() / "configs"


def is_packaged_defaults(config_directory: Path) -> bool:
    """Whether `config_directory` is the installed package's own read-only copy (not a
    checkout's: no flake the user may edit, nothing of theirs to write)."""
    installed = Path(__file__).resolve().parents[1] / "_data" / "configs"
    try:
        return config_directory.resolve() == installed.resolve()
    except OSError:
        return False


def find_checkout_configs(start: Path) -> Path | None:
    """The configs/ of the checkout `start` is in: the nearest directory above it holding both
    configs/matrix.toml and the flake.nix that reads them."""
    for directory in (start, *start.parents):
        if (directory / "configs" / "matrix.toml").is_file() and (
            directory / "flake.nix"
        ).is_file():
            return directory / "configs"
    return None


def user_config_dir() -> Path:
    """$WORKBENCH_USER_CONFIG_DIR, else the user's config directory (XDG: ~/.config/workbench):
    per-user, per-host settings that no checkout tracks."""
    chosen = os.environ.get(USER_CONFIG_ENV)
    if chosen:
        return Path(chosen).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME))


def _default_config_dir() -> tuple[Path, str]:
    """The configs/ to use when neither --config nor $WORKBENCH_CONFIG names one, and where
    that choice came from."""
    try:
        here = Path.cwd()
    except OSError:  # the current directory was deleted
        here = None
    found = find_checkout_configs(here) if here else None
    if found is not None:
        return found, "the current directory's checkout"
    from workbench.configs.user_settings import default_checkout

    default = default_checkout()
    if default is not None:
        path, where = default
        return path / "configs", f"the default checkout in {where}"
    beside_package = repo_root() / "configs"
    if (beside_package / "matrix.toml").is_file():
        return beside_package, "the checkout this package runs from"
    return packaged_configs(), "the defaults installed with the package"


def config_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--config`, else $WORKBENCH_CONFIG, else the current tree's configs/, else the user's
    default checkout, else the package's own (see the module's docstring)."""
    chosen = explicit or os.environ.get(CONFIG_ENV)
    if chosen:
        directory = Path(chosen).expanduser()
        origin = "--config" if explicit else CONFIG_ENV
    else:
        directory, origin = _default_config_dir()
    if not directory.is_dir():
        raise ConfigError(
            f"{directory}: config directory (from {origin}) does not exist; it must hold "
            f"{', '.join(REQUIRED_CONFIG_FILES)} (`workbench init DIR` writes a checkout with "
            "one)"
        )
    return directory


def state_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--state-dir`, else $WORKBENCH_STATE_DIR, else the XDG state directory."""
    chosen = explicit or os.environ.get(STATE_ENV)
    if chosen:
        return Path(chosen).expanduser()
    import platformdirs  # imported here: only commands that keep state pay for it

    return Path(platformdirs.user_state_dir(APP_NAME))


def patches_dir(config_directory: Path) -> Path:
    """patches/ beside the config directory when there is one, else the package's."""
    beside = config_directory.parent / "patches"
    return beside if beside.is_dir() else packaged_data() / "patches"


def needs_checkout(config_directory: Path, what: str) -> None:
    """Refuse `what` (such as "building") on the installed package's read-only defaults,
    saying how to get a checkout of one's own."""
    if is_packaged_defaults(config_directory):
        raise ConfigError(
            f"{config_directory}: these are the defaults installed with the package (read-only, "
            f"no flake of yours); {what} needs a checkout: run `workbench init DIR`, then work "
            "in DIR (or pass --config DIR/configs, set $WORKBENCH_CONFIG, or "
            "`workbench config set checkout DIR` to make it your default)"
        )

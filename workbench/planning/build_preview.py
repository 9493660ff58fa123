"""What the plan of a build warns about its configs (`planning.plan` is the plan itself)."""

from __future__ import annotations

from pathlib import Path


def config_not_read_warning(config_directory: Path, flake: Path) -> str | None:
    """One line when the Nix build will not read `config_directory`: the flake evaluates the
    configs/ beside its own flake.nix (nix/config.nix's `configDir ? ../configs`), so a
    `--config DIR` elsewhere changes what the workbench shows and plans, not what is built."""
    chosen = config_directory.resolve()
    read = (flake / "configs").resolve()
    if chosen == read or not read.is_dir():  # a flake without configs/ is not ours to explain
        return None
    # The job counts are command-line options (--cores, --max-jobs): those do reach it.
    return (
        f"the Nix build evaluates {read}, not the chosen config directory {chosen}: only "
        f"its job counts reach the build (keep it as configs/ beside a flake.nix, or edit "
        f"{read})"
    )

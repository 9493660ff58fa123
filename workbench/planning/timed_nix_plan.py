"""Nix's plan for a `nix build` argv, with each derivation's last time from the history."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from workbench.flake.nix_plan import NixPlan
    from workbench.history.store import History


def nix_plan_for(history: History, cwd: Path, argv: Sequence[str]) -> NixPlan:
    """Nix's plan (workbench.flake.nix_plan) for the installables of a `nix build` argv, with
    each derivation's last time from the history."""
    from workbench.flake.nix_plan import plan_from_nix

    installables = [item for item in argv if item.startswith(".#")]
    return plan_from_nix(cwd, installables, history.last_derivation_times)

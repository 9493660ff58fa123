"""What the Nix tests share: the configuration Nix runs with here, and the skip without Nix."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# Flakes on, no sandbox (Debian's nix-bin has none), no binary cache (no network).
NIX_CONFIG = "experimental-features = nix-command flakes\nsandbox = false\nsubstituters ="

needs_nix = [
    pytest.mark.nix,
    pytest.mark.skipif(
        shutil.which("nix-instantiate") is None,
        reason="nix-instantiate is not installed (Debian: apt-get install nix-bin)",
    ),
]


def nix_env(tmp_path: Path) -> dict[str, str]:
    """The environment for a Nix command: NIX_CONFIG above and a private cache directory."""
    env = dict(os.environ)
    env["NIX_CONFIG"] = NIX_CONFIG
    env["XDG_CACHE_HOME"] = str(tmp_path / "nix-cache")
    return env

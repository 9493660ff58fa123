"""The skip of a test that needs programs this machine may lack: one mark for every such test,
naming the programs (scripts/test.sh installs them; CI has them all, so nothing skips there)."""

from __future__ import annotations

import shutil

import pytest


def needs(*tools: str) -> pytest.MarkDecorator:
    """Skip unless every one of `tools` is on PATH; the reason names them all."""
    names = ", ".join(tools[:-1]) + (" and " if len(tools) > 1 else "") + tools[-1]
    return pytest.mark.skipif(
        any(shutil.which(tool) is None for tool in tools),
        reason=f"needs {names} (scripts/test.sh installs them)",
    )


needs_ninja = needs("ninja")

"""The skip of a test that needs programs this machine may lack: one mark for every such test,
naming the programs (scripts/test.sh installs them; CI has them all, so nothing skips there)."""

from __future__ import annotations

import shutil

import pytest


def needs(*tools: str, debian: str | None = None) -> pytest.MarkDecorator:
    """Skip unless every one of `tools` is on PATH; the reason names them all (and the Debian
    package that has them, when given)."""
    names = ", ".join(tools[:-1]) + (" and " if len(tools) > 1 else "") + tools[-1]
    package = f"Debian: {debian}; " if debian else ""
    return pytest.mark.skipif(
        any(shutil.which(tool) is None for tool in tools),
        reason=f"needs {names} ({package}scripts/test.sh installs them)",
    )


needs_ninja = needs("ninja")

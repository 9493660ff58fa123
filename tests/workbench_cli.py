"""`python -m workbench ...` as a user runs it, from the repository, for the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_workbench(
    *args: str,
    state: Path | None = None,
    config: Path | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """The real CLI with these words (and `--state-dir`, `--config` when given; `env` added to
    this process's environment), captured."""
    options = [
        *(["--state-dir", str(state)] if state else []),
        *(["--config", str(config)] if config else []),
    ]
    return subprocess.run(
        [sys.executable, "-m", "workbench", *options, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **env} if env else None,
        timeout=60,
        check=False,
    )

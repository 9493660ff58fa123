"""Running a probe command (nvidia-smi, nix eval, nix path-info) bounded in time.

Each runs in its own process group, so that past the timeout the whole group is killed: a
wedged driver or a Nix fetch can leave the command, or what it started, blocked for good.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path


def run_bounded(
    argv: Sequence[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` (stdin closed, output captured as text); on timeout kill its whole process
    group and raise subprocess.TimeoutExpired. FileNotFoundError when the program is missing."""
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(list(argv), process.returncode, stdout, stderr)

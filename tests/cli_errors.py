"""What the tests hold every refused command to: one `workbench: error:` line, exit 2."""

from __future__ import annotations

import subprocess


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The command's stderr, after checking it is exactly one error line with exit status 2."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("workbench: error: "), result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    return result.stderr

"""scripts/run.sh refuses an interpreter it cannot use with one line, before making a .venv.

Python 3.9 cannot be installed here (Debian ships 3.11, and there is no network to fetch
another), so the old interpreter is a STAND-IN: a shell script that answers run.sh's two
questions (the `sys.version_info < (3, 10)` check and `platform.python_version()`) as CPython
3.9.18 does. Only $PYTHON is under test; the install itself is exercised by .ci/run, which
runs scripts/test.sh from a fresh clone."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STANDIN_PYTHON_39 = """#!/bin/sh
# STAND-IN for CPython 3.9.18: `-c CODE` answers as it would for run.sh's two probes.
case "$2" in
  *version_info*) exit 1 ;;
  *python_version*) echo 3.9.18 ;;
  *) exit 1 ;;
esac
"""


def run_script(tmp_path: Path, python: str) -> subprocess.CompletedProcess[str]:
    copy = tmp_path / "clone"
    (copy / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "run.sh", copy / "scripts" / "run.sh")
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    return subprocess.run(
        ["bash", str(copy / "scripts" / "run.sh"), "--version"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHON": python},
        timeout=60,
        check=False,
    )


def test_an_old_python_is_one_clear_line(tmp_path: Path) -> None:
    old = tmp_path / "standin-python3.9"
    old.write_text(STANDIN_PYTHON_39)
    old.chmod(0o755)
    result = run_script(tmp_path, str(old))
    assert result.returncode == 2
    assert result.stderr == (
        f"scripts/run.sh: error: {old} is Python 3.9.18; the workbench needs Python 3.10 or "
        "newer (set PYTHON, e.g. PYTHON=python3.12 scripts/run.sh)\n"
    )
    assert not (tmp_path / "clone" / ".venv").exists()


def test_a_missing_python_is_one_clear_line(tmp_path: Path) -> None:
    result = run_script(tmp_path, "python3.99")
    assert result.returncode == 2
    assert result.stderr == (
        "scripts/run.sh: error: python3.99 not found; set PYTHON to a Python 3.10 or newer\n"
    )

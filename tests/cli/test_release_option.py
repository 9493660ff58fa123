"""`--ort VERSION` reaches every command that builds or checks a release: an unknown release is
one `workbench: error:` line naming the offered ones (exit 2), and a known one picks the names
that carry it (real processes over the repository's configs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CPU = "onnxruntime-python313-cpu-avx2"


def workbench(tmp_path: Path, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench", "--state-dir", str(tmp_path / "state"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["variants", "--ort", "1.21.0"],
        ["build", "cpu", "--ort", "1.21.0", "--dry-run"],
        ["iterate", "cpu", "--ort", "1.21.0"],
        ["smoke", CPU, "--ort", "1.21.0"],
    ],
)
def test_an_unknown_release_is_one_error_line_naming_the_offered(tmp_path, command) -> None:
    result = workbench(tmp_path, *command)
    assert result.returncode == 2, result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("workbench: error: ")
    assert "'1.21.0'" in line and "offered: 1.23.2, 1.24.2, 1.22.2" in line


def test_smoke_of_a_release_looks_for_that_releases_result(tmp_path) -> None:
    result = workbench(tmp_path, "smoke", CPU, "--ort", "1.24.2", cwd=tmp_path)
    assert result.returncode == 2
    assert f"no result-{CPU}-ort1_24_2 here" in result.stderr


def test_variants_of_a_release_carry_it_and_say_what_it_cannot_build(tmp_path) -> None:
    result = workbench(tmp_path, "variants", "--ort", "1.22.2", "--names")
    assert result.returncode == 0, result.stderr
    names = result.stdout.split()
    assert f"{CPU}-ort1_22_2" in names and all(n.endswith("-ort1_22_2") for n in names)
    table = workbench(tmp_path, "variants", "--ort", "1.22.2").stdout
    assert "ONNX Runtime 1.22.2 cannot build sm120: ORT 1.22.2 bundles CUTLASS 3.5.1" in table

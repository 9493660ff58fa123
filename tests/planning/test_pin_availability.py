"""What the nixpkgs pin can build, said everywhere a user meets a target.

The CUDA 12.4 variants cannot be built from the pin (nixpkgs' aliases.nix throws for
cudaPackages_12_4): `variants`, `doctor`, `build` and `build --dry-run` say so with the reason
and what to build instead, and never end in an evaluation trace. `build --dry-run` also asks
real Nix whether the target evaluates, here against a copy of the flake whose nixpkgs input is
the stand-in (tests/nix/standin-nixpkgs.nix, faithful to the pin where nix/ depends on it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from needed_tools import needs
from nix_testing import NIX_CONFIG, flake_on_the_standin, needs_nix

from workbench.configs.matrix import Matrix
from workbench.configs.variants import parse
from workbench.planning.availability import of_variant, unavailable_names

REPO = Path(__file__).resolve().parents[2]
CUDA12_4 = "onnxruntime-python312-cuda12_4-sm90-avx512"
CUDA12_9 = "onnxruntime-python313-cuda12_9-sm90-avx512"
needs_nix_command = needs("nix", debian="nix-bin")


def workbench(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=240,
        check=False,
    )


def test_thirty_variants_are_unavailable_and_each_names_its_replacement(matrix: Matrix) -> None:
    names = unavailable_names(matrix)
    assert len(names) == 30 and all("-cuda12_4-" in name for name in names)
    said = of_variant(parse(CUDA12_4, matrix), matrix)
    assert not said.evaluates
    assert said.instead == f"{CUDA12_9} (CUDA 12.9, driver ≥ 575.51.03)"
    assert of_variant(parse(CUDA12_9, matrix), matrix).evaluates


@pytest.mark.parametrize("extra", [[], ["--force"], ["--dry-run"]])
def test_build_refuses_an_unavailable_variant_in_one_line_with_what_instead(extra) -> None:
    result = workbench("build", CUDA12_4, *extra)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("workbench: error: ")
    assert "cudaPackages_12_4 was removed from nixpkgs" in lines[0]
    assert f"build {CUDA12_9} (CUDA 12.9, driver ≥ 575.51.03) instead" in lines[0]
    assert "Traceback" not in result.stderr and "trace" not in result.stderr


def test_variants_marks_them_in_the_table_and_the_json() -> None:
    document = json.loads(workbench("variants", "--json").stdout)
    by_name = {v["name"]: v for v in document["variants"]}
    assert by_name[CUDA12_4]["evaluates_at_pin"] is False
    assert "aliases.nix" in by_name[CUDA12_4]["unavailable"]
    assert by_name[CUDA12_4]["instead"].startswith(CUDA12_9)
    assert by_name[CUDA12_9]["evaluates_at_pin"] is True
    assert by_name[CUDA12_9]["unavailable"] is None
    text = workbench("variants", "--match", "sm90 avx512").stdout
    row = next(line for line in text.splitlines() if CUDA12_4 in line)
    assert row.rstrip().endswith("✗")
    assert "not offered by the flake" in text and "cuda12_9" in text
    # Which toolkits the flake offers, and from where; the reason is the corrected one: the
    # out-of-tree overlay exists and is not newer than the pin, the flake just does not take it.
    assert [(t["name"], t["offered"]) for t in document["toolkits"]] == [
        ("cuda12_4", False),
        ("cuda12_9", True),
    ]
    assert document["toolkits"][1]["how"] == "nixpkgs' cudaPackages_12_9 at the pin ed142ab"
    assert "nixos-cuda/cuda-legacy provides it" in document["toolkits"][0]["how"]
    reason = by_name[CUDA12_4]["unavailable"]
    assert "nixos-cuda/cuda-legacy's overlay provides it" in reason
    assert "newer" not in reason and "newer nixpkgs internals" not in text
    assert "✗ toolkit cuda12_4 (CUDA 12.4, Python 3.12): not offered" in text
    assert (
        "✓ toolkit cuda12_9 (CUDA 12.9, Python 3.13): offered, nixpkgs' cudaPackages_12_9" in text
    )


def test_doctor_says_per_target_whether_it_evaluates_at_the_pin(matrix: Matrix) -> None:
    document = json.loads(workbench("doctor", "--json").stdout)
    pin = document["nixpkgs_pin"]
    assert pin["nixpkgs_rev"].startswith("ed142ab")
    # 36 variants and 3 flavours: the static flavour's patch files are not in this repository
    # (patches/README.md: they are the user's), and nix/series.nix's fileOf throws for them.
    assert pin["evaluates"] == 36 + 3 and pin["does_not"] == 30 + 1
    targets = {t["name"]: t for t in pin["targets"]}
    assert targets[CUDA12_4]["evaluates"] is False
    assert targets["onnxruntime-cuda-dyn"]["evaluates"] is True
    static = targets["onnxruntime"]
    assert static["evaluates"] is False and static["instead"] is None
    assert "8 of its patches" in static["reason"] and "static-init-bridge.patch" in static["reason"]
    # No GPU here: the CPU flavour to link; cuda-static is said to be experimental, and why.
    assert document["linking"]["flavour"] == "cpu"
    assert document["linking"]["experimental"][0]["flavour"] == "cuda-static"
    assert [t["offered"] for t in pin["toolkits"]] == [False, True]
    text = workbench("doctor").stdout
    assert "At the nixpkgs pin (ed142ab)" in text
    assert "✗ toolkit cuda12_4 (CUDA 12.4, Python 3.12): not offered" in text
    assert (
        "Linking ORT into a Rust or C++ program" in text and "cuda-static is experimental" in text
    )
    assert "30 do not" in text and "1 do not: 8 of its patches" in text
    # Each target that does not evaluate is named on its own line, with what to build instead.
    listed = [line.strip() for line in text.splitlines() if line.startswith("      onnxruntime")]
    assert len(listed) == 31
    assert f"{CUDA12_4} → build {CUDA12_9} (CUDA 12.9, driver ≥ 575.51.03) instead" in listed
    assert {line.split()[0] for line in listed} == {*unavailable_names(matrix), "onnxruntime"}


def _nix_env(tmp_path: Path) -> dict[str, str]:
    return {"NIX_CONFIG": NIX_CONFIG, "XDG_CACHE_HOME": str(tmp_path / "cache")}


@needs_nix[0]
@needs_nix_command
@pytest.mark.parametrize("target", ["onnxruntime-python313-cpu-avx2", CUDA12_9, "cuda-dyn"])
def test_dry_run_asks_nix_and_says_it_evaluates(tmp_path, target) -> None:
    repo = flake_on_the_standin(tmp_path, with_static_patches=False)
    result = workbench("build", target, "--dry-run", cwd=repo, env=_nix_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "# evaluates at the pin: yes" in result.stderr
    if target.startswith("onnxruntime-python"):
        assert "unit tests and the Python import check are skipped" in result.stderr


@needs_nix[0]
@needs_nix_command
def test_dry_run_names_nixs_first_error_when_the_target_does_not_evaluate(tmp_path) -> None:
    # The static flavour's patch files are not in the repository: Nix's evaluation fails, and the
    # dry run says so in one line with Nix's own reason, before anything is built.
    repo = flake_on_the_standin(tmp_path, with_static_patches=False)
    result = workbench("build", "cuda-static", "--dry-run", cwd=repo, env=_nix_env(tmp_path))
    assert result.returncode == 1
    said = [line for line in result.stderr.splitlines() if line.startswith("workbench:")]
    assert len(said) == 1
    assert "onnxruntime does not evaluate at the pin" in said[0]
    assert "static-init-bridge" in said[0] and "is missing" in said[0]
    assert _doctor_says(repo)["onnxruntime"]["evaluates"] is False  # doctor agrees with Nix
    # With the files, it evaluates.
    repo = flake_on_the_standin(tmp_path / "with", with_static_patches=True)
    result = workbench("build", "cuda-static", "--dry-run", cwd=repo, env=_nix_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "# evaluates at the pin: yes (onnxruntime)" in result.stderr
    assert _doctor_says(repo)["onnxruntime"] == {
        "name": "onnxruntime",
        "evaluates": True,
        "reason": None,
        "instead": None,
    }


def _doctor_says(repo: Path) -> dict[str, dict]:
    """`workbench doctor --json`'s word on each target, for the checkout `repo`."""
    result = workbench("doctor", "--json", "--config", str(repo / "configs"), cwd=repo)
    assert result.returncode == 0, result.stderr
    return {t["name"]: t for t in json.loads(result.stdout)["nixpkgs_pin"]["targets"]}

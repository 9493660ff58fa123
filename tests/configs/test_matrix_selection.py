"""A matrix build's targets at the nixpkgs pin: what `--match` catches that the pin cannot build is
left out and named in one line (an explicit name that cannot build is refused), a target that
does not evaluate is refused with Nix's first error (not its "--show-trace" hint), and the note
that ISA variants' build-time checks are skipped is said before the build. The Nix side runs
real `nix` against the stand-in nixpkgs (tests/nix/standin-nixpkgs.nix), as
tests/configs/test_pin_availability.py does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from needed_tools import needs
from nix_testing import NIX_CONFIG, flake_on_the_standin, needs_nix

from workbench.configs.matrix import Matrix
from workbench.configs.variants import parse
from workbench.planning.availability import build_time_checks_notes, unavailable_names
from workbench.planning.launch import LaunchError, resolve_target
from workbench.remote.matrix_build import evaluate_targets, select_targets

CUDA12_4 = "onnxruntime-python312-cuda12_4-sm90-avx512"
needs_nix_command = needs("nix", debian="nix-bin")


def test_match_leaves_out_what_the_pin_cannot_build_and_names_it(matrix: Matrix) -> None:
    selection = select_targets([], "sm90 avx512", matrix)
    names = [t.name for t in selection.targets]
    assert names and all("-cuda12_4-" not in name for name in names)
    assert all("sm90" in name and "avx512" in name for name in names)
    left_out = [said.name for said in selection.left_out]
    expected = [n for n in unavailable_names(matrix) if "sm90" in n and "avx512" in n]
    assert left_out == expected and CUDA12_4 in left_out
    line = selection.left_out_line()
    assert line is not None and "\n" not in line
    assert line.startswith(f"--match 'sm90 avx512': left out {len(expected)} variants")
    assert all(name in line for name in left_out) and "cudaPackages_12_4" in line


def test_match_of_buildable_variants_leaves_nothing_out(matrix: Matrix) -> None:
    selection = select_targets([], "cuda12_9 sm90", matrix)
    assert selection.targets and selection.left_out == []
    assert selection.left_out_line() is None


def test_an_explicit_unavailable_name_stays_refused(matrix: Matrix) -> None:
    with pytest.raises(LaunchError, match=r"cannot be built: CUDA 12\.4 .* instead"):
        select_targets([CUDA12_4], "sm90 avx512", matrix)


def test_a_match_that_catches_only_unavailable_variants_is_refused(matrix: Matrix) -> None:
    with pytest.raises(LaunchError, match=r"every variant it catches cannot be built") as raised:
        select_targets([], "cuda12_4 sm90", matrix)
    assert "build instead: onnxruntime-python313-cuda12_9-sm90" in str(raised.value)


def test_the_build_time_checks_note_names_every_isa_variant_of_a_build(matrix: Matrix) -> None:
    one = parse("onnxruntime-python313-cuda12_9-sm90-avx512", matrix)
    two = parse("onnxruntime-python313-cuda12_9-sm90-avx512vnni", matrix)
    assert build_time_checks_notes([None]) is None
    single = build_time_checks_notes([one, None])
    assert single is not None and single.startswith("ORT's unit tests and the Python import")
    both = build_time_checks_notes([one, two])
    assert both is not None and "builds of 2 ISA variants" in both
    assert one.name in both and two.name in both


def _workbench(repo: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NIX_CONFIG": NIX_CONFIG, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args, "--state-dir", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        cwd=repo,
        env=env,
        timeout=240,
        check=False,
    )


@needs_nix[0]
@needs_nix_command
def test_evaluate_targets_quotes_nixs_first_error(tmp_path: Path, matrix: Matrix) -> None:
    # The static flavour's patch files are not in the repository: nix/series.nix throws.
    repo = flake_on_the_standin(tmp_path, with_static_patches=False)
    targets = [resolve_target("cuda-dyn", matrix), resolve_target("cuda-static", matrix)]
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("NIX_CONFIG", NIX_CONFIG)
        environment.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        with pytest.raises(LaunchError) as raised:
            evaluate_targets(repo, targets)
    said = str(raised.value)
    assert said.startswith(f"cuda-static: does not evaluate in {repo}: ")
    assert "patch static-init-bridge" in said and "is missing" in said
    assert "--show-trace" not in said


@needs_nix[0]
@needs_nix_command
def test_a_matrix_dry_run_says_what_it_left_out_and_the_checks_note(tmp_path: Path) -> None:
    repo = flake_on_the_standin(tmp_path, with_static_patches=False)
    # A flag of this test's own changes every output path: no other test's build of these
    # variants (the stand-in's builds are cheap) is in the store, so all of them are planned.
    settings = repo / "configs" / "settings.toml"
    text = settings.read_text()
    assert "optimization_flags = []" in text
    unique = '"-DWORKBENCH_TEST_MATRIX_SELECTION"'
    settings.write_text(text.replace("optimization_flags = []", f"optimization_flags = [{unique}]"))
    result = _workbench(repo, tmp_path, "build", "--match", "sm90 avx512", "--dry-run")
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("workbench:")]
    assert len(said) == 1 and said[0].startswith("workbench: --match 'sm90 avx512': left out")
    assert CUDA12_4 in said[0]
    assert "-cuda12_4-" not in result.stdout and ".#onnxruntime-python313-cuda12_9-sm90-avx512" in (
        result.stdout
    )
    notes = [line for line in result.stderr.splitlines() if "unit tests" in line]
    assert len(notes) == 1 and notes[0].startswith("# ORT's unit tests and the Python import")
    # A target that does not evaluate: one error line with Nix's reason, exit 2.
    result = _workbench(repo, tmp_path, "build", "cuda-dyn", "cuda-static", "--dry-run")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("workbench: error: cuda-static: does not")
    assert "static-init-bridge" in lines[0] and "--show-trace" not in lines[0]

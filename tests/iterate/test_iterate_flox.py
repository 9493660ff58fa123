"""`workbench iterate .flox/pkgs/NAME.nix`: a Flox package file as the iterate target, end to
end with real Nix, bash, git, cmake, ninja and g++ under the real supervisor.

The package file is the one `workbench flox sync` writes (workbench/flox/sync.py), in the
stand-in flake's repository (tests/iterate/standin_flake: a STAND-IN for the builder flake's
onnxruntime-cpu; its nix/flox-package.nix stands in for the repository's). Flox calls such a
file with callPackage from its nixpkgs; here that nixpkgs is `<workbench-nixpkgs>`, the
STAND-IN nixpkgs tests/nix/standin-nixpkgs.nix, as tests/standins/standin-flox has it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from iterate_loop import Loop, needs_tools
from nix_testing import needs_nix

from workbench.configs.matrix import load_matrix
from workbench.configs.settings import set_setting
from workbench.flox.sync import package_file
from workbench.iterate.check import cmake_definitions, read_cache

REPO = Path(__file__).resolve().parent.parent.parent
STANDIN_NIXPKGS = REPO / "tests" / "nix" / "standin-nixpkgs.nix"
ATTR = "onnxruntime-cpu"


def _flox_package(loop: Loop) -> Path:
    """.flox/pkgs/onnxruntime-cpu.nix as `workbench flox sync` writes it, and the Flox
    environment around it; the stand-in nixpkgs on the Nix search path."""
    assert loop.repo is not None
    pkgs = loop.repo / ".flox" / "pkgs"
    pkgs.mkdir(parents=True)
    (loop.repo / ".flox" / "env").mkdir()
    (loop.repo / ".flox" / "env" / "manifest.toml").write_text("version = 1\n")
    path = pkgs / f"{ATTR}.nix"
    path.write_text(package_file(ATTR, ["# ONNX Runtime, the stand-in's CPU flavour"]))
    loop.bench.extra_env["NIX_PATH"] = f"workbench-nixpkgs={STANDIN_NIXPKGS}"
    return path


def _nix_eval(loop: Loop, *args: str) -> str:
    done = subprocess.run(
        ["nix", "eval", *args], env=loop.bench.env(), capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.mark.slow
@needs_tools
@needs_nix[0]
@needs_nix[1]
def test_a_flox_package_file_is_iterated_in_its_own_derivations_environment(loop: Loop) -> None:
    flox_file = _flox_package(loop)
    workspace = loop.state / "workspaces" / "cpu.flox"
    first = loop.iterate_json("--no-smoke", target=str(flox_file))
    assert first["workspace"]["package_file"] == str(flox_file)
    assert first["workspace"]["src"] == str(workspace / "src")
    assert not loop.workspace.exists()  # the flake's workspace is another one
    # The file gives the flake's own derivation (what `nix build .#NAME` builds): one .drv.
    assert first["workspace"]["drv_path"] == _nix_eval(loop, "--raw", f"{loop.repo}#{ATTR}.drvPath")
    record = loop.bench.record(first["build"]["id"])
    assert "--package-file" in record.argv and str(flox_file) in record.argv
    log = Path(record.log_path).read_text()
    assert "--impure --expr" in log and "callPackage" in log
    for phase in ("unpackPhase", "patchPhase", "configurePhase"):
        assert f"Running phase: {phase}" in log
    commits = subprocess.run(
        ["git", "log", "--format=%s"], cwd=workspace / "src", capture_output=True, text=True
    ).stdout.splitlines()
    assert commits[0] == "nixpkgs: the derivation's postPatch"
    assert commits[-2:] == ["nixpkgs: the derivation's own patches", "upstream source"]
    cache = read_cache(workspace / "src" / "build" / "CMakeCache.txt")
    flake_flags = _nix_eval(loop, "--json", f"{loop.repo}#{ATTR}.cmakeFlags")
    flags = cmake_definitions(json.loads(flake_flags))
    assert flags and {name: cache.get(name) for name in flags} == flags

    # --check: the Flox file built cleanly by Nix, against the workspace.
    check = loop.iterate("--check", target=str(flox_file))
    assert check.returncode == 0, check.stderr[-3000:]
    assert json.loads(check.stdout)["agrees"] is True

    # One edited file: the build tool alone in the recorded environment; one unit rebuilt.
    light = workspace / "src" / "light_5.cc"
    light.write_text(light.read_text().replace("+ 5);", "+ 55);"))
    cycle = loop.iterate_json("--no-smoke", target=str(flox_file))
    assert cycle["steps"] == [] and cycle["ninja"]["sources"] == ["light_5.cc"]

    # A setting the derivation reads changes it: seen through the Flox file too, configure
    # runs again and says why.
    set_setting(loop.configs, load_matrix(loop.configs), "nvcc_threads", "2")
    changed = loop.iterate_json("--no-smoke", target=str(flox_file))
    assert any("the derivation changed" in step for step in changed["steps"])
    assert changed["configure_reasons"] == [
        "cmakeFlags: -Donnxruntime_NVCC_THREADS=1 -> -Donnxruntime_NVCC_THREADS=2"
    ]


def test_a_file_outside_flox_pkgs_or_of_an_unknown_package_is_one_error(loop: Loop) -> None:
    stray = loop.repo / "stray.nix"
    stray.write_text("{ }: null\n")
    outside = loop.iterate(target=str(stray), json=False)
    assert outside.returncode == 2
    assert outside.stderr.count("workbench: error:") == 1 and "Traceback" not in outside.stderr
    assert "is not in a Flox environment's .flox/pkgs/ directory" in outside.stderr
    unknown = loop.repo / ".flox" / "pkgs" / "hello.nix"
    unknown.parent.mkdir(parents=True)
    unknown.write_text("{ hello }: hello\n")
    result = loop.iterate(target=str(unknown), json=False)
    assert result.returncode == 2 and result.stderr.count("workbench: error:") == 1
    assert "its package hello is none of the variants and flavours" in result.stderr
    missing = loop.iterate(target=str(loop.repo / ".flox" / "pkgs" / "gone.nix"), json=False)
    assert missing.returncode == 2 and "no such Flox package file" in missing.stderr

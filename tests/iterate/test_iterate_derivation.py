"""`workbench iterate` in the derivation's own environment, end to end, against the stand-in
flake (tests/iterate/standin_flake: a STAND-IN for the builder flake's onnxruntime-cpu, built
by real Nix) with real bash, git, cmake, ninja and g++ under the real supervisor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from iterate_loop import Loop, needs_tools
from nix_testing import needs_nix
from patch_fixture import diff_of, edited

from workbench.configs.matrix import load_matrix
from workbench.configs.settings import set_setting
from workbench.iterate.check import cmake_definitions, read_cache

pytestmark = [needs_tools, *needs_nix, pytest.mark.slow]

SUBJECTS = [
    "nixpkgs: the derivation's postPatch",
    "tune-light-7: light_7 allocates seventy more",
    "tune-light-3: light_3 returns a constant",
    "nixpkgs: the derivation's own patches",
    "upstream source",
]
# A consumer of the library: loads it by name (as ORT's bindings dlopen libonnxruntime.so)
# and says whether the copy it got is the one in the workspace's build directory.
CONSUMER = (
    "import ctypes, sys; ctypes.CDLL('libfixture.so'); "
    "sys.exit(0 if sys.argv[1] + '/libfixture.so' in open('/proc/self/maps').read() else 1)"
)


def _derivation(loop: Loop, attribute: str) -> object:
    done = subprocess.run(
        ["nix", "eval", "--json", f"{loop.repo}#onnxruntime-cpu.{attribute}"],
        env=loop.bench.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def test_the_workspace_is_made_and_rebuilt_in_the_derivations_environment(loop: Loop) -> None:
    first = loop.iterate_json("--smoke", "--", sys.executable, "-c", CONSUMER, str(loop.build))
    # unpackPhase's tree, nixpkgs' own patches as one commit, the series, then postPatch (in
    # patchPhase's order: all the patches, then postPatch).
    assert loop.git("log", "--format=%s").splitlines() == SUBJECTS
    assert loop.git("show", "--name-only", "--format=", "HEAD~3").split() == ["light_1.cc"]
    assert loop.git("show", "--name-only", "--format=", "HEAD").split() == ["CMakeLists.txt"]
    assert "standin_dep.h" in (loop.src / "light_1.cc").read_text()
    assert "add_library(fixture SHARED" in (loop.src / "CMakeLists.txt").read_text()
    assert first["series_change"]["created"] is True
    assert [p["name"] for p in first["patches"]] == ["tune-light-3", "tune-light-7"]
    assert first["configured"] is True and first["configure_reasons"] == ["the workspace is new"]
    # The supervisor ran the phases, then the build.
    record = loop.bench.record(first["build"]["id"])
    assert record.name == "iterate cpu" and "workbench.iterate.phases" in record.argv
    log = Path(record.log_path).read_text()
    for phase in ("unpackPhase", "patchPhase", "configurePhase"):
        assert f"Running phase: {phase}" in log
    # The cache holds exactly the derivation's flags, its CXXFLAGS and its wrapped compiler
    # (whose -isystem brought the dependency's header to light_1.cc).
    cache = read_cache(loop.build / "CMakeCache.txt")
    flags = cmake_definitions(_derivation(loop, "cmakeFlags"))
    assert flags and {name: cache.get(name) for name in flags} == flags
    assert cache["CMAKE_CXX_FLAGS"] == _derivation(loop, "CXXFLAGS") == "-O0"
    assert cache["CMAKE_CXX_COMPILER"].startswith("/nix/store/")
    assert cache["CMAKE_CXX_COMPILER"].endswith("-standin-cc-wrapper/bin/c++")
    assert "light_1.cc" in first["ninja"]["sources"]
    # The smoke run loaded the library the build just linked.
    assert first["smoke"]["status"] == "passed", first["smoke"]

    # One edited file: the build tool alone, in the recorded environment; one unit rebuilt.
    light = loop.src / "light_5.cc"
    light.write_text(light.read_text().replace("+ 5);", "+ 55);"))
    cycle = loop.iterate_json()
    assert cycle["steps"] == [] and cycle["configured"] is False
    assert cycle["ninja"]["sources"] == ["light_5.cc"]
    assert cycle["ninja"]["linked"] == [
        "Linking CXX shared library libfixture.so",
        "Linking CXX executable fixture_main",
    ]
    record = loop.bench.record(cycle["build"]["id"])
    assert record.argv[:2] == ("bash", "--norc") and "env-build.sh" in record.argv[6]
    assert record.argv[7:10] == ("ninja", "-C", str(loop.build))
    assert cycle["smoke"]["status"] == "passed"

    # A changed series patch: the derivation changed, its environment is recorded again, the
    # patch re-applied (the user's edit kept), configure not run (patches are no input of it).
    patch_file = loop.series.directory / "tune-light-3.patch"
    patch_file.write_text(
        diff_of({"light_3.cc": edited(loop.source, "light_3.cc", "+ digits;", "+ 33;")})
    )
    patched = loop.iterate_json()
    assert any("the derivation changed" in step for step in patched["steps"])
    assert patched["series_change"]["replaced_from"] == 0
    assert patched["series_change"]["edits_kept"] == ["light_5.cc"]
    assert "+ 33;" in (loop.src / "light_3.cc").read_text()
    assert patched["configured"] is False
    assert patched["ninja"]["sources"] == ["light_3.cc"]

    # A changed setting feeds cmakeFlags: configure runs again, says why, the cache follows.
    set_setting(loop.configs, load_matrix(loop.configs), "nvcc_threads", "2")
    changed = loop.iterate_json()
    assert changed["configured"] is True
    assert changed["configure_reasons"] == [
        "cmakeFlags: -Donnxruntime_NVCC_THREADS=1 -> -Donnxruntime_NVCC_THREADS=2"
    ]
    assert read_cache(loop.build / "CMakeCache.txt")["onnxruntime_NVCC_THREADS"] == "2"
    assert changed["ninja"]["sources"] == []  # no compile command changed
    text = loop.iterate(json=False)
    assert "configure: not run (its inputs are unchanged)" in text.stdout


def test_check_says_where_the_workspace_and_nix_build_disagree(loop: Loop) -> None:
    loop.iterate_json("--no-smoke")
    agrees = loop.iterate("--check")
    assert agrees.returncode == 0, agrees.stderr[-3000:]
    document = json.loads(agrees.stdout)
    assert document["agrees"] is True and document["disagreements"] == []
    assert len(document["checked"]) == 3
    assert document["nix_build"].startswith("/nix/store/")

    light = loop.src / "light_5.cc"
    light.write_text(light.read_text().replace("+ 5);", "+ 55);"))
    set_setting(loop.configs, load_matrix(loop.configs), "nvcc_threads", "3")
    disagrees = loop.iterate("--check")
    assert disagrees.returncode == 1, disagrees.stderr[-3000:]
    found = {(d["area"], d["what"]) for d in json.loads(disagrees.stdout)["disagreements"]}
    assert (
        "flags",
        "onnxruntime_NVCC_THREADS: the workspace's cache has '1', nix build '3'",
    ) in found
    assert ("source", "light_5.cc: your uncommitted edit (no clean build has it)") in found
    text = loop.iterate("--check", json=False)
    assert text.returncode == 1
    assert "the workspace DISAGREES with nix build" in text.stdout
    assert "flags:   2 differ" in text.stdout and "files:   agree" in text.stdout


def test_a_failed_configure_is_named_with_its_first_error_and_the_log(loop: Loop) -> None:
    loop.iterate_json("--no-smoke")
    # A cmakeFlags change the build cannot take: configure runs again, and fails.
    flake = loop.repo / "flake.nix"
    before = flake.read_text()
    flake.write_text(
        before.replace(
            '"-DFIXTURE_STANDIN:BOOL=ON"',
            '"-DFIXTURE_STANDIN:BOOL=ON" "-DCMAKE_TOOLCHAIN_FILE=/nonexistent/toolchain.cmake"',
        )
    )
    failed = loop.iterate("--no-smoke", json=False)
    assert failed.returncode == 2, failed.stderr[-3000:]
    log = loop.bench.record(2).log_path
    lines = failed.stdout.splitlines()
    configure = next(line for line in lines if line.startswith("  configure:"))
    assert configure.startswith("  configure: FAILED: CMake Error at ")
    assert configure.endswith("Could not find toolchain file: /nonexistent/toolchain.cmake")
    assert lines[lines.index(configure) + 1].strip() == f"log: {log}"
    assert "the build tool did not run (a phase failed before it)" in failed.stdout
    assert "not run" not in configure

    # The next cycle configures again (not the build tool alone on a half-configured
    # directory), and says why.
    flake.write_text(before)
    again = loop.iterate_json("--no-smoke")
    assert "the last cycle's configurePhase failed: the phases run again" in again["steps"]
    assert again["configured"] is True and again["failed_phase"] is None
    assert again["configure_reasons"][0] == "configurePhase failed last time"
    assert read_cache(loop.build / "CMakeCache.txt").get("CMAKE_TOOLCHAIN_FILE") is None

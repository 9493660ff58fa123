"""The workspace's CMake flags are the flake's own, computed in Python from the same configs.

The comparison runs nix/overrides.nix against the STAND-IN for nixpkgs (tests/nix/probe.nix,
which records the cmakeFlags and environment the flake gives the package): what
nix/overrides.nix adds must be exactly what workbench/iterate/cmake_flags.py computes.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from nix_testing import needs_nix, nix_env

from workbench.configs.matrix import load_matrix
from workbench.configs.settings import load_settings, set_settings
from workbench.iterate.cmake_flags import (
    FlakeFlags,
    cmake_source_directory,
    configure_argv,
    flake_flags,
)
from workbench.supervision.launch import resolve_target

REPO = Path(__file__).resolve().parents[2]
H100 = "onnxruntime-python313-cuda12_9-sm90-avx512"
CPU_AVX2 = "onnxruntime-python313-cpu-avx2"


def _python_flags(configs: Path, name: str) -> FlakeFlags:
    matrix = load_matrix(configs)
    return flake_flags(resolve_target(name, matrix), load_settings(configs, matrix))


def _probe(tmp_path: Path, configs: Path, name: str) -> dict:
    """What the flake gives the stand-in nixpkgs for `name` (a variant or flavour name)."""
    matrix = load_matrix(configs)
    target = resolve_target(name, matrix)
    attr = f"variants.{name}.cpp" if target.variant is not None else f"flavours.{target.attr}"
    done = subprocess.run(
        [
            "nix-instantiate",
            "--eval",
            "--strict",
            "--json",
            "tests/nix/probe.nix",
            "--argstr",
            "configDir",
            str(configs),
            "--argstr",
            "patchDir",
            str(configs.parent / "patches"),
            "-A",
            attr,
        ],
        cwd=REPO,
        env=nix_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["attrs"]


def _variable(flag: str) -> str | None:
    found = re.match(r"^-D([A-Za-z0-9_]+)(:[A-Z]+)?=", flag)
    return found.group(1) if found else None


@pytest.fixture
def configs(config_copy: Path) -> Path:
    (config_copy.parent / "patches" / "series.toml").write_text("# no patches\n")
    return config_copy


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {
            "cuda_architectures": "sm_90,12.0",
            "nvcc_threads": "4",
            "optimization_flags": "-O3 -g1",
            "nvcc_host_isa_flags": "true",
        },
    ],
    ids=["default-settings", "changed-settings"],
)
@pytest.mark.parametrize("name", [H100, "cuda-static", "cuda-hybrid", "cuda-dyn", "cpu", CPU_AVX2])
@needs_nix[0]
@needs_nix[1]
def test_python_flags_are_the_flakes_own(tmp_path: Path, configs: Path, name, settings) -> None:
    if settings:
        set_settings(configs, load_matrix(configs), settings)
    ours = _python_flags(configs, name)
    attrs = _probe(tmp_path, configs, name)
    flake = attrs["cmakeFlags"]
    # nix/overrides.nix appends its flags after nixpkgs' (whose values for the same
    # variables it drops): the tail is ours, word for word, and nothing before it sets them.
    count = len(ours.cmake_flags)
    assert flake[len(flake) - count :] == list(ours.cmake_flags)
    ours_set = {_variable(flag) for flag in ours.cmake_flags}
    assert not [flag for flag in flake[: len(flake) - count] if _variable(flag) in ours_set]
    env = attrs.get("env", {})
    assert "NIX_CFLAGS_COMPILE" not in env
    assert env.get("CXXFLAGS", "") == " ".join(ours.compile_flags)
    assert env.get("CFLAGS", "") == " ".join(ours.compile_flags)
    assert env.get("CUDAFLAGS", "") == " ".join(ours.cuda_flags)


def test_the_flags_of_a_cuda_variant_and_the_static_flavour(configs: Path) -> None:
    h100 = _python_flags(configs, H100)
    assert h100.cmake_flags == (
        "-DCMAKE_CUDA_ARCHITECTURES:STRING=90",
        "-Donnxruntime_NVCC_THREADS:STRING=1",
        "-Donnxruntime_BUILD_UNIT_TESTS:BOOL=FALSE",
    )
    # The ISA's flags (settings add none by default): C and C++ only, never nvcc's host compiles.
    assert h100.compile_flags == ("-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mfma")
    assert h100.cuda_flags == ()
    static = _python_flags(configs, "onnxruntime")  # the flake attribute works too
    assert static.cmake_flags == (
        "-DCMAKE_CUDA_ARCHITECTURES:STRING=90;120",
        "-Donnxruntime_NVCC_THREADS:STRING=1",
        "-Donnxruntime_BUILD_SHARED_LIB:BOOL=FALSE",
        "-DBUILD_SHARED_LIBS:BOOL=FALSE",
        "-Donnxruntime_ENABLE_LTO:BOOL=FALSE",
        "-Donnxruntime_BUILD_UNIT_TESTS:BOOL=FALSE",
        "-Donnxruntime_USE_NCCL:BOOL=FALSE",
    )
    assert static.compile_flags == ("-DORT_STATIC_PROVIDERS",)
    assert static.cuda_flags == ("-DORT_STATIC_PROVIDERS",)
    assert static.cuda is True


def test_configure_argv_puts_the_flags_where_cmake_reads_them(tmp_path: Path) -> None:
    flags = FlakeFlags(
        cmake_flags=(
            "-Donnxruntime_NVCC_THREADS:STRING=2",
            "-DCMAKE_C_FLAGS_RELEASE:STRING=-DNDEBUG",
            "-DCMAKE_CXX_FLAGS_RELEASE:STRING=-DNDEBUG",
        ),
        compile_flags=("-mavx2", "-O2", "-DORT_STATIC_PROVIDERS"),
        cuda_flags=("-DORT_STATIC_PROVIDERS",),
        cuda=True,
    )
    source = tmp_path / "ort"
    (source / "cmake").mkdir(parents=True)
    (source / "cmake" / "CMakeLists.txt").write_text("project(x)\n")
    assert cmake_source_directory(source) == source / "cmake"  # ORT's layout
    argv = configure_argv(flags, source, tmp_path / "build", "/usr/bin/ccache")
    assert argv[:7] == [
        "cmake",
        "-G",
        "Ninja",
        "-S",
        str(source / "cmake"),
        "-B",
        str(tmp_path / "build"),
    ]
    assert "-Donnxruntime_NVCC_THREADS:STRING=2" in argv
    assert "-DCMAKE_CXX_FLAGS=-mavx2 -O2 -DORT_STATIC_PROVIDERS" in argv
    assert "-DCMAKE_CUDA_FLAGS=-DORT_STATIC_PROVIDERS" in argv
    # settings' -O2 is the only level: the flake's Release flags keep -DNDEBUG alone.
    assert "-DCMAKE_CXX_FLAGS_RELEASE:STRING=-DNDEBUG" in argv
    assert not [arg for arg in argv if arg.startswith("-DCMAKE_CXX_FLAGS_RELEASE=")]
    assert "-DCMAKE_CUDA_COMPILER_LAUNCHER=/usr/bin/ccache" in argv
    plain = configure_argv(
        FlakeFlags((), ("-mavx2",), (), False), tmp_path / "flat", tmp_path / "b", None
    )
    assert plain[4] == str(tmp_path / "flat")  # no cmake/CMakeLists.txt: the tree itself
    assert "-DCMAKE_CXX_FLAGS_RELEASE=-O3 -DNDEBUG" in plain
    assert "-DCMAKE_CXX_COMPILER_LAUNCHER=" in plain  # cleared, never left from before
    assert not [arg for arg in plain if "CUDA" in arg]

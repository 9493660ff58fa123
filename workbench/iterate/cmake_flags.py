"""The CMake flags the flake gives a package, computed in Python from the same configs.

nix/overrides.nix's `mkOrt` adds to nixpkgs' onnxruntime:

- cmakeFlags (`ourCmakeFlags`): CMAKE_CUDA_ARCHITECTURES (settings' cuda_architectures, else
  the variant's SM; a flavour without the setting keeps nixpkgs' own value), the NVCC threads
  of a CUDA build, and for a flavour its linkage (onnxruntime_BUILD_SHARED_LIB, and
  BUILD_SHARED_LIBS off for a static one);
- NIX_CFLAGS_COMPILE: the ISA's flags, then settings' optimization_flags;
- CFLAGS / CXXFLAGS (and CUDAFLAGS for CUDA): the flavour's defines as -D flags.

`flake_flags` is that, word for word (tests/iterate/test_iterate_cmake_flags.py compares it
with what the flake gives the stand-in nixpkgs); `configure_argv` turns it into one
`cmake -G Ninja` command line for the iterate workspace, where there is no compiler wrapper:
the compile flags and defines go into CMAKE_<LANG>_FLAGS.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.errors import ConfigError

if TYPE_CHECKING:
    from workbench.configs.settings import BuildSettings
    from workbench.supervision.launch import Target

DEFINE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(=[A-Za-z0-9_.]*)?$")
OPTIMISATION_LEVEL = re.compile(r"^-O([0-3sgz]|fast)?$")


@dataclass(frozen=True)
class FlakeFlags:
    """What nix/overrides.nix adds to a package's build, as data."""

    cmake_flags: tuple[str, ...]
    """`ourCmakeFlags`: the -D flags, in the flake's order and spelling."""
    compile_flags: tuple[str, ...]
    """NIX_CFLAGS_COMPILE's words: the ISA's flags, then settings' optimization_flags."""
    define_flags: tuple[str, ...]
    """CFLAGS / CXXFLAGS (and CUDAFLAGS for CUDA): -DNAME for each of the flavour's defines."""
    cuda: bool

    def to_json(self) -> dict[str, object]:
        return {
            "cmake_flags": list(self.cmake_flags),
            "compile_flags": list(self.compile_flags),
            "define_flags": list(self.define_flags),
            "cuda": self.cuda,
        }


def _define_flag(define: str) -> str:
    if not DEFINE.match(define):
        raise ConfigError(
            f"configs/flavours.toml: defines: {define!r} is not allowed: NAME or NAME=VALUE "
            "(letters, digits and '_'; a value of letters, digits, '_' and '.')"
        )
    return f"-D{define}"


def flake_flags(target: Target, settings: BuildSettings) -> FlakeFlags:
    """The flags the flake's package for `target` (a variant or a linkage flavour) gets."""
    if target.variant is not None:
        variant = target.variant
        cuda = variant.is_gpu
        own_architectures = variant.cmake_cuda_architectures
        cpu_flags: tuple[str, ...] = variant.isa.flags
        shared: bool | None = None
        defines: tuple[str, ...] = ()
    elif target.flavour is not None:
        flavour = target.flavour
        cuda = flavour.cuda
        own_architectures = None
        cpu_flags = ()
        shared = flavour.shared
        defines = flavour.defines
    else:  # pragma: no cover - resolve_target always sets one
        raise ConfigError(f"{target.name}: neither a variant nor a flavour")
    architectures = (
        ";".join(settings.cuda_architectures) if settings.cuda_architectures else own_architectures
    )
    flags: list[str] = []
    if cuda and architectures is not None:
        flags.append(f"-DCMAKE_CUDA_ARCHITECTURES:STRING={architectures}")
    if cuda:
        flags.append(f"-Donnxruntime_NVCC_THREADS:STRING={settings.nvcc_threads}")
    if shared is True:
        flags.append("-Donnxruntime_BUILD_SHARED_LIB:BOOL=TRUE")
    elif shared is False:
        flags += ["-Donnxruntime_BUILD_SHARED_LIB:BOOL=FALSE", "-DBUILD_SHARED_LIBS:BOOL=FALSE"]
    return FlakeFlags(
        cmake_flags=tuple(flags),
        compile_flags=tuple(word for word in (*cpu_flags, *settings.optimization_flags) if word),
        define_flags=tuple(_define_flag(define) for define in defines),
        cuda=cuda,
    )


def cmake_source_directory(source: Path) -> Path:
    """Where CMake starts: ORT keeps its CMakeLists.txt in cmake/ (nixpkgs: cmakeDir ../cmake)."""
    nested = source / "cmake" / "CMakeLists.txt"
    return nested.parent if nested.is_file() else source


def ccache_launcher(enabled: bool) -> tuple[str | None, str | None]:
    """(ccache's path, a warning): the launcher to use when settings ask for ccache."""
    if not enabled:
        return None, None
    found = shutil.which("ccache")
    if found is None:
        return None, (
            "ccache = true in configs/settings.toml, but ccache is not on PATH: building "
            "without it (Debian: apt install ccache)"
        )
    return found, None


def configure_argv(
    flags: FlakeFlags,
    source: Path,
    build: Path,
    launcher: str | None = None,
) -> list[str]:
    """`cmake -G Ninja` for the workspace, with the flake's flags.

    nixpkgs' cmake hook configures a Release build; in Nix the compile flags come from the
    compiler wrapper, after CMake's own (so settings' -O2 wins over Release's -O3). Here they
    go into CMAKE_C_FLAGS / CMAKE_CXX_FLAGS, and when they name an optimisation level the
    Release flags keep only -DNDEBUG, so the same level wins. Every variable is always given
    (an empty launcher included), so a value from an earlier configure never lingers in the
    cache.
    """
    compile_words = [*flags.define_flags, *flags.compile_flags]
    sets_level = any(OPTIMISATION_LEVEL.match(word) for word in flags.compile_flags)
    release = "-DNDEBUG" if sets_level else "-O3 -DNDEBUG"
    argv = [
        "cmake",
        "-G",
        "Ninja",
        "-S",
        str(cmake_source_directory(source)),
        "-B",
        str(build),
        "--no-warn-unused-cli",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
        *flags.cmake_flags,
        f"-DCMAKE_C_FLAGS={' '.join(compile_words)}",
        f"-DCMAKE_CXX_FLAGS={' '.join(compile_words)}",
        f"-DCMAKE_C_FLAGS_RELEASE={release}",
        f"-DCMAKE_CXX_FLAGS_RELEASE={release}",
        f"-DCMAKE_C_COMPILER_LAUNCHER={launcher or ''}",
        f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher or ''}",
    ]
    if flags.cuda:
        argv += [
            f"-DCMAKE_CUDA_FLAGS={' '.join(flags.define_flags)}",
            f"-DCMAKE_CUDA_COMPILER_LAUNCHER={launcher or ''}",
        ]
    return argv

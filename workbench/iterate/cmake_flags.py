"""The CMake flags the flake gives a package, computed in Python from the same configs.

nix/overrides.nix's `mkOrt` adds to nixpkgs' onnxruntime:

- cmakeFlags (`ourCmakeFlags`): CMAKE_CUDA_ARCHITECTURES (settings' cuda_architectures, else
  the variant's SM; a flavour without the setting keeps nixpkgs' own value), the NVCC threads
  of a CUDA build, for a flavour its linkage (onnxruntime_BUILD_SHARED_LIB, and
  BUILD_SHARED_LIBS and LTO off for a static one), unit tests off for a variant with ISA flags,
  and, when settings name an -O level, Release flags of -DNDEBUG alone;
- CFLAGS / CXXFLAGS: the ISA's flags, settings' optimization_flags, the flavour's defines;
- CUDAFLAGS (CUDA only): the defines, and the ISA flags as -Xcompiler when
  nvcc_host_isa_flags asks for them.

`flake_flags` is that, word for word (tests/iterate/test_iterate_cmake_flags.py compares it
with what the flake gives the stand-in nixpkgs); `configure_argv` turns it into one
`cmake -G Ninja` command line for the iterate workspace: CMake reads CFLAGS/CXXFLAGS into
CMAKE_<LANG>_FLAGS, so that is where they go here.
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
    """CFLAGS / CXXFLAGS: the ISA's flags, settings' optimization_flags, -D of each define."""
    cuda_flags: tuple[str, ...]
    """CUDAFLAGS: -D of each define, and -Xcompiler=ISA flags when settings ask for them."""
    cuda: bool

    def to_json(self) -> dict[str, object]:
        return {
            "cmake_flags": list(self.cmake_flags),
            "compile_flags": list(self.compile_flags),
            "cuda_flags": list(self.cuda_flags),
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
        own_architectures = ";".join(flavour.cuda_architectures) or None
        cpu_flags = ()
        shared = flavour.shared
        defines = flavour.defines
    else:  # pragma: no cover - resolve_target always sets one
        raise ConfigError(f"{target.name}: neither a variant nor a flavour")
    architectures = (
        ";".join(settings.cuda_architectures) if settings.cuda_architectures else own_architectures
    )
    sets_level = any(OPTIMISATION_LEVEL.match(flag) for flag in settings.optimization_flags)
    flags: list[str] = []
    if cuda and architectures is not None:
        flags.append(f"-DCMAKE_CUDA_ARCHITECTURES:STRING={architectures}")
    if cuda:
        flags.append(f"-Donnxruntime_NVCC_THREADS:STRING={settings.nvcc_threads}")
    if shared is True:
        flags.append("-Donnxruntime_BUILD_SHARED_LIB:BOOL=TRUE")
    elif shared is False:
        flags += ["-Donnxruntime_BUILD_SHARED_LIB:BOOL=FALSE", "-DBUILD_SHARED_LIBS:BOOL=FALSE"]
        flags.append("-Donnxruntime_ENABLE_LTO:BOOL=FALSE")
    if cpu_flags or target.flavour is not None:
        flags.append("-Donnxruntime_BUILD_UNIT_TESTS:BOOL=FALSE")
    if target.flavour is not None and cuda:
        flags.append("-Donnxruntime_USE_NCCL:BOOL=FALSE")
    if sets_level:
        flags += [
            "-DCMAKE_C_FLAGS_RELEASE:STRING=-DNDEBUG",
            "-DCMAKE_CXX_FLAGS_RELEASE:STRING=-DNDEBUG",
        ]
    define_flags = tuple(_define_flag(define) for define in defines)
    host_isa = (
        (f"-Xcompiler={','.join(cpu_flags)}",)
        if cuda and settings.nvcc_host_isa_flags and cpu_flags
        else ()
    )
    return FlakeFlags(
        cmake_flags=tuple(flags),
        compile_flags=tuple(
            word for word in (*cpu_flags, *settings.optimization_flags, *define_flags) if word
        ),
        cuda_flags=(*define_flags, *host_isa) if cuda else (),
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

    nixpkgs' cmake hook configures a Release build, and CMake reads CFLAGS/CXXFLAGS into
    CMAKE_C_FLAGS/CMAKE_CXX_FLAGS: those are given here. The Release flags stay CMake's
    (-O3 -DNDEBUG) unless the flake's own flags set them. Every variable is always given (an
    empty launcher included), so a value from an earlier configure never lingers in the cache.
    """
    words = " ".join(flags.compile_flags)
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
        f"-DCMAKE_C_FLAGS={words}",
        f"-DCMAKE_CXX_FLAGS={words}",
    ]
    for language in ("C", "CXX"):
        variable = f"CMAKE_{language}_FLAGS_RELEASE"
        if not any(flag.startswith(f"-D{variable}") for flag in flags.cmake_flags):
            argv.append(f"-D{variable}=-O3 -DNDEBUG")
    argv += [
        f"-DCMAKE_C_COMPILER_LAUNCHER={launcher or ''}",
        f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher or ''}",
    ]
    if flags.cuda:
        argv += [
            f"-DCMAKE_CUDA_FLAGS={' '.join(flags.cuda_flags)}",
            f"-DCMAKE_CUDA_COMPILER_LAUNCHER={launcher or ''}",
        ]
    return argv

"""Which linkage flavour a Rust or C++ consumer of ORT should build on this host, and why."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.configs.matrix import Flavour, Matrix
from workbench.configs.settings import BuildSettings, set_setting
from workbench.host.hardware import GpuReport


@dataclass(frozen=True)
class LinkingAdvice:
    """The flavour to link, why, and what the experimental ones risk."""

    flavour: Flavour
    reasons: tuple[str, ...]
    experimental: tuple[tuple[Flavour, str], ...]

    def to_json(self) -> dict[str, object]:
        return {
            "flavour": self.flavour.name,
            "attr": self.flavour.attr,
            "reasons": list(self.reasons),
            "experimental": [
                {"flavour": flavour.name, "why": why} for flavour, why in self.experimental
            ],
        }


def recommend_flavour(matrix: Matrix, has_gpu: bool) -> LinkingAdvice:
    """cuda-hybrid where there is a GPU (the builder flake's own choice), else cpu."""
    by_linkage = {(f.cuda, f.linkage): f for f in matrix.flavours if not f.experimental}
    experimental = tuple(
        (f, f.experimental_why)  # configs/flavours.toml: required of an experimental one
        for f in matrix.flavours
        if f.experimental
    )
    hybrid = by_linkage.get((True, "hybrid"))
    if has_gpu and hybrid is not None:
        return LinkingAdvice(
            hybrid,
            (
                "static libonnxruntime.a core with the CUDA provider as a .so loaded by dlopen: "
                "a static link without the provider bridge inside it, so no start-up hang",
                "ORT's runtime path is the output's lib/, so the core finds its provider in "
                "the store; cuDNN is in lib/cudnn (`workbench env cuda-hybrid`)",
            ),
            experimental,
        )
    cpu = by_linkage.get((False, "static")) or matrix.flavours[0]
    reason = "no NVIDIA GPU here" if not has_gpu else "the matrix has no hybrid CUDA flavour"
    return LinkingAdvice(
        cpu, (f"{reason}: the CPU-only static library (`workbench env {cpu.name}`)",), experimental
    )


def detected_architectures(gpus: GpuReport, matrix: Matrix) -> tuple[str, ...]:
    """CMAKE_CUDA_ARCHITECTURES of this host's GPUs ("9.0" -> "90"), each once, in order."""
    found: list[str] = []
    for gpu in gpus.gpus:
        if gpu.compute_capability is None:
            continue
        arch = gpu.compute_capability.replace(".", "")
        if arch in matrix.known_cuda_architectures and arch not in found:
            found.append(arch)
    return tuple(found)


def fill_cuda_architectures(
    config_directory: Path,
    matrix: Matrix,
    settings: BuildSettings,
    flavour: Flavour,
    gpus: GpuReport,
) -> tuple[BuildSettings, str | None]:
    """Before a CUDA flavour builds with an empty cuda_architectures: set it to this host's GPUs
    (written to settings.toml, so the flake and every later build see it), or say which list
    the flavour falls back to. Returns the settings in force and what to tell the user."""
    if not flavour.cuda or settings.cuda_architectures:
        return settings, None
    architectures = detected_architectures(gpus, matrix)
    if not architectures:
        own = ";".join(flavour.cuda_architectures) or "nixpkgs' default (every architecture)"
        return settings, (
            f"no GPU detected and cuda_architectures is empty: {flavour.name} builds {own} "
            "(configs/flavours.toml); `workbench config set cuda_architectures ...` to choose"
        )
    names = ", ".join(sorted({gpu.name for gpu in gpus.gpus}))
    updated = set_setting(config_directory, matrix, "cuda_architectures", ",".join(architectures))
    return updated, (
        f"cuda_architectures was empty: set to {','.join(architectures)} (this host's {names}) "
        f"in {config_directory / 'settings.toml'}; the CUDA flavours build only the configured "
        "architectures"
    )

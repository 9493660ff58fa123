"""Hardware detection against recorded nvidia-smi answers (stand-in) and real /proc files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workbench.configs.matrix import Matrix
from workbench.host.hardware import (
    capability_from_name,
    detect_cpu,
    detect_gpus,
    detect_memory,
    kernel_driver_version,
    read_cpuinfo,
    supported_isas,
)

CPUINFO = Path(__file__).parent / "fixtures" / "cpuinfo"


def test_h100_with_compute_cap(matrix: Matrix, nvidia_smi) -> None:
    report = detect_gpus(matrix, nvidia_smi("h100.toml"))
    assert report.status == "found"
    assert report.driver_version == "550.54.15"
    (gpu,) = report.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.compute_capability == "9.0"
    assert gpu.capability_source == "nvidia-smi"


def test_old_driver_without_compute_cap_falls_back_to_the_name(matrix: Matrix, nvidia_smi) -> None:
    report = detect_gpus(matrix, nvidia_smi("t4-r470.toml"))
    assert report.status == "found"
    (gpu,) = report.gpus
    assert gpu.compute_capability == "7.5"
    assert gpu.capability_source == "GPU name table"
    assert report.driver_version == "470.82.01"
    assert any("compute_cap" in warning for warning in report.warnings)


def test_driver_not_loaded(matrix: Matrix, nvidia_smi) -> None:
    report = detect_gpus(matrix, nvidia_smi("driver-not-loaded.toml"))
    assert report.status == "driver-unavailable"
    assert not report.found
    assert "couldn't communicate with the NVIDIA driver" in report.message


def test_no_nvidia_smi_is_a_clear_no_gpu(matrix: Matrix, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    report = detect_gpus(matrix)
    assert report.status == "no-nvidia-smi"
    assert report.message == "no NVIDIA GPU: nvidia-smi not found on PATH"


def test_stale_nvidia_smi_in_a_container(matrix: Matrix, nvidia_smi, tmp_path: Path) -> None:
    proc_version = tmp_path / "version"
    proc_version.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 07:09:29 UTC 2025\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
    )
    assert kernel_driver_version(proc_version) == "580.65.06"
    report = detect_gpus(matrix, nvidia_smi("h100.toml"), proc_driver_version=proc_version)
    assert report.driver_version == "580.65.06"
    assert any("stale nvidia-smi" in warning for warning in report.warnings)


@pytest.mark.parametrize(
    ("name", "capability"),
    [
        ("NVIDIA A10", "8.6"),
        ("NVIDIA A100-SXM4-80GB", "8.0"),
        ("NVIDIA L40", "8.9"),
        ("NVIDIA L40S", "8.9"),
        ("NVIDIA H200", "9.0"),
        ("NVIDIA H20", "9.0"),
        ("NVIDIA GeForce RTX 4090", "8.9"),
        ("NVIDIA GeForce RTX 5090", "12.0"),
        ("Tesla T4", "7.5"),
        ("NVIDIA B200", "10.0"),
        ("Tesla V100-SXM2-16GB", None),
    ],
)
def test_capability_from_name_matches_whole_words(
    matrix: Matrix, name: str, capability: str | None
) -> None:
    assert capability_from_name(name, matrix) == capability


@pytest.mark.parametrize(
    ("fixture", "platform", "isas"),
    [
        ("haswell.txt", "x86_64-linux", ("avx2",)),
        ("skylake-avx512.txt", "x86_64-linux", ("avx2", "avx512")),
        ("sapphire-rapids.txt", "x86_64-linux", ("avx2", "avx512", "avx512bf16", "avx512vnni")),
        ("graviton3.txt", "aarch64-linux", ("armv8_2",)),  # SVE but no SVE2
        ("grace.txt", "aarch64-linux", ("armv8_2", "armv9")),
    ],
)
def test_isa_level_from_cpuinfo(matrix: Matrix, fixture: str, platform: str, isas) -> None:
    _, flags = read_cpuinfo(CPUINFO / fixture)
    assert supported_isas(flags, platform, matrix) == isas


def test_this_machine(matrix: Matrix) -> None:
    cpu = detect_cpu(matrix)
    assert cpu.cores == len(os.sched_getaffinity(0)) or cpu.cores >= 1
    if cpu.platform == "x86_64-linux":
        assert cpu.model != "unknown"
    memory = detect_memory()
    assert 0 < memory.available <= memory.total

"""Hardware detection against recorded nvidia-smi answers (stand-in) and real /proc files."""

from __future__ import annotations

import os
import time
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

CPUINFO = Path(__file__).resolve().parents[1] / "fixtures" / "cpuinfo"


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


# --- nvidia-smi output validated field by field (stand-in fixtures, one per shape) ----------


def test_garbage_output_is_reported_never_a_gpu(matrix: Matrix, nvidia_smi) -> None:
    report = detect_gpus(matrix, nvidia_smi("garbage.toml"))
    assert report.gpus == () and report.status == "error"
    assert "does not parse, so no GPU is assumed" in report.message
    raw = " ".join(report.unparsed)
    assert "Segmentation fault??" in raw and "sm bar" in raw
    assert "is not a GPU name" in raw and "field(s) where 3 were asked" in raw
    assert "\\x1b[31m" in raw  # a coloured name is shown escaped, and refused


def test_a_capability_like_9x_is_one_unparsed_line(matrix: Matrix, nvidia_smi) -> None:
    report = detect_gpus(matrix, nvidia_smi("capability-9x.toml"))
    assert report.status == "found"
    assert [(gpu.index, gpu.name) for gpu in report.gpus] == [(0, "NVIDIA A100-SXM4-80GB")]
    (line,) = report.unparsed
    assert "compute capability '9.x' is not MAJOR.MINOR" in line and "H100" in line
    assert any("does not parse" in warning for warning in report.warnings)


def test_no_devices_were_found_is_no_gpu(matrix: Matrix, nvidia_smi) -> None:
    report = detect_gpus(matrix, nvidia_smi("no-devices.toml"))
    assert report.status == "no-gpu"
    assert report.message == "no NVIDIA GPU: nvidia-smi says 'No devices were found'"


def test_a_given_nvidia_smi_that_is_missing_is_named(matrix: Matrix, tmp_path: Path) -> None:
    report = detect_gpus(matrix, str(tmp_path / "missing" / "nvidia-smi"))
    assert report.status == "error"
    assert report.message == f"nvidia-smi {tmp_path}/missing/nvidia-smi does not exist"
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\n")
    report = detect_gpus(matrix, str(script))
    assert report.message.endswith("is not executable")


@pytest.mark.slow
def test_a_hanging_nvidia_smi_is_ended_with_its_whole_group(
    matrix: Matrix, nvidia_smi, monkeypatch, tmp_path: Path
) -> None:
    from workbench.host import hardware

    child_pid = tmp_path / "child.pid"
    monkeypatch.setenv("STANDIN_NVIDIA_SMI_CHILD_PID", str(child_pid))
    # Long enough for the stand-in (a Python program) to start its child first: beside eight
    # busy loops on two cores it took 0.7 s to, and a 1.5 s timeout could end it before.
    monkeypatch.setattr(hardware, "NVIDIA_SMI_TIMEOUT_S", 5.0)
    report = detect_gpus(matrix, nvidia_smi("hangs-with-child.toml"))
    assert report.status == "error" and "did not answer within 5.0 s" in report.message
    assert child_pid.exists() and child_pid.read_text(), "the stand-in never started its child"
    child = int(child_pid.read_text())
    # The stand-in's own child (its process group) is gone too, not left sleeping.
    deadline = time.monotonic() + 30
    while True:
        try:  # it may be reaped between two looks
            state = Path(f"/proc/{child}/stat").read_text().rpartition(")")[2].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        assert time.monotonic() < deadline, "the child outlived the timeout"
        time.sleep(0.05)

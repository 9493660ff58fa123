"""The selection guide: detected hardware -> recommended variant, with reasons."""

from __future__ import annotations

from pathlib import Path

from workbench.configs.matrix import Matrix
from workbench.host.hardware import (
    CpuInfo,
    Gpu,
    GpuReport,
    Hardware,
    MemoryInfo,
    detect_gpus,
    read_cpuinfo,
    supported_isas,
)
from workbench.host.selection import select, sm_for_capability, toolkit_support

CPUINFO = Path(__file__).resolve().parents[1] / "fixtures" / "cpuinfo"
GIB = 1024**3


def host(matrix: Matrix, gpus: GpuReport, cpuinfo: str = "skylake-avx512.txt") -> Hardware:
    platform = "aarch64-linux" if cpuinfo in ("grace.txt", "graviton3.txt") else "x86_64-linux"
    model, flags = read_cpuinfo(CPUINFO / cpuinfo)
    cpu = CpuInfo(
        platform.split("-")[0], platform, model, flags, supported_isas(flags, platform, matrix), 32
    )
    return Hardware(gpus, cpu, MemoryInfo(64 * GIB, 60 * GIB, None))


def test_h100_on_driver_550_is_not_offered_cuda_12_4_which_the_pin_cannot_build(
    matrix: Matrix, nvidia_smi
) -> None:
    selection = select(host(matrix, detect_gpus(matrix, nvidia_smi("h100.toml"))), matrix)
    # The driver runs CUDA 12.4 only, and the nixpkgs pin no longer has it: no GPU variant is
    # recommended (the CPU-only one is), and the user is told why and which driver to install.
    primary = selection.primary
    assert primary.variant.toolkit is None
    assert all(r.variant.toolkit is None for r in selection.alternatives)
    said = " ".join(primary.reasons)
    assert "550.54.15 runs only CUDA 12.4" in said and "no longer has" in said
    assert "575.51.03+" in said  # the floor of the oldest toolkit the matrix builds (12.9)
    usable = {t.version: t.usable for t in selection.toolkits}
    assert usable == {"12.4": True, "12.6": False, "12.8": False, "12.9": False, "13.0": False}


def test_new_driver_gets_cuda_12_9(matrix: Matrix, nvidia_smi) -> None:
    gpus = detect_gpus(matrix, nvidia_smi("h100-new-driver.toml"))
    selection = select(host(matrix, gpus, "sapphire-rapids.txt"), matrix)
    assert [r.variant.name for r in selection.recommended] == [
        "onnxruntime-python313-cuda12_9-sm90-avx512"
    ]
    alternatives = {r.variant.name for r in selection.alternatives}
    assert "onnxruntime-python313-cuda12_9-sm90-avx512vnni" in alternatives
    assert all(t.usable for t in selection.toolkits)


def test_l40s_is_ada_not_hopper_and_mixed_gpus_get_one_variant_each(
    matrix: Matrix, nvidia_smi
) -> None:
    gpus = detect_gpus(matrix, nvidia_smi("l40s-and-a10.toml"))
    names = [r.variant.name for r in select(host(matrix, gpus), matrix).recommended]
    assert names == [
        "onnxruntime-python313-cuda12_9-sm89-avx512",
        "onnxruntime-python313-cuda12_9-sm86-avx512",
    ]


def test_blackwell_on_a_driver_too_old_for_12_9_falls_back_to_cpu(
    matrix: Matrix, nvidia_smi
) -> None:
    gpus = detect_gpus(matrix, nvidia_smi("rtx5090-driver-570.toml"))
    selection = select(host(matrix, gpus), matrix)
    primary = selection.primary
    assert primary.variant.name == "onnxruntime-python313-cpu-avx512"
    text = " ".join(primary.reasons)
    # cuda12_4 cannot target sm120 and 12.9 needs a newer driver: both must be said.
    assert "575.51.03" in text and "570.124.04" in text


def test_no_gpu_and_old_cpu(matrix: Matrix, nvidia_smi) -> None:
    gpus = detect_gpus(matrix, nvidia_smi("driver-not-loaded.toml"))
    selection = select(host(matrix, gpus, "haswell.txt"), matrix)
    assert selection.primary.variant.name == "onnxruntime-python313-cpu-avx2"
    assert "couldn't communicate" in selection.primary.reasons[0]
    assert selection.toolkits == ()


def test_grace_hopper_gets_the_arm_variant(matrix: Matrix, nvidia_smi) -> None:
    gpus = detect_gpus(matrix, nvidia_smi("h100-new-driver.toml"))
    selection = select(host(matrix, gpus, "grace.txt"), matrix)
    assert selection.primary.variant.name == "onnxruntime-python313-cuda12_9-sm90-armv9"


def test_capability_without_its_own_variant(matrix: Matrix) -> None:
    sm, reason = sm_for_capability("8.7", matrix)
    assert sm.name == "sm86" and "same major" in reason
    sm, reason = sm_for_capability("12.1", matrix)
    assert sm.name == "sm120"
    sm, reason = sm_for_capability("6.1", matrix)
    assert sm is None and "no variant" in reason


def test_arm_cpu_with_a_gpu_that_has_no_arm_variant(matrix: Matrix) -> None:
    gpus = GpuReport((Gpu(0, "NVIDIA A100", "8.0", "nvidia-smi"),), "580.65.06", "found", "1 GPU")
    selection = select(host(matrix, gpus, "grace.txt"), matrix)
    assert selection.primary.variant.name == "onnxruntime-python313-cpu-armv9"
    assert any("not for this CPU" in r for r in selection.primary.reasons)


def test_driver_floors_are_the_corrected_ones(matrix: Matrix) -> None:
    floors = {t.version: t.min_driver for t in toolkit_support("575.51.02", matrix)}
    assert floors["12.9"] == "575.51.03"  # not the seeds' "560+"
    assert floors["12.4"] == "550.54.14"
    usable = {t.version: t.usable for t in toolkit_support("575.51.02", matrix)}
    assert usable["12.8"] and not usable["12.9"]


def test_mixed_gpus_get_one_build_for_all_and_a_variant_each(matrix: Matrix, nvidia_smi) -> None:
    gpus = detect_gpus(matrix, nvidia_smi("a100-and-rtx4090.toml"))
    selection = select(host(matrix, gpus), matrix)
    mixed = selection.mixed
    assert mixed is not None
    assert mixed.architectures == ("80", "89")
    assert mixed.command == "workbench config set cuda_architectures 80,89"
    assert mixed.variant.name == "onnxruntime-python313-cuda12_9-sm80-avx512"
    assert dict(mixed.per_gpu) == {
        "NVIDIA A100-SXM4-80GB": "onnxruntime-python313-cuda12_9-sm80-avx512",
        "NVIDIA GeForce RTX 4090": "onnxruntime-python313-cuda12_9-sm89-avx512",
    }
    text = " ".join(mixed.lines())
    assert "no single variant name covers them all" in text
    assert "CMAKE_CUDA_ARCHITECTURES=80;89" in text
    # One architecture, however many GPUs: no guidance needed.
    same = detect_gpus(matrix, nvidia_smi("h100-new-driver.toml"))
    assert select(host(matrix, same), matrix).mixed is None

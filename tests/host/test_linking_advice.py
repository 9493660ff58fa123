"""Which flavour to link, and the CUDA architectures a CUDA flavour builds when none are set."""

from __future__ import annotations

from pathlib import Path

from workbench.configs.matrix import Matrix, load_matrix
from workbench.configs.settings import load_settings
from workbench.host.hardware import detect_gpus
from workbench.host.linking import (
    detected_architectures,
    fill_cuda_architectures,
    recommend_flavour,
)


def test_cuda_hybrid_where_there_is_a_gpu_cpu_where_not(matrix: Matrix) -> None:
    with_gpu = recommend_flavour(matrix, has_gpu=True)
    assert with_gpu.flavour.name == "cuda-hybrid"
    assert "no start-up hang" in with_gpu.reasons[0]
    [(static, why)] = with_gpu.experimental
    assert static.name == "cuda-static"
    assert "g_host" in why and "workbench debug-bt" in why
    assert recommend_flavour(matrix, has_gpu=False).flavour.name == "cpu"


def test_an_empty_setting_becomes_this_hosts_architectures(config_copy: Path, nvidia_smi) -> None:
    matrix = load_matrix(config_copy)
    settings = load_settings(config_copy, matrix)
    assert settings.cuda_architectures == ()
    gpus = detect_gpus(matrix, nvidia_smi("l40s-and-a10.toml"))
    assert detected_architectures(gpus, matrix) == ("89", "86")
    hybrid = matrix.flavour("cuda-hybrid")
    updated, said = fill_cuda_architectures(config_copy, matrix, settings, hybrid, gpus)
    assert updated.cuda_architectures == ("89", "86")
    assert load_settings(config_copy, matrix).cuda_architectures == ("89", "86")  # written
    assert "was empty: set to 89,86" in said and "L40S" in said
    # Set once, it stays the user's: a second build changes nothing.
    again, said_again = fill_cuda_architectures(config_copy, matrix, updated, hybrid, gpus)
    assert again == updated and said_again is None


def test_without_a_gpu_the_flavour_says_what_it_builds(config_copy: Path, nvidia_smi) -> None:
    matrix = load_matrix(config_copy)
    settings = load_settings(config_copy, matrix)
    none = detect_gpus(matrix, nvidia_smi("driver-not-loaded.toml"))
    before = (config_copy / "settings.toml").read_bytes()
    kept, said = fill_cuda_architectures(
        config_copy, matrix, settings, matrix.flavour("cuda-dyn"), none
    )
    assert kept == settings and "builds 90;120 (configs/flavours.toml)" in said
    assert (config_copy / "settings.toml").read_bytes() == before
    # A CPU flavour needs no architectures at all.
    assert (
        fill_cuda_architectures(config_copy, matrix, settings, matrix.flavour("cpu"), none)[1]
        is None
    )

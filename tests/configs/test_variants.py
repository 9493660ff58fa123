"""The matrix expands to exactly the seeds' 66 variants; names format, parse and validate."""

from __future__ import annotations

import pytest

from workbench.configs.matrix import Matrix
from workbench.configs.variants import UnknownVariantError, expand, format_name, parse

SEED_EXAMPLES = [
    "onnxruntime-python313-cuda12_9-sm90-avx512",
    "onnxruntime-python312-cuda12_4-sm90-avx512",
    "onnxruntime-python312-cuda12_4-sm90-armv9",
    "onnxruntime-python313-cpu-avx2",
    "onnxruntime-python313-cuda12_9-sm120-avx512vnni",
    "onnxruntime-python313-cpu-armv8_2",
]


def test_matrix_expands_to_the_seeds_66_variants(matrix: Matrix) -> None:
    variants = expand(matrix)
    names = [v.name for v in variants]
    assert len(names) == 66
    assert len(set(names)) == 66
    gpu = [v for v in variants if v.is_gpu]
    assert len(gpu) == 60  # 7 SMs x 4 x86 ISAs + 2 ARM SM90, per CUDA toolkit
    assert sum(1 for v in gpu if v.platform == "aarch64-linux") == 4
    assert len(variants) - len(gpu) == 6
    for example in SEED_EXAMPLES:
        assert example in names


def test_every_name_round_trips(matrix: Matrix) -> None:
    for variant in expand(matrix):
        parsed = parse(variant.name, matrix)
        assert parsed == variant
        assert format_name(parsed.python, parsed.toolkit, parsed.sm, parsed.isa) == variant.name


def test_python_follows_the_toolkit(matrix: Matrix) -> None:
    for variant in expand(matrix):
        if variant.toolkit and variant.toolkit.name == "cuda12_4":
            assert variant.python == "3.12"
        else:
            assert variant.python == "3.13"


def test_cmake_architecture_and_isa_flags(matrix: Matrix) -> None:
    variant = parse("onnxruntime-python313-cuda12_9-sm90-avx512", matrix)
    assert variant.cmake_cuda_architectures == "90"
    assert variant.isa.flags == ("-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mfma")
    assert variant.description == (
        "ONNX Runtime 1.23.2 for NVIDIA Hopper (SM90: H100, H200, H800) + AVX-512 [CUDA 12.9]"
    )
    assert parse("onnxruntime-python313-cpu-avx2", matrix).cmake_cuda_architectures is None


def test_blackwell_on_cuda_12_4_carries_a_caveat(matrix: Matrix) -> None:
    assert "12.8" in parse("onnxruntime-python312-cuda12_4-sm120-avx2", matrix).caveat
    assert parse("onnxruntime-python313-cuda12_9-sm120-avx2", matrix).caveat is None


@pytest.mark.parametrize(
    ("name", "reason", "suggestion"),
    [
        (
            "onnxruntime-python313-cuda12_9-sm90-avx521",
            "no ISA 'avx521'",
            "onnxruntime-python313-cuda12_9-sm90-avx512",
        ),
        (
            "onnxruntime-python312-cuda12_9-sm90-avx512",
            "CUDA 12.9 variants use Python 3.13",
            "onnxruntime-python313-cuda12_9-sm90-avx512",
        ),
        (
            "onnxruntime-python313-cuda12_9-sm91-avx2",
            "no SM 'sm91'",
            "onnxruntime-python313-cuda12_9-sm90-avx2",
        ),
        (
            "onnxruntime-python313-cuda12_9-sm80-armv9",
            "sm80 is built for avx2",
            "onnxruntime-python313-cuda12_9-sm90-armv9",
        ),
        (
            "onnxruntime-python313-cuda11_8-sm90-avx2",
            "no toolkit 'cuda11_8'",
            "onnxruntime-python313-cuda12_9-sm90-avx2",
        ),
        (
            "onnxruntime-python313-cpu-sm90-avx2",
            "CPU-only variants have no SM part",
            "onnxruntime-python313-cpu-avx2",
        ),
        ("ort-cuda-h100", "names look like", None),
    ],
)
def test_unknown_names_explain_and_suggest(
    matrix: Matrix, name: str, reason: str, suggestion: str | None
) -> None:
    with pytest.raises(UnknownVariantError) as caught:
        parse(name, matrix)
    assert reason in caught.value.reason
    if suggestion:
        assert suggestion in caught.value.suggestions
        assert suggestion in str(caught.value)

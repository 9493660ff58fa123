"""CUDA architecture input is normalised to CMake's form; anything unknown is refused."""

from __future__ import annotations

import pytest

from workbench.configs.cuda_arch import ArchitectureError, normalise, normalise_list
from workbench.configs.matrix import Matrix


@pytest.mark.parametrize(
    ("text", "cmake"),
    [
        ("sm_90", "90"),
        ("9.0", "90"),
        ("90", "90"),
        ("compute_90", "90"),
        ("90a", "90a"),
        ("9.0a", "90a"),
        ("sm_90a", "90a"),
        ("90-real", "90-real"),
        ("90-virtual", "90-virtual"),
        ("SM_86", "86"),
        (" 8.6 ", "86"),
        ("sm120", "120"),
        ("12.0", "120"),
        ("100f", "100f"),
        ("compute_75", "75"),
    ],
)
def test_forms_users_type(matrix: Matrix, text: str, cmake: str) -> None:
    assert normalise(text, matrix.known_cuda_architectures) == cmake


@pytest.mark.parametrize("text", ["91", "sm_91", "9.1", "ampere", "", "90b", "90-fake", "-90"])
def test_unknown_is_refused_with_the_valid_values(matrix: Matrix, text: str) -> None:
    with pytest.raises(ArchitectureError) as caught:
        normalise(text, matrix.known_cuda_architectures)
    message = str(caught.value)
    assert "valid values" in message
    assert "90a" in message and "120" in message


def test_lists_keep_order_and_drop_duplicates(matrix: Matrix) -> None:
    known = matrix.known_cuda_architectures
    assert normalise_list("90,120", known) == ["90", "120"]
    assert normalise_list("sm_90; 9.0 compute_120", known) == ["90", "120"]
    assert normalise_list(["8.6", "sm_89"], known) == ["86", "89"]
    assert normalise_list("", known) == []

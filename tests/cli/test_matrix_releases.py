"""A matrix build's targets and their releases (`matrix_build.select_build_targets`): settings'
ort_version or --ort for plain names, and without --ort a name that carries its release is
that release, so one build takes two releases of a variant side by side (what the matrix
screen's ORT column then shows, each target as `MatrixTarget.to_json` records it)."""

from __future__ import annotations

import pytest

from workbench.planning.launch import LaunchError
from workbench.remote.matrix_build import select_build_targets

CPU = "onnxruntime-python313-cpu-avx2"


def selected(matrix, *names: str, ort: str | None = None, settings: str = "1.23.2") -> dict:
    chosen = select_build_targets(list(names), None, matrix, ort, settings)
    return {t.name: t.ort_version for t in chosen.targets}


def test_two_releases_of_a_variant_in_one_matrix_build(matrix) -> None:
    both = selected(matrix, CPU, f"{CPU}-ort1_24_2")
    assert both == {CPU: "1.23.2", f"{CPU}-ort1_24_2": "1.24.2"}
    # settings.toml's release for the plain name; the named one keeps its own.
    assert selected(matrix, CPU, f"{CPU}-ort1_22_2", settings="1.24.2") == {
        f"{CPU}-ort1_24_2": "1.24.2",
        f"{CPU}-ort1_22_2": "1.22.2",
    }


def test_ort_given_still_refuses_a_name_of_another_release(matrix) -> None:
    assert selected(matrix, CPU, ort="1.24.2") == {f"{CPU}-ort1_24_2": "1.24.2"}
    with pytest.raises(LaunchError) as refused:
        selected(matrix, CPU, f"{CPU}-ort1_24_2", ort="1.23.2")
    assert "is ONNX Runtime 1.24.2, but --ort says 1.23.2" in str(refused.value)

"""The variants screen's line under the table for a ✗ row says why the nixpkgs pin cannot build
it and what to build instead (configs/matrix.toml's `instead` toolkit, same SM and ISA), as
`workbench build` and `workbench variants` do."""

from __future__ import annotations

import dataclasses

from workbench.configs.matrix import Matrix
from workbench.tui.screens.variants.variants_screen import matrix_rows, unavailable_note

CUDA12_4 = "onnxruntime-python312-cuda12_4-sm90-avx512"
CUDA12_9 = "onnxruntime-python313-cuda12_9-sm90-avx512"


def test_the_row_note_names_the_reason_and_the_replacement(matrix: Matrix) -> None:
    rows = {row.name: row for row in matrix_rows(matrix)}
    note = unavailable_note(rows[CUDA12_4])
    assert note.startswith("✗ not buildable at the nixpkgs pin: CUDA 12.4 is not in nixpkgs")
    assert note.endswith(f"; build {CUDA12_9} (CUDA 12.9, driver ≥ 575.51.03) instead")
    # Every ✗ row has one, and it is its own SM and ISA on CUDA 12.9.
    gone = [row for row in rows.values() if row.unavailable]
    assert len(gone) == 30
    for row in gone:
        assert row.instead is not None
        assert row.instead.startswith(row.name.replace("python312-cuda12_4", "python313-cuda12_9"))
    assert all(row.instead is None for row in rows.values() if not row.unavailable)


def test_without_a_replacement_the_note_gives_the_reason_alone(matrix: Matrix) -> None:
    row = dataclasses.replace(next(r for r in matrix_rows(matrix) if r.unavailable), instead=None)
    note = unavailable_note(row)
    assert note == f"✗ not buildable at the nixpkgs pin: {row.unavailable}"

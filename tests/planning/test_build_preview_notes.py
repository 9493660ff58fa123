"""The TUI's build preview (`b`, planning/plan.py) says before a build starts, as
`workbench build` does, that an ISA variant's unit tests and Python import check are skipped:
its ISA code may not run on the machine that builds it."""

from __future__ import annotations

from pathlib import Path

from workbench.history.store import History
from workbench.planning.plan import prepare_build

REPO = Path(__file__).resolve().parents[2]
AVX512 = "onnxruntime-python313-cuda12_9-sm90-avx512"
VNNI = "onnxruntime-python313-cuda12_9-sm90-avx512vnni"


def _notes(tmp_path: Path, names: list[str]) -> list[str]:
    with History(tmp_path / "state") as history:
        preview = prepare_build(REPO / "configs", history, names)
    return [line for line in preview.lines() if line.startswith("note: ")]


def test_the_preview_of_an_isa_variant_says_its_checks_are_skipped(tmp_path: Path) -> None:
    notes = _notes(tmp_path, [AVX512])
    assert len(notes) == 1
    assert notes[0].startswith("note: ORT's unit tests and the Python import check are skipped")
    assert f"`workbench smoke {AVX512}`" in notes[0]


def test_the_preview_of_several_targets_names_each_isa_variant_once(tmp_path: Path) -> None:
    notes = _notes(tmp_path, [AVX512, "cuda-dyn", VNNI])
    assert len(notes) == 1 and "builds of 2 ISA variants" in notes[0]
    assert AVX512 in notes[0] and VNNI in notes[0] and "cuda-dyn" not in notes[0]


def test_a_flavour_has_no_such_note(tmp_path: Path) -> None:
    assert _notes(tmp_path, ["cuda-dyn"]) == []

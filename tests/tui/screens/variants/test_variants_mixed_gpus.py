"""The variants screen on a host with two GPUs of different architectures (issue 15, item 5),
driven with Pilot at 80x24 and 160x48.

The host is the recorded one of tests/recorded_host.py with the nvidia-smi stand-in answering
the recorded output of an A100 (8.0) beside an RTX 4090 (8.9) (no GPU exists on the test
machines): tests/standins/nvidia-smi-fixtures/a100-and-rtx4090.toml. The recommendation line
says on one line (cut, never wrapped) that no variant covers both and gives the one build for
all; the whole advice comes as a notification; each ★ row's note says which GPU it is for.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from recorded_host import recorded_doctor
from textual.widgets import DataTable, Static
from textual.widgets._toast import Toast
from tui.driving import wait_until

from workbench.tui.app import make_app
from workbench.tui.screens.variants.variants_screen import VariantsScreen
from workbench.tui.table_names import short_target

SIZES = [(80, 24), (160, 48)]
A100 = "NVIDIA A100-SXM4-80GB"
RTX4090 = "NVIDIA GeForce RTX 4090"
COMMAND = "workbench config set cuda_architectures 80,89"


def drawn_lines(widget: Static) -> list[str]:
    """The widget's lines as drawn on the terminal now."""
    return [widget.render_line(y).text.rstrip() for y in range(widget.region.height)]


def starred(table: DataTable) -> dict[str, str]:
    """Row key -> drawn name of every row whose mark is ★."""
    marked = {}
    for row_key in table.rows:
        cells = table.get_row(row_key)
        if str(cells[0]) == "★":
            marked[str(row_key.value)] = str(cells[2])
    return marked


@pytest.mark.parametrize("size", SIZES)
async def test_the_recommendation_gives_the_one_build_and_each_star_says_its_gpu(
    config_copy: Path, tmp_path: Path, size: tuple[int, int]
) -> None:
    width = size[0]
    app = make_app(
        str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor("a100-and-rtx4090.toml")
    )
    async with app.run_test(size=size, notifications=True) as pilot:
        await app.workers.wait_for_complete()
        await wait_until(pilot, "the report", lambda: getattr(app, "report", None) is not None)
        screen = app.screen
        assert isinstance(screen, VariantsScreen)
        mixed = app.report.selection.mixed
        assert mixed is not None and mixed.architectures == ("80", "89")
        one_build = mixed.variant.name
        per_gpu = dict(mixed.per_gpu)
        assert "-sm80-" in per_gpu[A100] and "-sm89-" in per_gpu[RTX4090]
        table = screen.query_one("#variants", DataTable)
        await wait_until(pilot, "the ★ rows", lambda: len(starred(table)) == 3)
        await pilot.pause()

        # One line, cut at the screen's edge, never wrapped onto the second.
        recommendation = screen.query_one("#recommendation", Static)
        first, *rest = drawn_lines(recommendation)
        assert all(line == "" for line in rest)
        full = f"★ No variant covers sm80+sm89: {COMMAND}, then build {one_build}; "
        full += "or one per GPU: ★ rows"
        assert len(first) <= width - 2
        if width == 80:
            # What must be read first is whole: no variant covers both, and the command.
            assert first.startswith(f"★ No variant covers sm80+sm89: {COMMAND}")
            assert first.endswith("…") and full.startswith(first[:-1])
        else:
            assert first == full

        # The line in full, in the doctor's order, as a notification (nothing cut).
        [notification] = list(app._notifications)
        assert notification.message.splitlines() == [
            mixed.headline() + ".",
            f"One build for all of them: `{COMMAND}`, then build {one_build}.",
            "Or one variant per GPU: the ★ rows (each row's note names its GPU).",
        ]
        await wait_until(pilot, "the toast", lambda: bool(app.screen.query(Toast)))
        await pilot.pause()
        [toast] = app.screen.query(Toast)
        # Drawn whole on the terminal, the commands unbroken by its wrapping.
        assert toast.region.right <= width and toast.region.bottom <= size[1]
        toast_text = " ".join(line.strip() for line in drawn_lines(toast))
        assert "GPUs of different architectures" in toast_text
        assert "no single variant name covers them all" in toast_text
        assert "workbench config set" in toast_text and "80,89" in toast_text

        # ★ on the two GPUs' variants and the linking flavour, nothing else.
        assert set(starred(table)) == {per_gpu[A100], per_gpu[RTX4090], "cuda-hybrid"}
        shown = per_gpu[A100] if width >= 120 else short_target(per_gpu[A100])
        assert starred(table)[per_gpu[A100]] == shown

        # The cursor is on the one build's variant; its note says the setting makes it build for
        # every GPU, and that as it is it builds for the A100 alone.
        row_note = screen.query_one("#row-note", Static)
        await wait_until(
            pilot, "the cursor on the one build", lambda: screen._highlighted() == one_build
        )
        await pilot.pause()
        note = f"★ all GPUs in one build after `{COMMAND}`; as it is, for {A100} only"
        [drawn] = drawn_lines(row_note)
        if width == 80:
            assert drawn.endswith("…") and note.startswith(drawn[:-1])
            assert COMMAND in drawn
        else:
            assert drawn == note

        # The RTX 4090's variant: for that GPU alone, and which build covers every GPU.
        table.move_cursor(row=table.get_row_index(per_gpu[RTX4090]))
        await pilot.pause()
        expected = (
            f"★ for {RTX4090} alone (one variant per GPU); one build for every GPU: "
            f"{short_target(one_build)} with cuda_architectures 80,89"
        )
        await wait_until(
            pilot, "the 4090's note", lambda: drawn_lines(row_note)[0][:20] == expected[:20]
        )
        [drawn] = drawn_lines(row_note)
        if width >= 120:
            assert drawn == expected
        else:
            assert drawn.endswith("…") and expected.startswith(drawn[:-1])

        # The linking flavour builds for every GPU here (the setting is empty: a build fills it).
        table.move_cursor(row=table.get_row_index("cuda-hybrid"))
        await pilot.pause()
        await wait_until(pilot, "the flavour's note", lambda: "linking" in drawn_lines(row_note)[0])
        [drawn] = drawn_lines(row_note)
        assert drawn == "★ recommended for linking: it builds for every GPU here (80,89)"


async def test_one_architecture_keeps_the_plain_recommendation(
    config_copy: Path, tmp_path: Path
) -> None:
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await wait_until(pilot, "the report", lambda: getattr(app, "report", None) is not None)
        await pilot.pause()
        assert app.report.selection.mixed is None
        first = drawn_lines(app.screen.query_one("#recommendation", Static))[0]
        assert first.startswith(f"★ {app.report.selection.primary.variant.name}")
        assert "No variant covers" not in first and not list(app._notifications)
        # The cursor is put on the recommended row once the table is filled; until then the
        # note is the first row's (CI beside load drew it before the cursor moved).
        primary = app.report.selection.primary.variant.name
        screen = app.screen
        assert isinstance(screen, VariantsScreen)
        await wait_until(pilot, "the cursor on the ★ row", lambda: screen._highlighted() == primary)
        row_note = screen.query_one("#row-note", Static)
        await wait_until(pilot, "the ★ row's note", lambda: drawn_lines(row_note)[0][:1] == "★")
        assert drawn_lines(row_note)[0] == "★ recommended for this host"


async def test_with_the_setting_in_place_the_line_says_build(
    config_copy: Path, tmp_path: Path
) -> None:
    from workbench.configs.settings import set_settings

    app = make_app(
        str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor("a100-and-rtx4090.toml")
    )
    set_settings(config_copy, app.matrix, {"cuda_architectures": "80,89"})
    async with app.run_test(size=(160, 48)) as pilot:
        await app.workers.wait_for_complete()
        await wait_until(pilot, "the report", lambda: getattr(app, "report", None) is not None)
        screen = app.screen
        one_build = app.report.selection.mixed.variant.name
        await wait_until(pilot, "the cursor", lambda: screen._highlighted() == one_build)
        await pilot.pause()
        first = drawn_lines(screen.query_one("#recommendation", Static))[0]
        assert first == (
            f"★ No variant covers sm80+sm89: cuda_architectures 80,89 is set, build {one_build}; "
            "or one per GPU: ★ rows"
        )
        row_note = screen.query_one("#row-note", Static)
        await wait_until(pilot, "the ★ row's note", lambda: drawn_lines(row_note)[0][:1] == "★")
        note = drawn_lines(row_note)[0]
        assert note == "★ one build for every GPU here: cuda_architectures is 80,89 already"
        [notification] = list(app._notifications)
        assert "already: build " + one_build in notification.message

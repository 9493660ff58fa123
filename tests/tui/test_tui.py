"""The first screen, driven with Pilot: the matrix, the recommendation, the filter; and what
it costs to draw (imports, the TUI's fast path through the command line)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from recorded_host import recorded_doctor
from textual.widgets import DataTable, Static
from tui.driving import screen_still, wait_until

from workbench.cli.main import tui_options
from workbench.tui.app import make_app

REPO = Path(__file__).resolve().parents[2]

# What the first screen must not wait for: detection, the history, the other screens.
NOT_BEFORE_THE_FIRST_FRAME = (
    "workbench.reading.doctor",
    "workbench.host.hardware",
    "workbench.configs.settings",
    "workbench.host.selection",
    "workbench.host.parallelism",
    "workbench.history",
    "workbench.supervision.liveness",
    "workbench.debugging",
    "workbench.tui.screens.build.build_screen",
    "workbench.tui.screens.history.history_screen",
    "workbench.tui.screens.settings.settings_screen",
    "workbench.tui.screens.debug.debug_screen",
    "workbench.tui.screens.patches.patches_screen",
    "sqlite3",
    "psutil",
    "pygdbmi",
    "tomlkit",
    "rich.syntax",
    "rich.markdown",
)

FIRST_FRAME_PROBE = """
import sys
from workbench.tui.screens.variants import variants_screen
from workbench.tui.app import make_app

def doctor(matrix, settings):  # imported late on purpose: it loads the doctor
    from recorded_host import recorded_doctor
    return recorded_doctor()(matrix, settings)

def first_frame_drawn(screen):
    loaded = [name for name in {names!r} if name in sys.modules]
    print("loaded before the first frame:", loaded)
    screen.app.exit()

variants_screen.VariantsScreen._first_frame_drawn = first_frame_drawn
make_app({config!r}, {state!r}, doctor=doctor).run(headless=True, size=(80, 24))
"""


async def test_first_screen_marks_the_recommended_variant(config_copy: Path, tmp_path: Path):
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=(120, 40)) as pilot:
        # The report's worker is done, but the cursor moves to the recommendation after the
        # refresh that its summary lines cause: wait for the screen to settle, not one pause.
        await wait_until(pilot, "the recorded host", lambda: app.report is not None, 30)
        await screen_still(pilot)
        table = app.screen.query_one("#variants", DataTable)
        assert table.row_count == 66 + 4  # the variants and the four linkage flavours
        assert "cuda-static" in table.rows
        recommended = "onnxruntime-python313-cuda12_9-sm90-avx512"
        assert table.get_row(recommended)[0] == "★"
        assert app.screen._highlighted() == recommended  # the cursor starts on it
        text = str(app.screen.query_one("#recommendation", Static).render())
        assert recommended in text and "sm90" in text
        await pilot.press("slash", *"sm120 vnni")
        await pilot.pause()
        assert table.row_count == 2
        await pilot.press("escape")
        await pilot.pause()
        assert table.row_count == 70
        await pilot.press("space", "down", "space")
        assert len(app.screen.marked) == 2
        await pilot.press("o", "o")  # sort by CUDA
        await pilot.pause()
        cuda_column = [table.get_row_at(n)[3] for n in range(table.row_count)]
        assert cuda_column == sorted(cuda_column)


async def test_the_highlighted_rows_mark_is_explained(config_copy: Path, tmp_path: Path):
    """✗ and ! mean something only with their reason: the line under the table gives it."""
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = app.screen.query_one("#variants", DataTable)

        def note() -> str:
            return str(app.screen.query_one("#row-note", Static).render())

        async def note_for(name: str, starts: str) -> str:
            """Move to `name`'s row; the note, once it has followed (bounded wait). Each row
            visited below has another note than the one before it: the old note, which may
            start the same way, is not taken for the new one."""
            before = note()
            table.move_cursor(row=table.get_row_index(name), animate=False)
            await wait_until(
                pilot,
                f"the note of {name}",
                lambda: note() != before and note().startswith(starts),
                30,
            )
            return note()

        # The screen moves the cursor to the recommended row itself, after its first refresh:
        # wait for that first, or it would move the cursor back from under the test.
        await wait_until(
            pilot, "the recommended row's note", lambda: note() == "★ recommended for this host", 30
        )
        unavailable = "onnxruntime-python312-cuda12_4-sm90-avx2"
        assert table.get_row(unavailable)[0] == "✗"
        shown = await note_for(unavailable, "✗")
        assert shown.startswith("✗ not buildable at the nixpkgs pin: ") and "12.4" in shown
        # Not buildable wins over its caveat (nvcc 12.4 cannot target sm100 either).
        shown = await note_for("onnxruntime-python312-cuda12_4-sm100-avx2", "✗")
        reason, instead = shown.split("; build ")
        assert reason.startswith("✗ not buildable at the nixpkgs pin: ") and "sm100" not in reason
        assert instead.startswith("onnxruntime-python313-cuda12_9-sm100-avx2 (CUDA 12.9")
        legend = await note_for("onnxruntime-python313-cpu-avx2", "★ recommended ·")
        assert "★ recommended" in legend and "✗ not buildable" in legend
        recommended = await note_for("onnxruntime-python313-cuda12_9-sm90-avx512", "★")
        assert recommended == "★ recommended for this host"


async def test_no_gpu_host_recommends_a_cpu_variant(config_copy: Path, tmp_path: Path):
    doctor = recorded_doctor("driver-not-loaded.toml", "haswell.txt")
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=doctor)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = app.screen.query_one("#variants", DataTable)
        assert table.get_row("onnxruntime-python313-cpu-avx2")[0] == "★"
        newcomer = str(app.screen.query_one("#newcomer", Static).render())
        assert "sample project" in newcomer


async def test_settings_refuses_invalid_values_and_saves_keeping_comments(
    config_copy: Path, tmp_path: Path, private_user_config: Path
):
    from textual.widgets import Input

    path = config_copy / "settings.toml"
    before = path.read_text()
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=(100, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("s")
        await pilot.pause()
        screen = app.screen
        jobs = screen.query_one("#field-ninja_jobs", Input)
        jobs.value = "0"
        await pilot.pause()
        error = screen.query_one("#error-ninja_jobs", Static)
        assert error.display and "out of range" in str(error.render())
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert path.read_text() == before  # refused: nothing written
        jobs.value = "12"
        screen.query_one("#field-cuda_architectures", Input).value = "sm_90, 12.0"
        await pilot.pause()
        assert not error.display
        advice = str(screen.query_one("#advice", Static).render())
        assert re.search(r"Memory at peak for \S+: 12 jobs ", advice), advice
        await pilot.press("ctrl+s")
        await pilot.pause()
    after = path.read_text()
    # The jobs are the user's, on this host: their own file, never the tracked one.
    assert "ninja_jobs = 12" in (private_user_config / "settings.toml").read_text()
    assert 'cuda_architectures = ["90", "120"]' in after
    assert after.replace('cuda_architectures = ["90", "120"]', "cuda_architectures = []") == before


def test_the_first_frame_is_drawn_before_anything_heavy_is_imported(tmp_path: Path) -> None:
    code = FIRST_FRAME_PROBE.format(
        names=NOT_BEFORE_THE_FIRST_FRAME,
        config=str(REPO / "configs"),
        state=str(tmp_path / "state"),
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "tests"), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "loaded before the first frame: []" in result.stdout, result.stdout


@pytest.mark.parametrize(
    ("argv", "options"),
    [
        ([], {}),
        (["--config", "c", "--state-dir", "s"], {"config": "c", "state_dir": "s"}),
        (["--state-dir=s"], {"state_dir": "s"}),
        (["doctor"], None),  # a command: the parser's way
        (["--help"], None),
        (["--config"], None),  # a missing value: the parser says what is wrong
        (["--config="], None),
    ],
)
def test_the_tui_launch_skips_the_parser_only_for_global_options(argv, options) -> None:
    assert tui_options(argv) == options

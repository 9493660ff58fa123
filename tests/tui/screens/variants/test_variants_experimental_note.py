"""The variants screen's line under the table for an experimental flavour says what it risks,
from configs/flavours.toml's `experimental_why` (the doctor says the same), not a bare
"experimental"."""

from __future__ import annotations

from pathlib import Path

import pytest
from recorded_host import recorded_doctor
from textual.widgets import DataTable, Static
from tui.driving import wait_until

from workbench.configs.matrix import load_matrix
from workbench.errors import ConfigError
from workbench.tui.app import make_app


async def test_the_static_cuda_rows_note_says_why_it_is_experimental(
    config_copy: Path, tmp_path: Path
) -> None:
    # The reason is the configuration's: an edited one is what the screen shows.
    flavours = config_copy / "flavours.toml"
    text = flavours.read_text()
    assert text.count("imported patch series holds;") == 1
    flavours.write_text(
        text.replace("imported patch series holds;", "imported series (edited) holds;")
    )
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=(160, 48)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        table = app.screen.query_one("#variants", DataTable)

        def note() -> str:
            return str(app.screen.query_one("#row-note", Static).render())

        # The screen moves to the recommended row itself first; then move to cuda-static.
        await wait_until(
            pilot, "the recommended row's note", lambda: note() == "★ recommended for this host", 30
        )
        assert table.get_row("cuda-static")[0] == "!"
        table.move_cursor(row=table.get_row_index("cuda-static"), animate=False)
        await wait_until(
            pilot, "cuda-static's note", lambda: note().startswith("! experimental"), 30
        )
        shown = note()
        assert shown.startswith("! experimental: in one static link the CUDA provider's bridge")
        assert "imported series (edited) holds;" in shown
        assert "`workbench debug-bt -- PROGRAM` captures and names the loop" in shown
        assert "\n" not in shown.strip()


def test_an_experimental_flavour_without_a_reason_is_refused_by_name(config_copy: Path) -> None:
    flavours = config_copy / "flavours.toml"
    text = flavours.read_text()
    start = text.index("experimental_why = ")
    end = text.index('"""', text.index('"""', start) + 3) + 3
    flavours.write_text(text[:start] + text[end + 1 :])
    with pytest.raises(
        ConfigError, match=r"experimental_why: 'cuda-static' is experimental: say why"
    ):
        load_matrix(config_copy)

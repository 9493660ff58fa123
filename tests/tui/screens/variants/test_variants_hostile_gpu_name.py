"""What nvidia-smi says reaches the variants screen as text: a name holding Rich markup is shown
as it was typed, and clicking it does nothing. Before, the recommendation line quoted the
unparsable line as markup: `[@click=app.quit]` became a click action on the first screen."""

from __future__ import annotations

from pathlib import Path

from driving import wait_until
from recorded_host import recorded_doctor
from textual.widgets import Static

from workbench.tui.app import make_app


async def test_a_gpu_name_with_markup_is_shown_as_typed_and_clicking_it_does_nothing(
    config_copy: Path, tmp_path: Path
) -> None:
    app = make_app(
        str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor("markup-in-name.toml")
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, "the recorded host", lambda: app.report is not None, 30)
        await pilot.pause()
        line = app.screen.query_one("#recommendation", Static)
        assert "[@click=app.quit]H100[/] [bold" in str(line.render())
        await pilot.click("#recommendation", offset=(60, 0))
        await pilot.click("#recommendation", offset=(100, 0))
        await pilot.pause()
        assert app.is_running

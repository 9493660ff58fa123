"""What the TUI keeps for its user: the theme chosen is the next run's, keys remapped in the
per-user settings file are the app's, and a screenshot goes under the state directory with the
screen's name (Textual's default, ~/Downloads, does not exist on a headless build host)."""

from __future__ import annotations

from pathlib import Path

import pytest
from recorded_host import recorded_doctor

from workbench.configs.user_settings import get_own
from workbench.errors import ConfigError
from workbench.tui.app import make_app


async def test_the_theme_chosen_is_saved_and_used_next_time(
    config_copy: Path, tmp_path: Path, private_user_config: Path
) -> None:
    state = str(tmp_path / "state")
    app = make_app(str(config_copy), state, doctor=recorded_doctor())
    async with app.run_test(size=(100, 40)) as pilot:
        await app.workers.wait_for_complete()
        assert get_own("theme") is None  # nothing written by merely starting
        app.theme = "nord"
        await pilot.pause()
    assert get_own("theme") == "nord"
    again = make_app(str(config_copy), state, doctor=recorded_doctor())
    async with again.run_test(size=(100, 40)):
        assert again.theme == "nord"


def test_a_theme_set_before_the_app_runs_is_not_saved(
    config_copy: Path, tmp_path: Path, private_user_config: Path
) -> None:
    # A front end (a test, a screenshot) setting the theme before the run is not the user
    # choosing one: App.is_mounted is a method, and `if self.is_mounted` saved this too.
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    app.theme = "nord"
    assert get_own("theme") is None


async def test_keys_remapped_in_the_user_file_are_the_apps(
    config_copy: Path, tmp_path: Path, private_user_config: Path
) -> None:
    (private_user_config / "settings.toml").write_text('[keys]\nsettings = "f9"\n')
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=(100, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("f9")
        await pilot.pause()
        assert type(app.screen).__name__ == "SettingsScreen"
    (private_user_config / "settings.toml").write_text('[keys]\nsettings = "not a key!"\n')
    with pytest.raises(ConfigError, match=r"\[keys\] settings = 'not a key!': refused"):
        make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())


async def test_a_screenshot_goes_under_the_state_directory_named_after_the_screen(
    config_copy: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    app = make_app(str(config_copy), str(state), doctor=recorded_doctor())
    async with app.run_test(size=(100, 40)) as pilot:
        await app.workers.wait_for_complete()
        app.action_screenshot()
        await pilot.pause()
        (saved,) = (state / "screenshots").glob("workbench-variants-*.svg")
        assert saved.read_text().startswith("<svg")
        app.action_screenshot("chosen.svg", str(tmp_path / "elsewhere"))
        await pilot.pause()
        assert (tmp_path / "elsewhere" / "chosen.svg").is_file()

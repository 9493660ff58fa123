"""The patches screen over the fixture series: toggled with a key, checked per hunk, diff shown."""

from __future__ import annotations

import subprocess
from pathlib import Path

from driving import screen_still, wait_until
from iterate.standin_repo import write_standin_repo
from monitor.cxx_project import needs_cxx_tools
from nix_testing import needs_nix, nix_env
from patch_fixture import write_fixture_series, write_fixture_source
from recorded_host import recorded_doctor
from rich.syntax import Syntax
from textual.widgets import DataTable, Input, Static

from workbench.patches.series import load_series, series_path
from workbench.tui.app import make_app
from workbench.tui.screens.build.build_screen import BuildScreen
from workbench.tui.screens.patches.patches_screen import PatchesScreen


async def test_toggle_check_and_diff(config_copy: Path, tmp_path: Path, tui) -> None:
    source = tmp_path / "source"
    write_fixture_source(source, units=14)
    write_fixture_series(config_copy, source)
    app = tui()
    async with app.run_test(size=(100, 36)) as pilot:
        await pilot.pause()
        screen = PatchesScreen(app.matrix, config_copy, tmp_path / "state", "cpu")
        await app.push_screen(screen)
        await pilot.pause()
        table = screen.query_one("#patches-table", DataTable)
        assert [table.get_row_at(n)[2] for n in range(table.row_count)] == [
            "tune-light-3",
            "tune-light-7",
            "stale-context",
            "already-upstream",
            "gone-file",
        ]
        summary = str(screen.query_one("#patches-summary", Static).render())
        assert "cpu: 5 of the series' 5 patches are for it, 2 enabled" in summary
        diff = screen.query_one("#patch-diff", Static).content
        assert isinstance(diff, Syntax) and diff.lexer is not None
        assert "+++ b/light_3.cc" in diff.code and diff.lexer.name == "Diff"

        # Enable the stale patch with the keyboard: the file changes, comments stay.
        await pilot.press("down", "down", "space")
        await pilot.pause()
        assert load_series(config_copy).get("stale-context").enabled
        assert series_path(config_copy).read_text().startswith("# The fixture's patch series")
        assert table.get_row_at(2)[1] == "✓"

        # Check against the source tree typed in: per-patch results in the table, hunks below.
        screen.query_one("#patches-source", Input).value = str(source)
        await pilot.press("c")
        await wait_until(pilot, "the check", lambda: bool(screen.checks), 30)
        assert str(table.get_row_at(0)[4]) == "applies"
        assert str(table.get_row_at(2)[4]) == "fails"
        assert str(table.get_row_at(3)[4]) == ""  # disabled: not checked
        description = str(screen.query_one("#patch-description", Static).render())
        assert "hunk #2 light_9.cc: context changed: light_9.cc:8 reads" in description

        await pilot.press("space")  # disabling it again clears the results
        await pilot.pause()
        assert not load_series(config_copy).get("stale-context").enabled
        assert screen.checks == {}


async def test_p_opens_the_series_of_the_highlighted_variant(config_copy: Path, tui) -> None:
    app = tui()
    async with app.run_test(size=(100, 36)) as pilot:
        # The cursor moves to the recommended variant once the host is read (a worker): wait
        # for that move, then leave the recommendation so `p` must follow the cursor.
        await wait_until(pilot, "the recorded host", lambda: app.report is not None, 30)
        await screen_still(pilot)
        first = app.screen
        recommended = first._highlighted()  # type: ignore[attr-defined]
        await pilot.press("down")
        await pilot.pause()
        highlighted = first._highlighted()  # type: ignore[attr-defined]
        assert highlighted not in (None, recommended)
        await pilot.press("p")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PatchesScreen) and screen.target == highlighted
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is first


@needs_cxx_tools
@needs_nix[0]
@needs_nix[1]
async def test_i_builds_the_iterate_workspace_under_the_supervisor(
    tmp_path: Path, bench, monkeypatch
) -> None:
    # The workspace comes from the derivation's own phases: the stand-in flake's repository
    # (tests/iterate/standin_flake, built by real Nix) stands in for the builder flake's.
    repo = write_standin_repo(tmp_path / "repo")
    environment = nix_env(tmp_path)
    for name in ("NIX_CONFIG", "XDG_CACHE_HOME"):
        monkeypatch.setenv(name, environment[name])
    app = make_app(str(repo.configs), str(bench.state), doctor=recorded_doctor())
    async with app.run_test(size=(100, 36)) as pilot:
        await pilot.pause()
        screen = PatchesScreen(app.matrix, repo.configs, bench.state, "cpu")
        await app.push_screen(screen)
        await pilot.pause()
        await pilot.press("i")
        await wait_until(pilot, "the build screen", lambda: isinstance(app.screen, BuildScreen), 90)
        build_id = app.screen.build_id  # type: ignore[attr-defined]
        await wait_until(pilot, "the build's end", lambda: not bench.record(build_id).active, 180)
        record = bench.record(build_id)
        assert record.name == "iterate cpu" and record.state == "succeeded", record.note
    log = subprocess.run(
        ["git", "log", "--format=%s"],
        cwd=bench.state / "workspaces" / "cpu" / "src",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    # patchPhase's order: nixpkgs' own patches, the series, then postPatch on top.
    assert [subject.split(":")[0] for subject in log[:5]] == [
        "nixpkgs",
        "tune-light-7",
        "tune-light-3",
        "nixpkgs",
        "upstream source",
    ]
    assert log[0] == "nixpkgs: the derivation's postPatch"
    assert log[3] == "nixpkgs: the derivation's own patches"

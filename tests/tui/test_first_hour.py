"""A newcomer's first hour (issue 14), driven with Pilot at 80x24 and 160x48: a user error is
one screen and a non-zero exit, every screen's keys are in the palette, the help and the
footer, and quitting mid-build says the build goes on."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from monitor.cxx_project import needs_cxx_tools
from needed_tools import needs
from recorded_host import recorded_doctor
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import DataTable, Static
from textual.widgets._footer import FooterKey
from tui.driving import (
    open_screen,
    screen_still,
    start,
    wait_until,
    widths_hold,
)

from workbench.tui.app import WorkbenchApp, make_app
from workbench.tui.commands import ScreenCommands
from workbench.tui.screens.error.error_screen import ErrorScreen
from workbench.tui.screens.help.help_screen import HelpScreen, key_help

REPO = Path(__file__).resolve().parents[2]
SIZES = [(80, 24), (160, 48)]
MALFORMED = "ninja_jobs = [unclosed\n"


def app_on(config: Path, tmp_path: Path) -> WorkbenchApp:
    return make_app(str(config), str(tmp_path / "state"), doctor=recorded_doctor())


def text_of(widget: Static) -> str:
    return str(widget.render())


async def error_screen_shown(app: WorkbenchApp, pilot) -> ErrorScreen:
    """The error screen, once drawn (its header included)."""
    await wait_until(pilot, "the error screen", lambda: isinstance(app.screen, ErrorScreen), 30)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    assert isinstance(app.screen, ErrorScreen)
    return app.screen


@pytest.mark.parametrize("size", SIZES)
async def test_a_malformed_settings_file_is_one_screen_and_quitting_exits_2(
    config_copy: Path, tmp_path: Path, size: tuple[int, int]
) -> None:
    (config_copy / "settings.toml").write_text(MALFORMED)
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=size) as pilot:
        screen = await error_screen_shown(app, pilot)
        what = text_of(screen.query_one("#error-what", Static))
        where = text_of(screen.query_one("#error-where", Static))
        todo = text_of(screen.query_one("#error-todo", Static))
        assert "malformed TOML" in what
        assert where.startswith("Where: ") and "settings.toml:1:" in where
        assert "Fix it in" in todo and "settings.toml" in todo
        # Every line of the box is on the terminal, the footer's Quit too.
        assert screen.query_one("#error-todo").region.bottom <= size[1] - 1
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 2


async def test_the_settings_screen_on_a_malformed_file_is_the_error_screen_too(
    config_copy: Path, tmp_path: Path
) -> None:
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        (config_copy / "settings.toml").write_text(MALFORMED)
        await pilot.press("s")
        await error_screen_shown(app, pilot)
        await pilot.press("escape")  # back to the variants screen, still usable
        await pilot.pause()
        assert type(app.screen).__name__ == "VariantsScreen"
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 2


@needs("tmux")
def test_the_real_tui_exits_2_without_a_traceback(config_copy: Path, tmp_path: Path) -> None:
    """`workbench --config DIR` in a real terminal, on a malformed settings.toml."""
    (config_copy / "settings.toml").write_text(MALFORMED)
    session = f"wb-{uuid.uuid4().hex[:8]}"
    status = tmp_path / "status"
    argv = [sys.executable, "-m", "workbench", "--config", str(config_copy)]
    argv += ["--state-dir", str(tmp_path / "state")]
    # The pane's own shell records the exit status, then keeps what the app left on the pane.
    script = f"{shlex.join(argv)}; echo $? >{status}; sleep 60"
    run = ["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24"]
    run += ["-e", f"PATH={os.environ['PATH']}", "-e", "TERM=xterm-256color", "sh", "-c", script]
    subprocess.run(run, check=True, timeout=30)
    try:
        deadline = time.monotonic() + 180  # bounded; Textual's start-up on a loaded machine
        seen = ""
        while "What to do" not in seen:
            assert time.monotonic() < deadline, f"no error screen; the pane shows:\n{seen}"
            time.sleep(0.2)
            seen = subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
            ).stdout
        assert "settings.toml:1:" in seen
        # `q` again while the error screen stays: a key typed as the screen first shows can
        # reach the terminal before the app reads its input (a loaded machine widens that).
        deadline = time.monotonic() + 120
        pressed = 0.0
        while not status.exists() or not status.read_text().strip():
            assert time.monotonic() < deadline, "the app did not exit"
            if time.monotonic() - pressed > 5:
                subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True, timeout=10)
                pressed = time.monotonic()
            time.sleep(0.2)
        after = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True
        ).stdout
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=10)
    assert status.read_text().strip() == "2"
    assert "Traceback" not in after


# -- discoverability ------------------------------------------------------------------------


async def palette_titles(app: WorkbenchApp, query: str) -> list[str]:
    provider = ScreenCommands(app.screen)
    return [str(hit.text) async for hit in provider.search(query)]


@pytest.mark.parametrize("size", SIZES)
async def test_every_screen_offers_its_keys_in_the_palette_and_the_help(
    config_copy: Path, tmp_path: Path, size: tuple[int, int]
) -> None:
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        for query in ("hist", "patch", "settings", "sample", "help"):
            assert await palette_titles(app, query), f"nothing for {query!r} on the variants"
        await pilot.press("h")
        await pilot.pause()
        assert await palette_titles(app, "report")
        assert await palette_titles(app, "settings")  # navigation from any screen
        await pilot.press("s")
        await pilot.pause()
        assert await palette_titles(app, "save")
        # A text field has the focus (h types an h), yet the palette still leads to History.
        assert "History" in await palette_titles(app, "history")
        # F1 opens the help (? would be typed into the field), made from the screen's bindings.
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        names = [row.name for row in app.screen.rows]
        assert "Save" in names and "Back" in names and "Quit" in names
        assert not any("cursor" in row.help for row in app.screen.rows)  # the field's own keys
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("escape")  # leaves the settings: nothing was changed, nothing asked
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "Report" in [row.name for row in app.screen.rows]  # the history's keys
        await pilot.press("escape")


async def test_the_palette_runs_a_screen_key(config_copy: Path, tmp_path: Path) -> None:
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("ctrl+p")
        await wait_until(pilot, "the palette", lambda: isinstance(app.screen, CommandPalette), 10)
        palette = app.screen
        await pilot.press(*"history")
        commands = palette.query_one(CommandList)

        def history_highlighted() -> bool:
            at = commands.highlighted
            return at is not None and "History" in str(commands.get_option_at_index(at).prompt)

        # The search runs in a worker: Enter before its hits arrive would run nothing.
        await wait_until(pilot, "History among the hits, highlighted", history_highlighted, 10)
        await pilot.press("enter")
        await wait_until(
            pilot, "the history screen", lambda: type(app.screen).__name__ == "HistoryScreen", 10
        )


async def test_the_help_lists_each_key_with_what_it_does(config_copy: Path, tmp_path: Path):
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await app.workers.wait_for_complete()
        rows = {row.name: row for row in key_help(app.screen)}
        assert rows["Build"].key == "b" and "Nix" in rows["Build"].help
        assert rows["Patches"].key == "p"
        assert rows["Help"].key.startswith("?")
        del pilot


# -- 80x24 is a first-class size -----------------------------------------------------------


def footer_keys(app: WorkbenchApp) -> list[FooterKey]:
    return list(app.screen.query(FooterKey))


async def assert_footer_whole(app: WorkbenchApp, pilot: Pilot, width: int) -> None:
    """Every key the footer shows lies wholly on the terminal, help and quit among them."""
    # The footer is composed again for a new screen a refresh or more after it shows: wait for
    # its keys to be there and laid out (a loaded machine once found none).
    await wait_until(
        pilot,
        "the footer's keys, laid out",
        lambda: footer_keys(app) and all(key.region.width for key in footer_keys(app)),
        30,
    )
    keys = footer_keys(app)
    for key in keys:
        assert key.region.right <= width, f"{key.key_display} {key.description} is cut off"
    actions = {key.action for key in keys}
    assert {"help", "quit"} <= actions or "app.quit" in actions or "help" in actions


@pytest.mark.parametrize("size", SIZES)
async def test_the_variants_table_and_footer_fit_the_terminal(
    config_copy: Path, tmp_path: Path, size: tuple[int, int]
) -> None:
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        table = app.screen.query_one("#variants", DataTable)
        # The host detected (the row note says the cursor's row is for it), then a worker fills
        # the last-build column and the table widens it on a later refresh.
        note = app.screen.query_one("#row-note", Static)
        await wait_until(pilot, "the row note", lambda: "for this host" in text_of(note), 20)
        await widths_hold(pilot, table)
        labels = [str(column.label) for column in table.columns.values()]
        assert "ISA" in labels and "last build" in labels
        # Every column fits beside the scrollbar: nothing is pushed off to the right.
        used = sum(column.get_render_width(table) for column in table.columns.values())
        assert used <= table.scrollable_content_region.width
        if size[0] < 120:
            assert "py313-cuda12_9-sm90-avx512" in table.get_row_at(table.cursor_row)
        else:
            assert labels[3:5] == ["CUDA", "Py"]
        await assert_footer_whole(app, pilot, size[0])
        shown = {key.action for key in footer_keys(app)}
        # The main keys at every size: what a newcomer looks for (issue 14: "Settings
        # invisible" at 80 columns).
        assert {"build", "toggle_mark", "sample_build", "help", "quit"} <= shown
        assert {"patches", "settings", "history"} <= shown
        newcomer = text_of(app.screen.query_one("#newcomer", Static))
        assert len(newcomer) <= size[0] - 2  # the hint line is never cut


async def test_history_shows_the_start_time_at_80_columns(config_copy: Path, tmp_path: Path):
    from tui.fixed_history import NOW, frozen_clock, write_history

    from workbench.tui.screens.history.history_screen import started_text

    write_history(tmp_path / "state")
    app = make_app(
        str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor(), clock=frozen_clock
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("h")
        await wait_until(pilot, "the history", lambda: getattr(app.screen, "loads", 0) > 0)
        table = app.screen.query_one("#history-table", DataTable)
        newest = str(table.get_row_at(0)[-1])
        # The newest build started today: its time of day, not a date cut to "2026-01-01".
        assert newest == started_text(app.screen.rows[-1].started, NOW) or ":" in newest
        assert len(newest) <= 11
        used = sum(column.get_render_width(table) for column in table.columns.values())
        assert used <= table.scrollable_content_region.width
        await assert_footer_whole(app, pilot, 80)
    assert started_text(NOW - 600, NOW).count(":") == 1  # today: the time of day
    later = NOW + 40 * 86400  # the same year: month and day, no year
    assert started_text(NOW, later) == time.strftime("%m-%d %H:%M", time.localtime(NOW))
    assert started_text(NOW - 3 * 86400, NOW).startswith("2025-12-")  # last year: all of it


# -- the header and the settings say what will run -----------------------------------------


async def test_the_header_shows_the_settings_in_force_beside_the_recommendation(
    config_copy: Path, tmp_path: Path
) -> None:
    from workbench.configs.settings import set_settings

    app = app_on(config_copy, tmp_path)
    set_settings(config_copy, app.matrix, {"ninja_jobs": 6, "nvcc_threads": 8})
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        summary = text_of(app.screen.query_one("#host-summary", Static))
        advice = app.report.parallelism
        assert "Jobs 6 × 8 nvcc threads (your settings)" in summary  # the per-user file's
        assert f"recommended {advice.jobs} × {advice.nvcc_threads}" in summary
        assert "GiB free" in summary and " GB" not in summary


@pytest.mark.parametrize("size", SIZES)
async def test_settings_focus_the_first_field_say_on_and_off_and_ask_before_discarding(
    config_copy: Path, tmp_path: Path, size: tuple[int, int]
) -> None:
    from textual.widgets import Input, Label, Switch

    from workbench.tui.screens.settings.settings_screen import ConfirmDiscard, SettingsScreen

    path = config_copy / "settings.toml"
    before = path.read_text()
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("s")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, SettingsScreen)
        assert app.focused is screen.query_one("#field-ninja_jobs", Input)
        await pilot.press("ctrl+u", "8")  # typed straight away: the field has the focus
        await pilot.pause()
        assert screen.changes() == {"ninja_jobs": 8}
        ccache = screen.query_one("#field-ccache", Switch)
        state = screen.query_one("#state-ccache", Label)
        assert str(state.render()) == ("on" if ccache.value else "off")
        ccache.toggle()
        await pilot.pause()
        assert str(state.render()) == ("on" if ccache.value else "off")
        # Every key of settings.toml is on the form, the per-job memory figures included.
        for key in ("cxx_job_memory_gb", "cuda_job_memory_gb", "nvcc_host_isa_flags"):
            assert screen.query(f"#field-{key}")
        screen.query_one("#field-cuda_job_memory_gb", Input).value = "3.5"
        await pilot.pause()
        assert screen.changes()["cuda_job_memory_gb"] == 3.5
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmDiscard)  # not silently dropped
        await pilot.press("escape")  # keep editing
        await pilot.pause()
        assert app.screen is screen and screen.changes()
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("d")  # discard
        await pilot.pause()
        assert not isinstance(app.screen, SettingsScreen | ConfirmDiscard)
    assert path.read_text() == before


async def test_leaving_settings_can_save_them(
    config_copy: Path, tmp_path: Path, private_user_config: Path
) -> None:
    from textual.widgets import Input

    path = config_copy / "settings.toml"
    app = app_on(config_copy, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.press("s")
        await pilot.pause()
        app.screen.query_one("#field-cxx_job_memory_gb", Input).value = "0.5"
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("s")  # save
        await pilot.pause()
        assert type(app.screen).__name__ == "VariantsScreen"
    assert "cxx_job_memory_gb = 0.5" in (private_user_config / "settings.toml").read_text()
    assert "cxx_job_memory_gb = 0.3" in path.read_text()  # per user: the checkout's is kept


# -- graphs --------------------------------------------------------------------------------


async def test_the_memory_graph_scales_to_the_builds_peak_and_names_the_host_total() -> None:
    from textual.app import App, ComposeResult

    from workbench.reading.build_text import memory
    from workbench.tui.widgets.time_graph import TimeGraph

    mib, gib = 1024**2, 1024**3

    class GraphApp(App[None]):
        def compose(self) -> ComposeResult:
            yield TimeGraph("Memory", memory, 0.0, limit_fraction=0.9, autoscale=True)

    app = GraphApp()
    async with app.run_test(size=(60, 10)) as pilot:
        graph = app.query_one(TimeGraph)
        for value in (100 * mib, 500 * mib, 900 * mib, 300 * mib):
            graph.add(value, 22 * gib)
        await pilot.pause()
        lines = str(graph.render()).splitlines()
        assert "peak 900Mi" in lines[0] and "of 22.0Gi" in lines[0]
        assert lines[1].strip().startswith("1.0Gi")  # the scale: the peak's, not 22 GiB's
        # The peak's column reaches the top rows: not a flat line at the bottom.
        top_rows = "".join(lines[1:3])
        assert any(block in top_rows for block in "▅▆▇█")
        assert all(len(line) <= 60 for line in lines)


async def test_a_narrow_graph_keeps_its_peak_whole_and_drops_the_latest_value_first() -> None:
    # At 80 columns each of the build screen's three graphs is about 26 cells wide: the heading
    # ended "Memory  last 0Mi, peak 12…", cutting the figure the graph is read for.
    from textual.app import App, ComposeResult

    from workbench.reading.build_text import memory, percent
    from workbench.tui.widgets.time_graph import TimeGraph

    mib, gib = 1024**2, 1024**3

    class NarrowGraphs(App[None]):
        def compose(self) -> ComposeResult:
            yield TimeGraph("Memory", memory, 0.0, autoscale=True, id="memory")
            yield TimeGraph("CPU", percent, 100.0, scale_label="of all cores", id="cpu")

    app = NarrowGraphs()
    async with app.run_test(size=(26, 12)) as pilot:
        for value in (10 * mib, 122 * mib, 0.0):
            app.query_one("#memory", TimeGraph).add(value, 22 * gib)
            app.query_one("#cpu", TimeGraph).add(value and 40.0)
        await pilot.pause()
        memory_heading = str(app.query_one("#memory", TimeGraph).render()).splitlines()[0]
        cpu_heading = str(app.query_one("#cpu", TimeGraph).render()).splitlines()[0]
    assert memory_heading.split() == ["Memory", "peak", "122Mi"], memory_heading
    assert "…" not in cpu_heading and cpu_heading.split()[-3:] == ["of", "all", "cores"]


# -- what will run is what is shown ---------------------------------------------------------


@pytest.mark.slow
async def test_b_shows_the_exact_command_jobs_and_memory_and_starts_only_that(
    tui, bench, config_copy: Path
) -> None:
    from textual.widgets import Button

    from workbench.history.store import History
    from workbench.planning.launch import display
    from workbench.tui.screens.build.build_screen import BuildScreen
    from workbench.tui.screens.variants.confirm_build import ConfirmBuild

    shutil.copy(REPO / "flake.nix", config_copy.parent / "flake.nix")  # the flake beside them
    target = "cpu"
    app = tui()
    async with app.run_test(size=(80, 24)) as pilot:
        # The report moves the cursor to the recommended variant a refresh after it arrives:
        # let that happen first, or it would move the cursor off the cpu flavour again.
        await wait_until(pilot, "the recorded host", lambda: app.report is not None, 30)
        await screen_still(pilot)
        app.screen._move_to(target)  # the cpu linkage flavour: `.#onnxruntime-cpu`
        await pilot.pause()
        assert app.screen._highlighted() == target
        await pilot.press("b")
        await wait_until(pilot, "the preview", lambda: isinstance(app.screen, ConfirmBuild))
        dialog = app.screen
        assert isinstance(dialog, ConfirmBuild)
        planned = dialog.preview
        command = text_of(dialog.query_one("#confirm-build-command", Static))
        details = text_of(dialog.query_one("#confirm-build-details", Static))
        assert command == display(planned.build.argv)  # whole and shell-quoted
        assert "'nix-command flakes'" in command and f"--cores {planned.jobs.jobs}" in command
        assert f"{planned.jobs.jobs} jobs" in details and "GiB available" in details
        # Nix's own plan, asked before the question (here nixpkgs cannot be fetched: said so).
        plan = text_of(dialog.query_one("#confirm-build-plan", Static))
        assert plan.startswith("Nix's plan: ") and plan == "\n".join(planned.plan_lines())
        # The whole command is on the terminal: nothing cut at 80 columns.
        assert dialog.query_one("#confirm-build-command").region.right <= 80
        await pilot.press("n")
        await pilot.pause()
        with History(bench.state) as history:
            assert not history.builds()  # cancelled: nothing started
        await pilot.press("b")
        await wait_until(pilot, "the preview", lambda: isinstance(app.screen, ConfirmBuild))
        assert not app.screen.query_one("#confirm-build-yes", Button).disabled
        await pilot.press("y")
        await wait_until(
            pilot,
            "the build screen",
            lambda: isinstance(app.screen, BuildScreen) and app.screen.record is not None,
        )
    with History(bench.state) as history:
        (record,) = history.builds()
    assert record.argv == planned.build.argv  # what was shown is what ran


@pytest.mark.slow
@needs_cxx_tools
@pytest.mark.parametrize("size", SIZES)
async def test_host_notices_are_one_line_with_details_on_w_and_q_says_the_build_goes_on(
    tui, bench, cxx_project, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.tui.screens.build.build_modals import NoticesScreen
    from workbench.tui.screens.build.build_screen import BuildScreen

    checkout, _ = cxx_project
    # The sample build takes seconds: on a loaded machine it could end before `q`, which then
    # has no running build to speak of. Its g++ (the real one) waits for a file until then.
    go = gate_gxx(checkout.parent / "gate", monkeypatch)
    # Another build on this host: a ninja that sleeps, started outside the workbench.
    other = tmp_ninja_sleeper(checkout.parent / "other")
    try:
        app = tui()
        async with app.run_test(size=size) as pilot:
            await app.workers.wait_for_complete()
            await pilot.press("t")
            await wait_until(
                pilot,
                "the build screen",
                lambda: isinstance(app.screen, BuildScreen) and app.screen.record is not None,
            )
            screen = app.screen
            assert isinstance(screen, BuildScreen)
            notice = screen.query_one("#build-notice", Static)
            line = text_of(notice)
            assert line.startswith("w: details") and "other build process" in line
            assert notice.region.height == 1  # one line, not a toast over the screen
            assert not app._notifications  # and no toast either
            await pilot.press("w")
            await pilot.pause()
            assert isinstance(app.screen, NoticesScreen)
            details = [item for item in app.screen.notices if item.startswith("  pid ")]
            # Ours among them, unless a busy shared host has more than the list's first eight.
            assert details and (
                any(f"pid {other.pid} " in item for item in details) or len(details) >= 8
            )
            await pilot.press("escape")
            await pilot.pause()
            asked: dict[str, object] = {}
            leave = app.exit

            def exit_spy(*args, **kwargs) -> None:
                asked.update(kwargs)
                leave(*args, **kwargs)

            app.exit = exit_spy  # type: ignore[method-assign]
            await pilot.press("q")  # mid-build
            await pilot.pause()
        said = str(asked.get("message"))
        assert f"build #{screen.build_id} (sample-project) goes on" in said
        assert f"attach {screen.build_id}" in said and "--state-dir" in said
    finally:
        go.touch()  # the sample build goes on to its end
        other.kill()
        other.wait()
    bench.wait_ended(screen.build_id, timeout=180)


def gate_gxx(directory: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a `g++` first on PATH that runs the real one once the returned file exists."""
    real = shutil.which("g++")
    assert real is not None
    directory.mkdir(parents=True)
    go = directory / "go"
    wrapper = directory / "g++"
    wrapper.write_text(
        f"#!/bin/sh\nwhile [ ! -e {shlex.quote(str(go))} ]; do sleep 0.05; done\n"
        f'exec {shlex.quote(real)} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    return go


def _sampled(screen) -> bool:
    """The build screen holds a record whose live view has a sample of the running build."""
    record = screen.record
    return record is not None and bool((record.live or {}).get("t"))


def tmp_ninja_sleeper(directory: Path) -> subprocess.Popen:
    """A real ninja running a sleep: another build on this host, as preflight sees one."""
    directory.mkdir(parents=True)
    (directory / "build.ninja").write_text("rule nap\n  command = sleep 120\nbuild x: nap\n")
    return subprocess.Popen(["ninja", "-C", str(directory)], stdout=subprocess.DEVNULL)


# -- every process of the build ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES)
async def test_a_shows_every_process_and_d_debugs_a_hung_test_binary(
    tui, bench, tmp_path: Path, size: tuple[int, int]
) -> None:
    """A test program spinning under `workbench run` is no build tool: `a` lists it, `d`
    opens the debug screen on it."""
    from workbench.tui.screens.build.build_screen import BuildScreen
    from workbench.tui.screens.debug.debug_screen import DebugScreen
    from workbench.tui.widgets.process_table import ProcessTable

    spin = tmp_path / "spin_test.py"
    spin.write_text("while True:\n    pass\n")
    build_id = start(bench, "--name", "tests", "--", sys.executable, str(spin), cwd=tmp_path)
    app = tui()
    async with app.run_test(size=size) as pilot:
        screen = await open_screen(app, pilot, build_id)
        table = screen.query_one(ProcessTable)
        # Two polls after the supervisor's first sample (taken while the program already ran):
        # the table was filled from a view that could have shown it, and did not.
        await wait_until(pilot, "the supervisor's first sample", lambda: _sampled(screen), 20)
        polled = screen.polls
        await wait_until(pilot, "two more polls", lambda: screen.polls >= polled + 2, 20)
        assert not any(row.file and row.file.endswith("spin_test.py") for row in table.rows_shown)
        await pilot.press("a")
        await wait_until(
            pilot,
            "the test program in the table",
            lambda: any(r.file and r.file.endswith("spin_test.py") for r in table.rows_shown),
            20,
        )
        row = next(r for r in table.rows_shown if r.file and r.file.endswith("spin_test.py"))
        table.move_cursor(row=table.get_row_index(str(row.pid)))
        table.focus()
        await pilot.pause()
        assert isinstance(app.screen, BuildScreen)
        await pilot.press("d")
        await wait_until(pilot, "the debug screen", lambda: isinstance(app.screen, DebugScreen))
        assert app.screen.target_pid == row.pid
        await pilot.pause(0.5)

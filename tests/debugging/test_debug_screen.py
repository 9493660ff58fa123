"""The debug screen, driven with Pilot: recorded captures, source lines, a live hung program."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from recorded_host import recorded_doctor
from rich.console import Console
from textual.widgets import DataTable, Static

from workbench.debugging.capture.options import CaptureOptions
from workbench.debugging.model import Capture, Frame, Sample, ThreadStack, capture_from_json
from workbench.tui.app import WorkbenchApp, make_app
from workbench.tui.screens.debug.debug_screen import (
    DebugScreen,
    DiagnosisView,
    SourceView,
    read_source_window,
    resolve_source,
)

HERE = Path(__file__).resolve().parent
FAST = CaptureOptions(samples=3, interval=0.1, observe=0.1)


def recorded(name: str) -> Capture:
    return capture_from_json(json.loads((HERE / "recorded" / f"{name}.json").read_text()))


def screen_text(app: WorkbenchApp) -> str:
    """What the terminal shows, as plain text (the way export_screenshot reads the screen)."""
    console = Console(
        width=app.size.width,
        height=app.size.height,
        file=io.StringIO(),
        record=True,
        color_system=None,
        legacy_windows=False,
    )
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


def styled(text, style) -> list[str]:
    """The parts of a rich Text drawn in `style`."""
    return [text.plain[span.start : span.end] for span in text.spans if span.style == style]


async def open_screen(app: WorkbenchApp, pilot, screen: DebugScreen) -> DebugScreen:
    await app.workers.wait_for_complete()  # the variants screen's host detection
    await app.push_screen(screen)
    await app.workers.wait_for_complete()
    await pilot.pause()
    assert app.screen is screen
    return screen


@pytest.fixture
def app(config_copy: Path, tmp_path: Path) -> WorkbenchApp:
    return make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())


async def test_recorded_bridge_loop_shows_the_diagnosis_and_its_frames(app: WorkbenchApp):
    screen = DebugScreen(capture=recorded("bridge_o2"), source_roots=[HERE])
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(app, pilot, screen)
        assert screen.diagnosis is not None and screen.diagnosis.kind == "call-cycle"

        view = screen.query_one(DiagnosisView)
        lines = view.lines()
        assert lines[0].plain == "call cycle (tail-calls) — HUNG"
        assert "the provider bridge loops on itself in a static build" in lines[1].plain
        function_style = view.get_component_rich_style("diagnosis--function")
        assert {
            "ProviderHostImpl::DataTypeImpl__GetType_float",
            "DataTypeImpl::GetType<float>",
        } <= set(styled(lines[1], function_style))
        assert any(line.plain.startswith("proposed fix: guard") for line in lines)
        assert any("#ifndef ORT_STATIC_PROVIDERS" in line.plain for line in lines)

        threads = screen.query_one("#debug-threads", DataTable)
        assert threads.get_row("14736")[0] == "●"  # the looping thread
        frames = screen.query_one("#debug-frames", DataTable)
        involved = frames.get_component_rich_style("debug--involved")
        row = frames.get_row("0")
        assert row[0] == "★" and row[2].plain == "DataTypeImpl::GetType<float>"
        assert row[2].style == involved
        assert frames.get_row("1")[0] == "" and str(frames.get_row("1")[2]) == "run"

        # The looping frame is selected and its real fixture source is shown.
        source = screen.query_one(SourceView)
        assert source.window is not None and source.window.line == 7
        text = screen_text(app)
        assert "call cycle (tail-calls) — HUNG" in text
        assert "Frames of thread 1 (LWP 14736 'bridge_o2')" in text
        assert "❱ 7   return Provider_GetHost()->DataTypeImpl__GetType_float();" in text
        assert "r Re-sample" not in text  # a recorded capture: nothing to re-sample

        # Earlier samples: the top of the stack moved round the loop.
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert threads.border_title == "Threads in sample 2 of 3"
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert frames.get_row("0")[2].plain == "onnxruntime::Provider_GetHost"

        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not screen


async def test_deadlock_at_160x48_marks_both_threads(app: WorkbenchApp):
    screen = DebugScreen(capture=recorded("lock_order"), source_roots=[HERE])
    async with app.run_test(size=(160, 48)) as pilot:
        await open_screen(app, pilot, screen)
        threads = screen.query_one("#debug-threads", DataTable)
        assert [threads.get_row(tid)[0] for tid in ("14759", "14760", "14761")] == ["", "●", "●"]
        assert "mutex session_mutex (owner 14761)" in threads.get_row("14760")[7].plain
        # Both threads of the cycle carry the headline's verdict in the verdict column.
        assert [threads.get_row(tid)[5].plain for tid in ("14760", "14761")] == [
            "deadlock · HUNG",
            "deadlock · HUNG",
        ]
        text = screen_text(app)
        assert "deadlock — HUNG" in text
        assert "❱ 13   std::lock_guard<std::mutex> session(session_mutex);" in text

        # Down the thread list (the cursor starts on thread 2) to thread 3 and its source.
        await pilot.press("down")
        await pilot.pause()
        assert screen.thread_tid == 14761
        assert screen.query_one(SourceView).window.line == 19  # type: ignore[union-attr]

        # The command palette jumps to a thread by its number.
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"thread 1 (LWP")
        await app.workers.wait_for_complete()  # the palette searches in a worker
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen and screen.thread_tid == 14759
        assert screen.focused is screen.query_one("#debug-frames")


def handmade_capture(source: Path) -> Capture:
    frames = (
        Frame(0, 0x7F00, "__GI___poll", None, None, "/lib/x86_64-linux-gnu/libc.so.6"),
        Frame(1, 0x5500, "wait_for_device", str(source), 20, "/opt/app/bin/app"),
        Frame(2, 0x5510, "main", "/no/such/checkout/main.cc", 5, "/opt/app/bin/app"),
    )
    thread = ThreadStack(1, 4242, "app", "S", "do_sys_poll", frames)
    return Capture(
        pid=4242,
        command=["/opt/app/bin/app"],
        executable="/opt/app/bin/app",
        requested_samples=1,
        interval=0.0,
        samples=[Sample(0, 0.0, 0.1, (thread,))],
    )


async def test_source_lines_around_the_selected_frame(app: WorkbenchApp, tmp_path: Path):
    source = tmp_path / "device.cc"
    source.write_text("".join(f"int line_{number} = {number};\n" for number in range(1, 41)))
    screen = DebugScreen(capture=handmade_capture(source))
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(app, pilot, screen)
        view = screen.query_one(SourceView)
        # No frame is in the diagnosis: the first one whose file is here is selected.
        assert view.window is not None and view.window.path == source
        text = screen_text(app)
        assert f"{source}:20" in text
        assert "❱ 20 int line_20 = 20;" in text and "19 int line_19 = 19;" in text

        await pilot.press("tab")  # threads -> frames
        assert screen.focused is screen.query_one("#debug-frames")
        await pilot.press("down")
        await pilot.pause()
        assert view.window is None
        assert "/no/such/checkout/main.cc is not on this machine" in screen_text(app)

        await pilot.press("up", "up")
        await pilot.pause()
        assert "No file:line for __GI___poll in libc.so.6: no debug info" in screen_text(app)


def test_source_windows_and_paths(tmp_path: Path) -> None:
    source = tmp_path / "src" / "a.cc"
    source.parent.mkdir()
    source.write_text("\n".join(f"line {number}" for number in range(1, 31)) + "\n")
    window = read_source_window(source, 2, radius=5)
    assert window is not None and window.first == 1 and window.lines[-1] == "line 7"
    assert window.around(3) == (1, ("line 1", "line 2", "line 3"))
    window = read_source_window(source, 20, radius=5)
    assert window is not None and window.around(5) == (
        18,
        tuple(f"line {n}" for n in range(18, 23)),
    )
    assert read_source_window(source, 31) is None  # the file is shorter: it changed
    assert resolve_source("src/a.cc", [tmp_path / "elsewhere", tmp_path]) == source
    assert resolve_source(str(source)) == source
    assert resolve_source("/no/such/a.cc", [tmp_path]) is None


async def test_live_capture_of_the_hung_bridge_loop_then_resample_and_gdb(
    app: WorkbenchApp, start, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    program = start("bridge_o2", settle=0.2)
    # gdb for `g`: records how it was started and quits; the MI sessions get the real gdb.
    asked = tmp_path / "gdb-argv"
    fake_gdb = tmp_path / "gdb"
    fake_gdb.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *--interpreter=mi3*) exec {shutil.which("gdb")} "$@";; esac\n'
        f'printf "%s\\n" "$@" > {asked}\n'
    )
    fake_gdb.chmod(0o755)
    options = CaptureOptions(samples=3, interval=0.1, observe=0.1, gdb=str(fake_gdb))
    screen = DebugScreen(pid=program.pid, options=options)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await app.push_screen(screen)  # mounted: on_mount has started the capture
        assert screen.capturing  # the worker runs; the event loop goes on
        assert screen.check_action("resample", ()) is None  # shown, but disabled meanwhile
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not screen.capturing and screen.captures_taken == 1
        diagnosis = screen.diagnosis
        assert diagnosis is not None and diagnosis.kind == "call-cycle" and diagnosis.hung
        assert diagnosis.primary.pattern == "tail-calls"
        assert diagnosis.primary.bridge is not None
        assert diagnosis.primary.bridge.host_method == (
            "ProviderHostImpl::DataTypeImpl__GetType_float"
        )
        assert screen.query_one("#debug-threads", DataTable).get_row(str(program.pid))[0] == "●"
        text = screen_text(app)
        assert "call cycle (tail-calls) — HUNG" in text and "r Re-sample" in text
        first = screen.capture

        await pilot.press("r")
        assert screen.capturing
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.captures_taken == 2 and screen.capture is not first
        assert screen.diagnosis is not None and screen.diagnosis.kind == "call-cycle"

        # The headless test terminal cannot be handed over: `g` says so and changes nothing.
        await pilot.press("g")
        await pilot.pause()
        assert not asked.exists() and screen.captures_taken == 2

        # A real terminal can: gdb runs in it, and the process is sampled again afterwards.
        monkeypatch.setattr(app, "suspend", contextlib.nullcontext)
        await pilot.press("g")
        assert asked.read_text().split("\n")[-3:-1] == ["-p", str(program.pid)]
        assert "--nx" in asked.read_text().split("\n")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.captures_taken == 3 and screen.error is None
    assert program.state() == "R"  # left running, as found


async def test_a_pid_that_does_not_exist_is_a_clear_error(app: WorkbenchApp):
    gone = subprocess.Popen(["true"])
    gone.wait()
    screen = DebugScreen(pid=gone.pid, options=FAST)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(app, pilot, screen)
        error = screen.query_one("#debug-error", Static)
        assert error.display
        assert f"Capture failed: no process {gone.pid} (it has exited" in str(error.render())
        assert screen.diagnosis is None and not screen.capturing
        assert screen.check_action("resample", ()) is True  # r tries again
        assert f"no process {gone.pid}" in screen_text(app)


async def test_a_missing_gdb_is_a_clear_error_and_the_last_capture_stays(
    app: WorkbenchApp, start, tmp_path: Path
):
    program = start("many_threads", "2")
    options = CaptureOptions(samples=1, observe=0.05, gdb=str(tmp_path / "no-gdb"))
    screen = DebugScreen(pid=program.pid, capture=recorded("many_threads"), options=options)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(app, pilot, screen)
        assert screen.diagnosis is not None  # the capture given is shown
        await pilot.press("r")
        await app.workers.wait_for_complete()
        await pilot.pause()
        message = str(screen.query_one("#debug-error", Static).render())
        assert "no-gdb: no such gdb executable" in message
        assert "the capture below is the previous one" in message
        assert screen.diagnosis is not None and screen.diagnosis.kind == "waiting"
        assert screen.captures_taken == 0

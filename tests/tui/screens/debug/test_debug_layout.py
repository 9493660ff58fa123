"""The debug screen: at 80×24 its footer and keys stay in view whatever the capture shows; each
thread's verdict is shown (table, frames' title, diagnosis panel) and agrees with the headline,
at 80x24 and 160x48; names from the program are shown as text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from driving import screen_still
from recorded_host import recorded_doctor
from rich.text import Text
from textual.widgets import DataTable, Footer
from textual.widgets._footer import FooterKey

from workbench.debugging.model import capture_from_json
from workbench.planning.shell_command import display
from workbench.tui.app import make_app
from workbench.tui.screens.debug.debug_screen import DebugScreen, DiagnosisView

RECORDED = Path(__file__).resolve().parents[3] / "debugging" / "recorded"
CAPTURES = sorted(path.name for path in RECORDED.glob("*.json"))
PANES = ("#debug-error", "#debug-diagnosis", "#debug-threads", "#debug-frames", "#debug-source")


@pytest.mark.parametrize("size", [(80, 24), (80, 18)])
@pytest.mark.parametrize("name", CAPTURES)
@pytest.mark.parametrize("failed", [False, True], ids=["", "with-error"])
async def test_the_footer_and_its_keys_stay_in_view(
    config_copy: Path, tmp_path: Path, name: str, failed: bool, size: tuple[int, int]
) -> None:
    captured = capture_from_json(json.loads((RECORDED / name).read_text()))
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        screen = DebugScreen(capture=captured, source_roots=[RECORDED.parent])
        await app.push_screen(screen)
        await app.workers.wait_for_complete()
        if failed:  # a re-sample that failed: its error above the capture it keeps
            screen._set_error(
                "Capture failed: no process 4242 (it has exited, or the PID is wrong) "
                "(the capture below is the previous one)"
            )
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        footer = screen.query_one(Footer)
        width, height = size
        assert footer.region.y == height - 1 and footer.region.height == 1
        keys = [key for key in footer.query(FooterKey) if key.region.width]
        shown = {key.description for key in keys if key.region.x < width}
        assert {"Pane", "Earlier", "Later", "Back"} <= shown
        for pane in PANES:
            region = screen.query_one(pane).region
            assert region.bottom <= footer.region.y, f"{pane} reaches into the footer: {region}"
        frames = screen.query_one("#debug-frames").region
        assert frames.height >= 3  # its title, its header and at least one frame


SIZES = [(80, 24), (160, 48)]
# Recorded from real programs (tests/debugging/record_samples.py): four threads in the bridge
# loop with the main one joining them; a spin on a flag beside a counting loop.
VERDICT_CAPTURES = ["bridge_o2_threads", "spin_mixed"]


def _recorded(name: str):
    return capture_from_json(json.loads((RECORDED / f"{name}.json").read_text()))


def _open_debug(captured):
    async def run_before(pilot) -> None:
        app = pilot.app
        await app.workers.wait_for_complete()
        await pilot.pause()
        await app.push_screen(DebugScreen(capture=captured, source_roots=[RECORDED.parent]))
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        await screen_still(pilot)

    return run_before


@pytest.mark.snapshot
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", VERDICT_CAPTURES)
def test_debug_screen_with_a_verdict_per_thread(
    snap_compare, config_copy: Path, tmp_path: Path, name: str, size: tuple[int, int]
) -> None:
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    assert snap_compare(app, terminal_size=size, run_before=_open_debug(_recorded(name)))


@pytest.mark.parametrize("name", VERDICT_CAPTURES)
async def test_each_thread_s_verdict_agrees_with_the_headline(
    config_copy: Path, tmp_path: Path, name: str
) -> None:
    from workbench.debugging.bt_report import thread_verdict_label

    captured = _recorded(name)
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=(160, 48)) as pilot:
        await _open_debug(captured)(pilot)
        screen = app.screen
        assert isinstance(screen, DebugScreen) and screen.diagnosis is not None
        diagnosis = screen.diagnosis
        verdicts = diagnosis.thread_verdicts()
        table = screen.query_one("#debug-threads", DataTable)
        column = [str(cell) for cell in table.get_column("verdict")]
        threads = captured.samples[-1].threads
        assert column == [thread_verdict_label(verdicts.get(t.tid)) for t in threads]
        # Every thread the headline names carries the headline's verdict, in the table and in
        # the frames' title when selected.
        for thread in threads:
            if thread.tid in diagnosis.primary.threads:
                row = table.get_row(str(thread.tid))
                assert str(row[5]).endswith("HUNG") and diagnosis.hung is True
        view_text = "\n".join(line.plain for line in screen.query_one(DiagnosisView).lines())
        assert "per thread:" in view_text
        assert "— the diagnosis above" in view_text
        other = [f for f in diagnosis.findings[1:] if f.threads]
        for finding in other:  # another verdict shows its own summary and evidence
            assert finding.summary in view_text
            assert all(item in view_text for item in finding.evidence)
        for _ in threads:
            await pilot.press("down")
        frames_title = str(screen.query_one("#debug-frames").border_title)
        assert frames_title.startswith("Frames of thread")


async def test_a_hostile_thread_name_is_shown_as_text(config_copy: Path, tmp_path: Path) -> None:
    # Thread names are the program's (prctl PR_SET_NAME): markup and escapes must not act.
    import dataclasses

    captured = _recorded("spin_mixed")
    hostile = "[bold red]x\x1b]0;t\x07"
    # The recorded name replaced: what a program naming its thread so would show.
    captured.samples = [
        dataclasses.replace(
            sample,
            threads=tuple(
                dataclasses.replace(thread, name=hostile) if thread.gdb_id == 2 else thread
                for thread in sample.threads
            ),
        )
        for sample in captured.samples
    ]
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=(160, 48)) as pilot:
        await _open_debug(captured)(pilot)
        screen = app.screen
        table = screen.query_one("#debug-threads", DataTable)
        row = table.get_row(str(captured.samples[-1].threads[1].tid))
        assert str(row[3]) == "[bold red]x^[]0;t^G"
        screen.select_thread(captured.samples[-1].threads[1].tid)
        await pilot.pause()
        title = screen.query_one("#debug-frames").border_title
        assert "[bold red]x" in str(Text.from_markup(str(title)).plain)


@pytest.mark.parametrize("size", SIZES)
async def test_the_sub_title_shows_the_command_shell_quoted_and_cut_only_at_its_end(
    config_copy: Path, tmp_path: Path, size: tuple[int, int]
) -> None:
    captured = _recorded("spin_mixed")
    captured.command = ["/opt/my app/bin/onnx test", "--gtest_filter=Provider*", "it's", "[b]"]
    captured.command += [f"--case={n}" for n in range(12)]
    whole = display(captured.command)
    assert len(whole) > 100  # longer than the 60 characters it was once clipped to
    app = make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())
    async with app.run_test(size=size) as pilot:
        await app.workers.wait_for_complete()
        await app.push_screen(DebugScreen(capture=captured, source_roots=[RECORDED.parent]))
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert screen.sub_title == f"debug · process {captured.pid} · {whole}"
        await screen_still(pilot)
        header = app.screen._compositor.render_strips()[0].text.strip()
        # The command as a shell reads it, from its start; the header cuts it at its end.
        shown = header.split(f"debug · process {captured.pid} · ", 1)[1]
        assert shown.endswith("…") and whole.startswith(shown[:-1])
        assert shown.startswith("'/opt/my app/bin/onnx")  # quoted: the space is in the name
        if size[0] >= 160:
            assert "'--gtest_filter=Provider*' 'it'\"'\"'s' '[b]' --case=0" in shown  # text

"""The build screen's once-a-second poll leaves the event loop nearly idle (issue 23, item 3):
the worker reads the history (SQLite), parses the row's JSON into its typed views and formats
every line; the handler on the event loop only compares and draws what changed. An unchanged
process table is not redrawn: no cell set, no refresh, nothing written to the terminal.

A running build is recorded by hand (this test process plays its supervisor and its compiler,
as in test_build_screen's stall test), so each poll's row is known."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from driving import open_screen, wait_until
from recorded_builds import new_build
from supervision.supervised import Bench
from textual.app import App, ComposeResult

from workbench.history.store import History
from workbench.progress.live_view import LiveView, ProgressView
from workbench.supervision.stall import ProcessRow
from workbench.tui.screens.build.build_screen import BuildScreen
from workbench.tui.widgets.process_table import ProcessTable

_watching = threading.local()
_events: list[tuple[str, object]] = []


def _audit(event: str, args: tuple[object, ...]) -> None:
    # Audit hooks cannot be removed: this one records only while a test's flag is set, and
    # only on the thread that set it (the event loop's).
    if getattr(_watching, "on", False) and (
        event == "open" or event.startswith("sqlite3") or event in ("os.listdir", "os.scandir")
    ):
        _events.append((event, args[0] if args else None))


sys.addaudithook(_audit)


def _running_build(state: Path) -> int:
    me = psutil.Process()
    with History(state) as history:
        record = history.create(new_build(argv=("ninja",), eta_key="event-loop"))
        Path(record.log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(record.log_path).write_text("[3/12] Building CXX object heavy.cc.o\n")
        history.set_supervisor(record.id, me.pid, me.create_time())
        history.mark_running(record.id, me.pid, os.getpgid(0), time.time())
        _update(history, record.id, 3)
    return record.id


def _update(history: History, build_id: int, done: int) -> None:
    job = {
        "pid": os.getpid(),
        "tool": "cc1plus",
        "kind": "compiler",
        "file": "/src/heavy.cc",
        "cpu_percent": 99.0,
        "rss": 10**8,
        "running_s": 60.0 + done,
    }
    live = {"t": time.time(), "cpu_percent": 50.0, "rss": 10**8, "memory_available": 10**10}
    progress = {"step": {"tool": "ninja", "done": done, "total": 12}, "fraction": done / 12}
    history.update_live(build_id, done, progress, {**live, "jobs": [job]})


async def test_the_poll_handler_reads_and_parses_nothing_on_the_event_loop(
    tui, bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_id = _running_build(bench.state)
    parsed: list[str] = []
    for view in (LiveView, ProgressView):
        original = view.from_json.__func__  # type: ignore[attr-defined]

        def counted(cls, data, _original=original):  # type: ignore[no-untyped-def]
            if getattr(_watching, "on", False):
                parsed.append(cls.__name__)
            return _original(cls, data)

        monkeypatch.setattr(view, "from_json", classmethod(counted))
    handled: list[int] = []
    handler = BuildScreen.on_build_screen_polled

    def watched(self: BuildScreen, message: BuildScreen.Polled) -> None:
        _watching.on = True
        try:
            handler(self, message)
        finally:
            _watching.on = False
        handled.append(message.poll.record.progress["step"]["done"])

    monkeypatch.setattr(BuildScreen, "on_build_screen_polled", watched)
    _events.clear()
    app = tui()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        await wait_until(pilot, "a first poll handled", lambda: len(handled) >= 1, 15)
        with History(bench.state) as history:
            _update(history, build_id, 4)
        await wait_until(pilot, "the poll of step 4 handled", lambda: 4 in handled, 15)
        # Drawn with the panes: at that poll or the next (the build screen's `refresh`).
        await wait_until(
            pilot,
            "step 4 drawn",
            lambda: "4/12" in str(screen.query_one("#build-progress-text").render()),
            15,
        )
    assert _events == [], f"file or SQLite I/O on the event loop: {_events[:5]}"
    assert parsed == [], f"the row's JSON parsed on the event loop: {parsed[:5]}"


class OneProcessTable(App[None]):
    def compose(self) -> ComposeResult:
        yield ProcessTable(id="processes")


def _rows(seconds: float) -> list[ProcessRow]:
    return [
        ProcessRow(pid, "compiler", "cc1plus", f"/src/unit_{pid}.cc", 99.0, 10**8, seconds, "R")
        for pid in (101, 102, 103)
    ]


async def test_an_unchanged_process_table_is_not_redrawn_and_a_changed_one_only_its_cells(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = OneProcessTable()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(ProcessTable)
        table.show(_rows(10.0))
        await pilot.pause()
        table.move_cursor(row=1)
        refreshed: list[object] = []
        cleared: list[object] = []
        updated: list[tuple[str, str]] = []
        original_refresh, original_clear, original_update = (
            table.refresh,
            table.clear,
            table._set_cell,
        )
        monkeypatch.setattr(
            table, "refresh", lambda *a, **k: (refreshed.append(a), original_refresh(*a, **k))[1]
        )
        monkeypatch.setattr(
            table, "clear", lambda *a, **k: (cleared.append(a), original_clear(*a, **k))[1]
        )

        def update(row: str, column: str, value: object) -> bool:
            updated.append((row, column))
            return original_update(row, column, value)

        monkeypatch.setattr(table, "_set_cell", update)
        table.show(_rows(10.0))
        await pilot.pause()
        assert (refreshed, cleared, updated) == ([], [], [])
        table.show(_rows(75.0))  # each process one minute older: only the time column changes
        await pilot.pause()
        assert cleared == []
        assert sorted(updated) == [("101", "time"), ("102", "time"), ("103", "time")]
        assert table.selected_pid() == 102  # the rows stayed, and the cursor with them
        assert "1m15s" in table.render_line(2).text


async def test_the_same_processes_in_another_order_are_reordered_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A live build's CPU order moves most seconds: the rows are reordered, not emptied and
    filled again (each refill measured every cell), and the highlight stays on its process."""
    app = OneProcessTable()
    async with app.run_test(size=(120, 12)) as pilot:
        table = app.query_one(ProcessTable)
        table.show(_rows(10.0))
        await pilot.pause()
        table.move_cursor(row=1)
        cleared: list[object] = []
        original_clear = table.clear
        monkeypatch.setattr(
            table, "clear", lambda *a, **k: (cleared.append(a), original_clear(*a, **k))[1]
        )
        reordered = [
            ProcessRow(pid, "compiler", "cc1plus", f"/src/unit_{pid}.cc", cpu, 10**8, 11.0, "R")
            for pid, cpu in ((101, 50.0), (102, 70.0), (103, 90.0))
        ]
        table.show(reordered)  # sorted by CPU: 103, 102, 101
        await pilot.pause()
        assert cleared == []
        assert [str(table.get_row_at(i)[0]) for i in range(3)] == ["103", "102", "101"]
        assert table.selected_pid() == 102
        lines = [table.render_line(y).text for y in (1, 2, 3)]
        assert ["103" in lines[0], "102" in lines[1], "101" in lines[2]] == [True] * 3, lines
        assert "90" in lines[0] and "11.0s" in lines[0], lines


def test_the_poll_keeps_one_history_open_a_thread(tmp_path: Path) -> None:
    """Opening the history each second ran its schema check each second (a third of the
    poll's CPU): a worker thread keeps the one it opened, one at a time, and opens it again
    after an error."""
    from workbench.errors import WorkbenchError
    from workbench.tui.screens.build.build_screen import (
        forget_polling_history,
        polling_history,
    )

    first, second = tmp_path / "one", tmp_path / "two"
    history = polling_history(first)
    assert polling_history(first) is history
    other = polling_history(second)  # another state directory: the first one is closed
    with pytest.raises(WorkbenchError, match="closed database"):
        history.get(1)
    with pytest.raises(WorkbenchError, match="no build #1"):  # open, and empty
        other.get(1)
    assert polling_history(second) is other
    forget_polling_history(second)
    again = polling_history(second)
    assert again is not other
    forget_polling_history(second)

"""The build screen's panes (processes, graphs, log) are drawn every `refresh` seconds (the
per-user setting, 2 by default, as htop's -d), the head (the title's clock, progress, ETA) at
every once-a-second poll (issue 23, item 2: nearly every line of those panes changes each second
on a live build, and Textual's cost a line is most of the TUI's CPU). Every sample still reaches
the graphs (no second is filled with the one before), the table says how often it is drawn, and
a key that changes the panes (`a`) has them drawn at the next poll.

A running build is recorded by hand (this test process plays its supervisor and its compiler, as
in test_build_screen_event_loop), so each poll's row is known."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from driving import open_screen, wait_until
from recorded_builds import new_build
from recorded_host import recorded_doctor
from supervision.supervised import Bench
from textual.widgets import Static

from workbench.configs.user_settings import REFRESH_DEFAULT_S, check_own
from workbench.errors import ConfigError
from workbench.history.store import History
from workbench.tui.app import make_app
from workbench.tui.screens.build.build_screen import BuildScreen
from workbench.tui.widgets.process_table import ProcessTable
from workbench.tui.widgets.time_graph import TimeGraph


def _running_build(state: Path, t: float) -> int:
    """A build at step 3 whose supervisor's first sample is at `t`."""
    import psutil

    me = psutil.Process()
    with History(state) as history:
        record = history.create(new_build(argv=("ninja",), eta_key="cadence"))
        Path(record.log_path).parent.mkdir(parents=True, exist_ok=True)
        Path(record.log_path).write_text("[3/12] Building CXX object heavy.cc.o\n")
        history.set_supervisor(record.id, me.pid, me.create_time())
        history.mark_running(record.id, me.pid, os.getpgid(0), time.time())
        _update(history, record.id, 3, t)
    return record.id


def _update(history: History, build_id: int, done: int, t: float) -> None:
    """The supervisor's second: step `done`, the compiler `done` minutes old ("4m00s"), a
    sample at `t` whose CPU is `done` x 10%."""
    job = {
        "pid": os.getpid(),
        "tool": "cc1plus",
        "kind": "compiler",
        "file": "/src/heavy.cc",
        "cpu_percent": 99.0,
        "rss": 10**8,
        "running_s": 60.0 * done,
    }
    live = {"t": t, "cpu_percent": 10.0 * done, "rss": 10**8, "memory_available": 10**10}
    progress = {"step": {"tool": "ninja", "done": done, "total": 12}, "fraction": done / 12}
    history.update_live(build_id, done, progress, {**live, "jobs": [job]})


def _handled(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The step of each poll the screen handled, in order; after each, its title (the clock)
    is checked to be the one drawn."""
    handled: list[int] = []
    handler = BuildScreen.on_build_screen_polled

    def watched(self: BuildScreen, message: BuildScreen.Polled) -> None:
        handler(self, message)
        head = message.poll.head
        assert head is not None
        drawn = str(self.query_one("#build-title", Static).render())
        assert drawn == head.title.plain, (drawn, head.title.plain)  # the clock at every poll
        handled.append(message.poll.record.progress["step"]["done"])

    monkeypatch.setattr(BuildScreen, "on_build_screen_polled", watched)
    return handled


def _table_text(screen: BuildScreen) -> str:
    table = screen.query_one(ProcessTable)
    return " ".join(table.render_line(y).text for y in range(table.size.height))


async def test_the_panes_are_drawn_every_refresh_the_head_every_poll(
    tui, bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = time.time()
    build_id = _running_build(bench.state, t)
    handled = _handled(monkeypatch)
    app = tui()
    assert app.panes_refresh_s == REFRESH_DEFAULT_S == 2
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        await wait_until(pilot, "a first poll handled", lambda: len(handled) >= 1, 15)
        await wait_until(pilot, "the panes drawn", lambda: "3m00s" in _table_text(screen), 15)
        cpu = screen.query_one("#build-cpu", TimeGraph)
        table = screen.query_one(ProcessTable)
        await wait_until(
            pilot, "the table's title", lambda: "every 2s" in str(table.border_title), 15
        )
        # Three seconds of the supervisor, each seen by its own poll; the panes are drawn
        # after some of them, not after each.
        # (step, the table's time cell, the progress line's step, CPU samples)
        steps: list[tuple[int, int, int, int]] = []
        for done in (4, 5, 6):
            with History(bench.state) as history:
                _update(history, build_id, done, t + done - 3)
            await wait_until(pilot, f"the poll of step {done}", lambda d=done: d in handled, 15)
            text = _table_text(screen)
            progress = str(screen.query_one("#build-progress-text").render())
            cell = next((m for m in (3, 4, 5, 6) if f"{m}m00s" in text), 0)
            step = next((m for m in (3, 4, 5, 6) if f"{m}/12" in progress), 0)
            steps.append((done, cell, step, cpu.history.total))
        # Drawn at two of the three polls at most, and one poll at least left undrawn: the
        # time and progress shown then are an earlier poll's, the same one's for both.
        stale = [each for each in steps if each[1] != each[0]]
        assert stale, f"the panes were drawn at every poll: {steps}"
        assert all(cell == step for _, cell, step, _ in steps), steps
        # Every sample reaches the graph when the panes are drawn: none skipped, none filled.
        await wait_until(pilot, "step 6 drawn", lambda: "6m00s" in _table_text(screen), 15)
        assert cpu.history.total == 4, steps  # samples of steps 3, 4, 5, 6
        assert list(cpu.samples)[-3:] == [40.0, 50.0, 60.0]


async def test_refresh_1_draws_the_panes_at_every_poll(
    config_copy: Path, bench: Bench, private_user_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (private_user_config / "settings.toml").write_text("refresh = 1\n")
    t = time.time()
    build_id = _running_build(bench.state, t)
    handled = _handled(monkeypatch)
    app = make_app(str(config_copy), str(bench.state), doctor=recorded_doctor())
    assert app.panes_refresh_s == 1
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        await wait_until(pilot, "a first poll handled", lambda: len(handled) >= 1, 15)
        table = screen.query_one(ProcessTable)
        for done in (4, 5):
            with History(bench.state) as history:
                _update(history, build_id, done, t + done - 3)
            await wait_until(pilot, f"the poll of step {done}", lambda d=done: d in handled, 15)
            assert f"{done}m00s" in _table_text(screen)  # drawn with the poll that found it
        assert " · every " not in str(table.border_title)


async def test_the_all_key_has_the_panes_drawn_at_the_next_poll(
    tui, bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_id = _running_build(bench.state, time.time())
    handled = _handled(monkeypatch)
    app = tui()
    app.panes_refresh_s = 60  # no drawing but the first, unless a key asks for one
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await open_screen(app, pilot, build_id)
        table = screen.query_one(ProcessTable)
        await wait_until(
            pilot, "the first drawing", lambda: "every 60s" in str(table.border_title), 15
        )
        polls = len(handled)
        await pilot.press("a")
        await wait_until(
            pilot,
            "the table's title saying every process",
            lambda: str(table.border_title).startswith("All processes"),
            15,
        )
        assert len(handled) <= polls + 2  # the poll the key started, or one already on its way


def test_refresh_takes_whole_seconds_from_1_to_60(private_user_config: Path) -> None:
    assert check_own("refresh", "3") == 3
    for wrong in ("0", "61", "0.5", "fast", True):
        with pytest.raises(ConfigError, match=r"refresh = .*refused.*allowed: 1-60"):
            check_own("refresh", wrong)


def test_a_bad_refresh_in_the_user_file_names_its_line(
    config_copy: Path, tmp_path: Path, private_user_config: Path
) -> None:
    (private_user_config / "settings.toml").write_text('theme = "nord"\nrefresh = 0.25\n')
    with pytest.raises(ConfigError, match=r"settings\.toml:2: refresh = 0\.25: refused"):
        make_app(str(config_copy), str(tmp_path / "state"), doctor=recorded_doctor())

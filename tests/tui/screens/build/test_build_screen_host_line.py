"""The build screen's line about the rest of the host keeps its meaning at 80 columns: it read
"1 other build pro…" in a new user's trial (real builds of fmt and libuv at 80x24), the count
of other builds cut through its noun. Narrow, it says the same in fewer words; at 160 columns it
is the line `attach` prints. Real ninja as the other build, the real supervisor, Pilot."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from driving import open_screen, start, wait_until
from needed_tools import needs_ninja
from supervision.supervised import Bench
from textual.widgets import Static

pytestmark = needs_ninja

# Another build on the host: a ninja outside the watched build's session, busy in a sleep.
OTHER = "rule wait\n  command = sleep 600\nbuild never: wait\n"

WIDE = re.compile(
    r"w: details · other processes use \d+\.\d of \d+ cores \(mean \d+\.\d\); "
    r"\d+ other build process(es)? on this host"
)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_other_builds_line_keeps_its_noun_at_80_columns(
    tui, bench: Bench, tmp_path: Path, size: tuple[int, int]
) -> None:
    other_tree = tmp_path / "other"
    other_tree.mkdir()
    (other_tree / "build.ninja").write_text(OTHER)
    # Started with the bench's token: its cleanup ends this ninja and its sleep too.
    other = subprocess.Popen(
        ["ninja", "-C", str(other_tree)],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
        env=bench.env(),
    )
    try:
        build_id = start(bench, "--name", "sleeper", "--", "sleep", "60", cwd=tmp_path)
        app = tui()
        async with app.run_test(size=size) as pilot:
            screen = await open_screen(app, pilot, build_id)
            notice = screen.query_one("#build-notice", Static)

            def drawn() -> str:
                return notice.render_line(0).text.strip() if notice.display else ""

            def said() -> str:
                return str(notice.render())

            await wait_until(
                pilot,
                "the line naming the other CPU use and the other build",
                lambda: "other build process" in said() and "cores" in said() and drawn(),
                60,
            )
            line = drawn()
            assert "…" not in line, line
            assert re.search(r"\d+ other build process(es)?( on this host)?$", line), line
            if size == (160, 48):
                assert WIDE.fullmatch(line), line  # the line attach prints, unchanged
        bench.run("stop", str(build_id), timeout=60)
    finally:
        os.killpg(other.pid, signal.SIGKILL)  # its own session: the ninja and its sleep
        other.wait()

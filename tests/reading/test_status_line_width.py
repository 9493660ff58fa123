"""`attach`'s status line in a terminal's width: the parts that matter least are left out whole,
never cut. At 80 columns it read "... · ETA 14.5s (8.7s–24.6s) · CPU 1.9" (of "CPU 1.9/2 cores":
another figure), the build's peak and the files compiling cut off after it."""

from __future__ import annotations

import os
from pathlib import Path

from recorded_builds import running_build

from workbench.history.store import History
from workbench.progress.live_view import EtaView, LiveView, Peaks, RunningEdge
from workbench.reading.follow import status_line


def _record(tmp_path: Path):  # -> BuildRecord
    live = LiveView(
        t=1000.0,
        cpus=2,
        cpu_percent=95.0,
        cpu_cores=1.9,
        rss=80 << 20,
        memory_available=22 << 30,
        running=(
            RunningEdge("/tmp/trial/libuv/test/test-udp-send-and-recv.c", "cc1", "compiler", 0.4),
        ),
        peak=Peaks(rss=110 << 20, rss_at=999.0, cpu_cores=2.0, compile_jobs=2),
        eta=EtaView(14.5, 8.7, 24.6, "another tree", False),
    )
    progress = {"step": {"tool": "ninja", "done": 270, "total": 469, "description": "x"}}
    with History(tmp_path / "state") as history:
        record = running_build(history, pid=os.getpid())
        history.update_live(record.id, 1, progress, live.to_json())
        return history.get(record.id)


def test_a_narrow_line_keeps_whole_parts_by_what_matters(tmp_path: Path) -> None:
    record = _record(tmp_path)
    whole = status_line(record)
    for part in ("ninja 270/469", "ETA 14.5s (8.7s–24.6s)", "CPU 1.9/2 cores", "peak 110 MiB"):
        assert part in whole, whole
    assert "test-udp-send-and-recv.c" in whole
    parts = whole.split(" · ")
    for width in (200, 120, 100, 79, 60, 40):
        line = status_line(record, width=width)
        assert len(line) <= width, (width, line)
        # Every part shown is one of the whole line's parts, whole, in its order.
        shown = line.split(" · ")
        assert all(part in parts for part in shown), (width, line)
        assert shown == [part for part in parts if part in shown], (width, line)
    # At 79 columns: the build, its progress and its ETA; no figure cut in two.
    narrow = status_line(record, width=79).split(" · ")
    assert narrow[1].startswith("ninja 270/469") and narrow[2] == "ETA 14.5s (8.7s–24.6s)"
    assert not any(part.startswith("CPU") for part in narrow), narrow
    # Wider: the peak and what compiles come before CPU and memory.
    wider = status_line(record, width=130)
    assert "peak 110 MiB" in wider and "test-udp-send-and-recv.c" in wider, wider
    assert "available" not in wider, wider
    # Narrower than the build's own name and state: cut, and says so.
    tiny = status_line(record, width=10)
    assert len(tiny) == 10 and tiny.endswith("…"), tiny

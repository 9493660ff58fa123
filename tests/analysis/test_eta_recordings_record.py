"""`benchmarks/eta_recordings.py record` builds real CMake trees under the real `workbench run`
(cmake, ninja and the C compiler of this host) and keeps each run as a recording that
`eta_accuracy.py --recordings` scores; `import` splits them into one file each. The quick plan:
a small generated C tree built once, rebuilt clean, and built again in a fresh tree with busy
loops beside it (`watch`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from needed_tools import needs

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

pytestmark = [needs("cmake", "ninja", "cc"), pytest.mark.slow(reason="three real builds")]


def test_record_quick_keeps_every_run_and_import_splits_them(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "eta_recordings.py"),
            "record",
            "--quick",
            "--work",
            str(tmp_path / "work"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads((out / "eta-recordings-quick.json").read_text())
    assert not [e for e in document["log"] if "skipped" in e or "failed" in e], document["log"]
    recordings = {r["project"]: r for r in document["recordings"]}
    assert sorted(recordings) == ["quick-j2", "quick-j2-busy-loops"]
    plain = recordings["quick-j2"]
    assert [run["label"].split(",")[0] for run in plain["runs"]] == [
        "first build (no history)",
        "clean rebuild",
    ]
    for recording in recordings.values():
        assert recording["build"] == "workbench run -- ninja -C BUILD -j2"
        assert recording["load"] in ("quiet host", "shared host"), recording["host"]
        for run in recording["runs"]:
            # Every edge ninja ran, from the build's own log (6 units twice, 2 programs, the
            # library's links), with its times inside the run (ninja's clock starts a few ms
            # before the supervisor marks the build started).
            assert run["edge_total"] == len(run["edges"]) >= 16, run
            assert all(-1 <= e[0] <= e[1] <= run["duration_s"] + 1 for e in run["edges"]), run
            assert "fractions" in run and "cpu" in run, sorted(run)
    # What each edge waited for, from the tree's ninja graph: a program's link waits for its
    # library (the static one for `tool`) and its own object; a compile waits for nothing built.
    waits = plain["dependencies"]
    assert len(waits) == plain["runs"][0]["edge_total"], sorted(waits)
    assert "libquick_static.a" in waits["tool"] and "CMakeFiles/tool.dir/main.c.o" in waits["tool"]
    assert waits["CMakeFiles/quick_static.dir/u0.c.o"] == []
    busy = recordings["quick-j2-busy-loops"]["runs"][0]
    assert busy["contention"]["hogs"] >= 1
    assert busy["contention"]["build_id"] is not None

    into = tmp_path / "eta_runs"
    into.mkdir()
    subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "eta_recordings.py"),
            "import",
            str(out / "eta-recordings-quick.json"),
            "--tag",
            "vm",
            "--into",
            str(into),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    files = sorted(path.name for path in into.iterdir())
    assert files == ["vm-quick-j2-busy-loops.json", "vm-quick-j2.json"]
    split = json.loads((into / "vm-quick-j2.json").read_text())
    assert split["project"] == "vm quick-j2" and split["runs"] == plain["runs"]

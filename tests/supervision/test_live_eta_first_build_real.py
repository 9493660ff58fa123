"""A first build's ETA through the real supervisor: a C++ tree built by real ninja and g++ with
no earlier run of it. The supervisor reads the tree's ninja graph, costs the edges left by
source and kind (`LiveEta.plan`, `EdgeCosts`) and hands the sampler's running edges and the
host's contention to each estimate; the live view says it is a first build."""

from __future__ import annotations

from pathlib import Path

import pytest
from needed_tools import needs
from supervised import Bench

pytestmark = [
    needs("ninja", "g++"),
    pytest.mark.slow(reason="a real build held until its ETA is seen"),
]

SOURCES = 4
# Each source compiled into two targets, as CMake builds a library's static and shared forms.
TARGETS = ("tool_static", "tool_shared")


def write_tree(directory: Path) -> None:
    (directory / "src").mkdir(parents=True)
    lines = [
        "rule cxx",
        "  command = g++ -c $in -o $out",
        "rule join",
        # Held at its last edge while a file named `hold` exists: the build stays running,
        # whatever the machine's load, until the test has seen the ETA.
        "  command = while [ -e hold ]; do sleep 0.05; done; cat $in > $out",
    ]
    objects = []
    for n in range(SOURCES):
        (directory / "src" / f"f{n}.cc").write_text(f"int f{n}() {{ return {n}; }}\n")
        for target in TARGETS:
            output = f"CMakeFiles/{target}.dir/src/f{n}.cc.o"
            objects.append(output)
            lines.append(f"build {output}: cxx src/f{n}.cc")
    lines.append("build all: join " + " ".join(objects))
    (directory / "build.ninja").write_text("\n".join(lines) + "\n")


def test_a_first_build_is_estimated_edge_by_edge_and_says_so(bench: Bench, tmp_path: Path) -> None:
    directory = tmp_path / "tree"
    write_tree(directory)
    (directory / "hold").touch()
    process = bench.start("run", "-d", "--", "ninja", "-C", str(directory), "-j2")
    assert process.wait(timeout=60) == 0
    build = bench.latest_id()

    def estimated() -> object:
        record = bench.record(build)
        live = record.live or {}
        if live.get("eta_s") is not None:
            return record
        return None if record.active else record

    record = bench.wait_for("a first build's ETA", estimated, timeout=120)
    assert record.active, "the build ended before any ETA"
    live = record.live
    assert live["eta_first_build"] is True
    assert "by source and kind of edge" in live["eta_basis"], live["eta_basis"]
    assert live["eta_low_s"] <= live["eta_s"] <= live["eta_high_s"]
    (directory / "hold").unlink()
    assert bench.wait_ended(build).state == "succeeded"

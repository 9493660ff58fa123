"""A first build of a tree whose sources another tree built before on this host, through the real
supervisor and real ninja: the second build directory's ETA costs each edge at its time in the
first tree's run (`LiveEta.find_other_tree`, `eta_model.from_other_tree`) and says so, where a
first build with nothing to learn from would cost the heavy unit like the light ones; a tree
ninja built before workbench watched it learns from its own `.ninja_log` the same way, and one
beside another build directory ninja built from that one's, unless ninja runs only part of it
(an incremental build)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from needed_tools import needs
from supervised import Bench

pytestmark = [
    needs("ninja"),
    pytest.mark.slow(reason="two real builds, the second held until its ETA is seen"),
]

LIGHT = 6
HEAVY_S = 4.0


def write_tree(directory: Path) -> None:
    """Six light units (0.2 s), a held one (`held.c`: it waits while a file named `hold` is
    there, so the second build stays before its heavy unit, whatever the machine's load), the
    heavy unit (4 s) and the link, in that order at -j1."""
    (directory / "src").mkdir(parents=True)
    lines = [
        "rule cc",
        "  command = sleep $seconds; touch $out",
        "rule held",
        "  command = while [ -e hold ]; do sleep 0.05; done; touch $out",
        "rule link",
        "  command = cat $in > $out",
    ]
    objects = []
    for n in range(LIGHT):
        (directory / "src" / f"u{n}.c").touch()
        output = f"CMakeFiles/lib.dir/src/u{n}.c.o"
        objects.append(output)
        lines += [f"build {output}: cc src/u{n}.c", "  seconds = 0.2"]
    for name in ("held", "heavy"):
        (directory / "src" / f"{name}.c").touch()
    objects.append("CMakeFiles/lib.dir/src/held.c.o")
    lines.append("build CMakeFiles/lib.dir/src/held.c.o: held src/held.c")
    objects.append("CMakeFiles/lib.dir/src/heavy.c.o")
    lines += ["build CMakeFiles/lib.dir/src/heavy.c.o: cc src/heavy.c", f"  seconds = {HEAVY_S}"]
    lines.append("build liblib.a: link " + " ".join(objects))
    (directory / "build.ninja").write_text("\n".join(lines) + "\n")


def _held_build_eta(bench: Bench, tree: Path, says: str) -> tuple[int, dict[str, Any]]:
    """Start `ninja -C tree -j1` under workbench in the background, held before its heavy
    unit (`hold`), and wait for its live view's ETA whose basis says `says` (any ETA for "");
    fails if the build ends first. Returns the build's id and that live view."""
    (tree / "hold").touch()
    process = bench.start("run", "-d", "--", "ninja", "-C", str(tree), "-j1")
    assert process.wait(timeout=60) == 0
    build = bench.latest_id()

    def estimated() -> object:
        record = bench.record(build)
        live = record.live or {}
        if live.get("eta_s") is not None and says in (live.get("eta_basis") or ""):
            return record
        return None if record.active else record

    record = bench.wait_for(f"an ETA saying {says!r}", estimated, timeout=120)
    assert record.active, f"the build ended before its ETA said {says!r}"
    return build, record.live


def _release(bench: Bench, tree: Path, build: int) -> None:
    """Let the held build go on, and see it succeed."""
    (tree / "hold").unlink()
    assert bench.wait_ended(build).state == "succeeded"


def test_a_first_build_learns_from_another_tree_of_the_same_sources(
    bench: Bench, tmp_path: Path
) -> None:
    first = tmp_path / "release-a"
    write_tree(first)
    process = bench.start("run", "--", "ninja", "-C", str(first), "-j1")
    assert process.wait(timeout=120) == 0
    earlier = bench.latest_id()
    assert bench.wait_ended(earlier).state == "succeeded"

    second = tmp_path / "release-b"
    write_tree(second)
    build, live = _held_build_eta(bench, second, "another tree")
    assert build != earlier
    assert live["eta_first_build"] is False
    assert f"build #{earlier}" in live["eta_basis"], live["eta_basis"]
    # Held before its heavy unit: 4 s of it (at this build's pace against the other tree's,
    # sleeps either way) are still to come. Costed like the light units it would be 0.2 s.
    assert live["eta_s"] >= 0.5 * HEAVY_S, live
    assert live["eta_low_s"] <= live["eta_s"] <= live["eta_high_s"]
    _release(bench, second, build)


def _plain_ninja(directory: Path, *args: str) -> None:
    """ninja itself, as a user runs it before workbench watches the tree."""
    result = subprocess.run(
        ["ninja", "-C", str(directory), "-j1", *args], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_tree_ninja_built_before_learns_from_its_own_log(bench: Bench, tmp_path: Path) -> None:
    """A tree built by ninja alone, cleaned and built again under workbench: the history holds
    nothing of it, but its `.ninja_log` holds each edge's time (the heavy unit's 4 s), and the
    ETA says that is what it learned from."""
    tree = tmp_path / "by-hand"
    write_tree(tree)
    _plain_ninja(tree)
    _plain_ninja(tree, "-t", "clean")
    build, live = _held_build_eta(bench, tree, ".ninja_log")
    assert live["eta_first_build"] is False
    basis = live["eta_basis"]
    assert "earlier ninja runs" in basis and "another tree" not in basis, basis
    assert live["eta_s"] >= 0.5 * HEAVY_S, live
    assert live["eta_low_s"] <= live["eta_s"] <= live["eta_high_s"]
    _release(bench, tree, build)


def test_a_first_build_learns_from_a_build_directory_beside_it(
    bench: Bench, tmp_path: Path
) -> None:
    """Two build directories of one tree side by side (Release and Debug, say): the first built
    by ninja alone, the second under workbench with nothing in its history. Its ETA takes each
    edge's time from the first's `.ninja_log` and names it."""
    first = tmp_path / "build" / "release"
    write_tree(first)
    _plain_ninja(first)
    second = tmp_path / "build" / "debug"
    write_tree(second)
    build, live = _held_build_eta(bench, second, "build directory")
    assert live["eta_first_build"] is False
    assert "../release/.ninja_log" in live["eta_basis"], live["eta_basis"]
    assert live["eta_s"] >= 0.5 * HEAVY_S, live
    _release(bench, second, build)


def test_an_incremental_first_run_is_not_costed_as_the_whole_tree(
    bench: Bench, tmp_path: Path
) -> None:
    """A tree ninja built before, three of its sources changed: ninja runs four edges (u0, u1,
    the held unit, the link), not the heavy unit. Its log would cost the whole tree (the heavy
    unit's 4 s among it) once an edge finished (u0: the log's latest entry, u1's, waits for the
    next to tell whether it has more outputs); which edges are up to date is not known here, so
    the ETA extrapolates from this run's own edges and says so."""
    tree = tmp_path / "incremental"
    write_tree(tree)
    _plain_ninja(tree)
    later = time.time() + 5
    for name in ("u0.c", "u1.c", "held.c"):
        os.utime(tree / "src" / name, (later, later))
    build, _live = _held_build_eta(bench, tree, "")
    seen = []
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        live = bench.record(build).live or {}
        if live.get("eta_s") is not None:
            seen.append((live["eta_s"], live.get("eta_basis")))
        time.sleep(0.2)
    assert seen
    for _eta_s, basis in seen:
        # (Its value is this run's: the held unit uses no CPU, and the pace so far falls while
        # it waits, so the extrapolation grows; no figure of the heavy unit is in it.)
        assert basis is not None and basis.startswith("extrapolated from this run's edges"), seen
    _release(bench, tree, build)

"""The ninja log a build's report and trace read is the one its own ninja writes: never CMake's
throwaway try-compile tree (`CMakeFiles/CMakeScratch/TryCompile-*`), which a build that
configures first (the sample project's `t`) runs a ninja in while the sampler looks."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psutil
from needed_tools import needs_ninja

from workbench.analysis.recorder import EdgeRecorder, is_cmake_scratch

pytestmark = needs_ninja

MANIFEST = """
rule wait
  command = sleep $seconds && touch $out
build {name}_1: wait
  seconds = 0.1
build {name}_2: wait {name}_1
  seconds = {last}
default {name}_2
"""


def _start_ninja(directory: Path, name: str, last: float) -> subprocess.Popen[bytes]:
    directory.mkdir(parents=True)
    (directory / "build.ninja").write_text(MANIFEST.format(name=name, last=last))
    return subprocess.Popen(["ninja", "-C", str(directory)], stdout=subprocess.DEVNULL)


def _wait_for_log(directory: Path) -> None:
    deadline = time.monotonic() + 60
    while (
        not (directory / ".ninja_log").exists()
        or "_1" not in (directory / ".ninja_log").read_text()
    ):
        assert time.monotonic() < deadline, f"ninja never logged its first edge in {directory}"
        time.sleep(0.05)


def test_a_try_compile_ninja_is_never_taken_for_the_builds(tmp_path: Path) -> None:
    scratch = tmp_path / "build/CMakeFiles/CMakeScratch/TryCompile-abc123"
    tree = tmp_path / "build"
    # The recorder does not know the tree from the command line (a script that configures,
    # then execs ninja): it follows the ninjas the sampler sees.
    recorder = EdgeRecorder(["sh", "-c", "cmake ... && exec ninja"], tmp_path)
    try_compile = _start_ninja(scratch, "cmTC_1f2e3", 1.0)
    try:
        _wait_for_log(scratch)
        process = psutil.Process(try_compile.pid)
        recorder.observe([(try_compile.pid, process.create_time(), "ninja")])
    finally:
        assert try_compile.wait(60) == 0
    recorder.poll()
    assert recorder.followed == {}, "the try-compile tree's log was followed"
    build = tree / "real"
    own = _start_ninja(build, "libfmt", 0.5)
    try:
        _wait_for_log(build)
        recorder.observe([(own.pid, psutil.Process(own.pid).create_time(), "ninja")])
    finally:
        assert own.wait(60) == 0
    recorder.poll()
    stored = recorder.finish()
    assert recorder.log_path == build / ".ninja_log"
    outputs = sorted(edge.outputs[0] for edge in stored)
    assert outputs == ["libfmt_1", "libfmt_2"], outputs


def test_scratch_trees_are_told_apart_by_path() -> None:
    assert is_cmake_scratch("/b/CMakeFiles/CMakeScratch/TryCompile-x1")
    assert is_cmake_scratch("/b/CMakeFiles/CMakeTmp")
    assert not is_cmake_scratch("/b/CMakeFiles/fmt.dir")
    assert not is_cmake_scratch("/src/CMakeScratchpad")

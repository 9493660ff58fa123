"""Exact edges from real ninja builds: the log read incrementally, edges, graph, critical path,
slot usage and the Chrome trace, checked against `.ninja_log` and against a build whose longest
chain is known by construction."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from needed_tools import needs_ninja

from workbench.analysis import schedule
from workbench.analysis.edges import assemble, kind_of, source_of, target_of
from workbench.analysis.graph import BuildGraph, read_graph
from workbench.analysis.ninja_log import NinjaLogError, NinjaLogReader, read_all
from workbench.analysis.recorder import EdgeRecorder, ninja_command
from workbench.analysis.summary import analyse, compare
from workbench.analysis.trace import chrome_trace, slots
from workbench.reading.report import waiting_words

pytestmark = needs_ninja

# A manifest whose longest chain is known: chain_1 -> chain_2 -> chain_3 (0.6 s each, 1.8 s)
# beats wide_* (0.9 s each, no dependencies) and short_1 -> short_2 (0.3 s each); `final`
# (two outputs) waits for all of them through a phony target.
MANIFEST = """
rule wait
  command = sleep $seconds && touch $out
build chain_1: wait
  seconds = 0.6
build chain_2: wait chain_1
  seconds = 0.6
build chain_3: wait chain_2
  seconds = 0.6
build wide_1: wait
  seconds = 0.9
build wide_2: wait
  seconds = 0.9
build short_1: wait
  seconds = 0.3
build short_2: wait short_1
  seconds = 0.3
build middle: phony chain_3 wide_1 wide_2 short_2
build final final.extra: wait middle
  seconds = 0.1
default final
"""


def _ninja(directory: Path, *args: str) -> None:
    result = subprocess.run(
        ["ninja", "-C", str(directory), *args], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _project(tmp_path: Path) -> Path:
    directory = tmp_path / "chain"
    directory.mkdir()
    (directory / "build.ninja").write_text(MANIFEST)
    return directory


def test_edges_match_the_ninja_log_line_by_line(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    _ninja(directory, "-j3")
    lines = (directory / ".ninja_log").read_text().splitlines()
    assert lines[0].startswith("# ninja log v")
    entries = read_all(directory / ".ninja_log")
    assert len(entries) == len(lines) - 1 == 9
    for entry, line in zip(entries, lines[1:], strict=True):
        start, end, mtime, output, command_hash = line.split("\t")
        assert (entry.start_ms, entry.end_ms, entry.output) == (int(start), int(end), output)
        assert (entry.mtime, entry.command_hash) == (int(mtime), command_hash)
    edges = assemble(entries)
    # final and final.extra are one edge: one command, two outputs.
    assert len(edges) == 8
    final = next(edge for edge in edges if edge.output == "final")
    assert final.outputs == ("final", "final.extra")
    for edge in edges:
        entry = next(e for e in entries if e.output == edge.output)
        assert edge.duration_s == pytest.approx((entry.end_ms - entry.start_ms) / 1000)


def test_critical_path_is_the_longest_chain_by_construction(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    began = time.monotonic()
    _ninja(directory, "-j3")
    wall_s = time.monotonic() - began
    edges = assemble(read_all(directory / ".ninja_log"))
    graph = read_graph(directory)
    assert graph.rule_of("chain_2") == "wait"
    dependencies = graph.executed_dependencies(edge.outputs for edge in edges)
    # The phony `middle` is looked through: final waits for the four edges behind it.
    assert dependencies["final"] == ["chain_3", "short_2", "wide_1", "wide_2"]
    assert dependencies["chain_1"] == []
    path = schedule.critical_path(edges, dependencies)
    assert [edge.output for edge in path.edges] == ["chain_1", "chain_2", "chain_3", "final"]
    assert path.seconds == pytest.approx(sum(e.duration_s for e in path.edges))
    # 3 x 0.6 s + 0.1 s, plus process start-up: no shorter than its sleeps, no longer than the
    # whole ninja run (which a loaded machine stretches, the path with it).
    assert 1.9 <= path.seconds <= wall_s, (path.seconds, wall_s)


def test_too_few_jobs_and_the_tail_are_measured(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    _ninja(directory, "-j1")
    edges = assemble(read_all(directory / ".ninja_log"))
    dependencies = read_graph(directory).executed_dependencies(e.outputs for e in edges)
    usage = schedule.usage(edges, dependencies, jobs=1)
    # At -j1 ready edges wait nearly the whole build, and no slot is ever idle.
    assert usage.most_parallel == 1
    assert usage.too_few_jobs_s > 0.5 * usage.wall_s
    assert usage.idle_slot_s < 0.2
    # The edges' waits summed are more than the build's time (several wait at once): the report
    # says how many waited and for how long each, not their sum as if it were the build's.
    assert 0 < usage.waiting_edges < len(edges)
    assert usage.waited_edge_s > usage.wall_s
    words = waiting_words(usage)
    mean = usage.waited_edge_s / usage.waiting_edges
    assert words.startswith(f"{usage.waiting_edges} edges waited, ") and "on average" in words
    assert f"{mean:.2f} s each" in words, (words, mean)
    # At -j8 nothing waits; the chain runs alone at the end: the tail.
    (directory / ".ninja_log").unlink()
    for name in ("chain_1", "chain_2", "chain_3", "wide_1", "wide_2", "short_1", "short_2"):
        (directory / name).unlink()
    _ninja(directory, "-j8")
    edges = assemble(read_all(directory / ".ninja_log"))
    dependencies = read_graph(directory).executed_dependencies(e.outputs for e in edges)
    wide = schedule.usage(edges, dependencies, jobs=8)
    assert wide.too_few_jobs_s == 0.0
    assert wide.waiting_edges == 0 and waiting_words(wide) == "no edge waited"
    assert wide.most_parallel == 4
    assert wide.tail_s == pytest.approx(wide.wall_s)  # never were all 8 slots busy
    assert wide.tail_edges[0].output in ("wide_1", "wide_2", "chain_1", "chain_2", "chain_3")


def test_edges_running_per_interval_integrates_the_log(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    _ninja(directory, "-j2")
    lines = (directory / ".ninja_log").read_text().splitlines()[1:]
    edges = assemble(read_all(directory / ".ninja_log"))
    # Quarter seconds from 0.1 s before the first edge: intervals anchored at a time of their own.
    first, last = min(e.start_s for e in edges), max(e.end_s for e in edges)
    start, width = first - 0.1, 0.25
    count = int((last - start) / width) + 2
    values = schedule.running_per_interval(
        ((e.start_s, e.end_s) for e in edges), start, width, count
    )
    # The log's own lines, one per output (final has two: one edge), counted each millisecond.
    fields = [line.split("\t") for line in lines]
    spans = {(int(start_ms), int(end_ms), hash_) for start_ms, end_ms, _, _, hash_ in fields}
    for index, value in enumerate(values):
        low_ms = round((start + index * width) * 1000)
        held = sum(
            1 for ms in range(low_ms, low_ms + 250) for a, b, _ in spans if a <= ms + 0.5 < b
        )
        assert value == pytest.approx(held / 250, abs=1e-9)
    assert max(values) <= 2  # -j2
    assert values[0] < 2 and values[-1] == 0.0  # before the first edge, after the last
    assert sum(values) * width == pytest.approx(sum(e.duration_s for e in edges))
    # The report's series is the same integral over the edges' own span.
    assert sum(schedule.series(edges, 7)) * (last - first) / 7 == (
        pytest.approx(sum(e.duration_s for e in edges))
    )


def test_reader_returns_only_new_entries_while_ninja_appends(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    _ninja(directory, "-j3")
    reader = NinjaLogReader.at_build_start(directory / ".ninja_log")
    assert reader.read_new() == []
    (directory / "chain_2").unlink()
    _ninja(directory, "-j3")  # rebuilds chain_2, chain_3 and final
    new = reader.read_new()
    assert [entry.output for entry in new] == ["chain_2", "chain_3", "final", "final.extra"]
    assert reader.read_new() == []
    # A line half written is left for the next read.
    with open(directory / ".ninja_log", "ab") as log:
        log.write(b"0\t5\t1\tpartial")
    assert reader.read_new() == []
    with open(directory / ".ninja_log", "ab") as log:
        log.write(b"\tabc\n")
    assert [entry.output for entry in reader.read_new()] == ["partial"]


def test_a_reader_keeps_each_outputs_latest_time_from_before_the_build(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    _ninja(directory, "-j3")
    (directory / "chain_3").unlink()
    _ninja(directory, "-j3")  # chain_3 and final again: their later lines are the ones kept
    lines = (directory / ".ninja_log").read_text().splitlines()[1:]
    latest: dict[str, float] = {}
    for line in lines:
        start, end, _mtime, output, _hash = line.split("\t")
        latest[output] = (int(end) - int(start)) / 1000.0
    assert [line.split("\t")[3] for line in lines].count("chain_3") == 2
    reader = NinjaLogReader.at_build_start(directory / ".ninja_log")
    assert reader.before_build == latest
    assert set(latest) == {
        "chain_1",
        "chain_2",
        "chain_3",
        "wide_1",
        "wide_2",
        "short_1",
        "short_2",
        "final",
        "final.extra",
    }
    assert 0.5 <= latest["chain_1"] < 5.0  # `sleep 0.6`, as ninja timed it
    # A new log holds nothing from before; a log found while its ninja ran gives back what
    # that ninja wrote, which is no earlier run's.
    assert NinjaLogReader.at_build_start(tmp_path / "none" / ".ninja_log").before_build == {}
    reader.take_back([line.encode() for line in lines if "\tfinal" in line])
    assert "final" not in reader.before_build and "chain_1" in reader.before_build


def test_a_build_directorys_siblings_logs_newest_first(tmp_path: Path) -> None:
    """`sibling_logs`: the `.ninja_log`s of the build directory's parent's other
    subdirectories, newest first, at most `SIBLING_LOGS`; never its own, an empty one, a
    directory without one or a file."""
    from workbench.analysis import recorder

    parent = tmp_path / "build"
    (parent / "Debug").mkdir(parents=True)
    (parent / "Debug" / ".ninja_log").write_text("# ninja log v5\n")
    logs = []
    for n in range(recorder.SIBLING_LOGS + 2):
        directory = parent / f"Release{n}"
        directory.mkdir()
        (directory / ".ninja_log").write_text("# ninja log v5\n0\t10\t0\ta.o\tff\n")
        os.utime(directory / ".ninja_log", (1000 + n, 1000 + n))
        logs.append(directory / ".ninja_log")
    (parent / "empty").mkdir()
    (parent / "empty" / ".ninja_log").touch()
    (parent / "no-log").mkdir()
    (parent / "a-file").write_text("")
    assert recorder.sibling_logs(parent / "Debug") == logs[::-1][: recorder.SIBLING_LOGS]
    assert recorder.sibling_logs(tmp_path / "gone" / "Debug") == []


def test_recompacted_log_repeats_nothing(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    _ninja(directory, "-j3")
    reader = NinjaLogReader.at_build_start(directory / ".ninja_log")
    (directory / "short_1").unlink()
    _ninja(directory, "-j3")
    first = reader.read_new()
    assert {entry.output for entry in first} == {"short_1", "short_2", "final", "final.extra"}
    _ninja(directory, "-t", "recompact")  # a new file renamed over the old one
    assert reader.read_new() == []
    (directory / "wide_1").unlink()
    _ninja(directory, "-j3")
    assert {entry.output for entry in reader.read_new()} == {"wide_1", "final", "final.extra"}


def test_not_a_ninja_log_is_refused(tmp_path: Path) -> None:
    log = tmp_path / ".ninja_log"
    log.write_text("hello\n1\t2\t3\tx\th\n")
    with pytest.raises(NinjaLogError, match="not a ninja log"):
        read_all(log)
    log.write_text("# ninja log v4\n")
    with pytest.raises(NinjaLogError, match="older than v5"):
        read_all(log)
    for version in (5, 6, 7):
        log.write_text(f"# ninja log v{version}\n10\t20\t3\tobj/a.cc.o\t00ff\nbroken\n")
        reader = NinjaLogReader.whole(log)
        assert [e.output for e in reader.read_new()] == ["obj/a.cc.o"]
        assert reader.malformed == 1 and reader.version == version


def test_sessions_of_several_ninja_runs_are_laid_end_to_end(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    reader = NinjaLogReader.at_build_start(directory / ".ninja_log")
    _ninja(directory, "-j3", "chain_3")
    _ninja(directory, "-j3")
    edges = assemble(reader.read_new())
    sessions = {edge.output: edge.session for edge in edges}
    assert sessions["chain_1"] == 0 and sessions["final"] == 1
    first_end = max(edge.end_s for edge in edges if edge.session == 0)
    assert all(edge.start_s >= first_end for edge in edges if edge.session == 1)


def test_recorder_follows_a_ninja_it_finds_late(tmp_path: Path) -> None:
    """A log found through a running ninja (as for a Nix builder): what it wrote before it was
    found comes back, what earlier builds wrote does not."""
    directory = _project(tmp_path)
    # `final` waits while a file named `hold` exists: ninja is still running when the recorder
    # looks, however loaded the machine (wide_1 to final was about a second).
    (directory / "build.ninja").write_text(
        MANIFEST.replace(
            "build final final.extra: wait middle",
            "rule held\n  command = while [ -e hold ]; do sleep 0.05; done; touch $out\n"
            "build final final.extra: held middle",
        )
    )
    _ninja(directory, "-j3")
    for name in ("chain_1", "wide_1"):
        (directory / name).unlink()
    log = directory / ".ninja_log"
    written = log.read_text().count("\twide_1\t")
    (directory / "hold").touch()
    process = subprocess.Popen(
        ["ninja", "-j3"], cwd=directory, stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:
        import psutil

        started = psutil.Process(process.pid).create_time()
        recorder = EdgeRecorder(["sh", "build.sh"], tmp_path)  # the command names no tree
        assert recorder.work_key is None and not recorder.followed
        # wide_1 (0.9 s) is in the log before the recorder looks: the log is read, not a clock.
        deadline = time.monotonic() + 60
        while log.read_text().count("\twide_1\t") == written:
            assert time.monotonic() < deadline, "ninja did not rebuild wide_1"
            time.sleep(0.05)
        # Still running (final is held): a reaped ninja has no cwd to read.
        assert process.poll() is None
        recorder.observe([(process.pid, started, "ninja")])
        (directory / "hold").unlink()
        assert process.wait(timeout=60) == 0
        ended = time.time()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stored = recorder.finish()
    outputs = sorted(edge.outputs[0] for edge in stored)
    assert outputs == ["chain_1", "chain_2", "chain_3", "final", "wide_1"]
    assert all(edge.deps is not None for edge in stored)
    final = next(edge for edge in stored if edge.outputs[0] == "final")
    # Epoch times from ninja's start: after its process began and the 1.8 s chain, before it
    # ended.
    assert started + 1.8 <= final.started <= ended, (final.started - started, ended - started)


# Each edge writes the epoch it started at, by its own clock: the truth the recorder's times meet.
STAMPED = """
rule stamp
  command = date +%s.%N > $out.started && sleep $seconds && touch $out
build one: stamp
  seconds = 0.4
build two: stamp one
  seconds = 0.4
build three: stamp two
  seconds = 0.4
"""


def test_edges_of_a_ninja_a_wrapper_execd_start_when_they_started(tmp_path: Path) -> None:
    """The wrapper sleeps 1.5 s, then execs ninja: the process keeps the wrapper's start time,
    but the edges' epoch times come out as the commands themselves saw them."""
    import time

    import psutil

    directory = tmp_path / "stamped"
    directory.mkdir()
    (directory / "build.ninja").write_text(STAMPED)
    recorder = EdgeRecorder(["sh", "build.sh"], tmp_path)  # the command names no tree
    process = subprocess.Popen(
        ["sh", "-c", "sleep 1.5; exec ninja -j1"],
        cwd=directory,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        started = psutil.Process(process.pid).create_time()
        while psutil.Process(process.pid).name() != "ninja":
            time.sleep(0.05)
        while process.poll() is None:  # the supervisor's once-a-second look, quicker
            recorder.observe([(process.pid, started, "ninja")])
            recorder.poll()
            time.sleep(0.3)
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stored = {edge.outputs[0]: edge for edge in recorder.finish()}
    assert sorted(stored) == ["one", "three", "two"]
    origin = recorder.origin()
    assert origin is not None and origin > started + 1.4  # not the wrapper's start
    for name, edge in stored.items():
        said = float((directory / f"{name}.started").read_text())
        # The command says its start a moment after ninja started it: a fork and two execs, a
        # moment a loaded machine stretches. The edge (0.4 s of sleep) lasted that moment more,
        # so its duration bounds it, give or take ninja's whole milliseconds and a tick of the
        # coarse clock that stamps the log's modification time (the origin's upper bound): 20 ms.
        # The origin is not later than ninja's clock by more than 0.1 s.
        spawned_within = (edge.ended - edge.started) - 0.4 + 0.02
        assert -0.1 < said - edge.started <= spawned_within, (name, said - edge.started, edge)


def test_recorder_reads_the_graph_again_only_when_the_manifest_changed(tmp_path: Path) -> None:
    """The graph read while the build ran is kept at the end when build.ninja is the same file
    (an iterate cycle pays for one `ninja -t graph`); a manifest rewritten since is read again."""
    directory = _project(tmp_path)
    reads: list[Path] = []

    def counted(build_directory: Path, targets: Sequence[str]) -> BuildGraph:
        reads.append(build_directory)
        return read_graph(build_directory, targets)

    argv = ["ninja", "-C", str(directory), "-j3"]
    recorder = EdgeRecorder(argv, tmp_path, graph_reader=counted)
    _ninja(directory, "-j3")
    recorder.poll()
    assert len(reads) == 1
    stored = recorder.finish()
    assert len(reads) == 1
    assert {edge.outputs[0]: edge.rule for edge in stored}["final"] == "wait"

    (directory / "chain_1").unlink()
    recorder = EdgeRecorder(argv, tmp_path, graph_reader=counted)
    _ninja(directory, "-j3")
    recorder.poll()
    assert len(reads) == 2
    # As CMake's re-run does: another manifest where the first one was, read again at the end.
    renamed = MANIFEST.replace(
        "build final final.extra: wait middle", "build final final.extra: again middle"
    )
    (directory / "next.ninja").write_text("rule again\n  command = touch $out\n" + renamed)
    (directory / "next.ninja").replace(directory / "build.ninja")
    stored = recorder.finish()
    assert len(reads) == 3
    rules = {edge.outputs[0]: edge.rule for edge in stored}
    assert rules == {"chain_1": "wait", "chain_2": "wait", "chain_3": "wait", "final": "again"}


def test_ninja_command_lines() -> None:
    here = Path("/src")
    assert ninja_command(["ninja", "-C", "build", "-j8", "all"], here).directory == Path(
        "/src/build"
    )
    assert ninja_command(["ninja", "-Cout", "a", "b"], here).targets == ("a", "b")
    assert ninja_command(["cmake", "--build", "b", "--target", "t"], here).targets == ("t",)
    assert ninja_command(["ninja", "-t", "graph"], here) is None
    assert ninja_command(["make", "-j8"], here) is None


def test_names_of_edges() -> None:
    output = "CMakeFiles/onnxruntime_providers.dir/core/providers/cpu/conv.cc.o"
    assert target_of(output) == "onnxruntime_providers"
    assert source_of(output) == "core/providers/cpu/conv.cc"
    assert kind_of(output) == "compile"
    assert kind_of("CMakeFiles/k.dir/kernels_1.cu.o") == "cuda"
    assert kind_of("libonnxruntime.so.1.23.2") == "link"
    assert kind_of("x.o", "CUDA_COMPILER__k_Release") == "cuda"
    assert kind_of("gen/schema.h", "CUSTOM_COMMAND") == "other"


def test_same_source_in_five_targets_is_five_edges(tmp_path: Path) -> None:
    log = tmp_path / ".ninja_log"
    rows = [
        f"{i * 10}\t{i * 10 + 5 + i}\t1\tCMakeFiles/t{i}.dir/common/util.cc.o\th{i}"
        for i in range(5)
    ]
    log.write_text("# ninja log v6\n" + "\n".join(rows) + "\n")
    edges = assemble(read_all(log))
    assert [edge.target for edge in edges] == ["t0", "t1", "t2", "t3", "t4"]
    assert {edge.source for edge in edges} == {"common/util.cc"}
    assert [round(edge.duration_s, 3) for edge in edges] == [0.005, 0.006, 0.007, 0.008, 0.009]


def test_chrome_trace_follows_the_trace_event_format(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    _ninja(directory, "-j3")
    edges = assemble(read_all(directory / ".ninja_log"))
    document = json.loads(json.dumps(chrome_trace("build #1", edges)))
    assert document["displayTimeUnit"] in ("ms", "ns")
    events = document["traceEvents"]
    complete = [event for event in events if event["ph"] == "X"]
    assert len(complete) == len(edges)
    for event in events:
        assert event["ph"] in ("X", "C", "M")
        assert isinstance(event["name"], str) and isinstance(event["pid"], int)
        assert isinstance(event["tid"], int)
        if event["ph"] != "M":
            assert isinstance(event["ts"], int) and event["ts"] >= 0
        if event["ph"] == "X":
            assert isinstance(event["dur"], int) and event["dur"] >= 0
        if event["ph"] == "C":
            assert all(isinstance(v, (int, float)) for v in event["args"].values())
    # No two edges overlap on one job slot, and there are as many slots as edges ran at once.
    by_slot: dict[int, list[tuple[int, int]]] = {}
    for event in complete:
        by_slot.setdefault(event["tid"], []).append((event["ts"], event["ts"] + event["dur"]))
    for spans in by_slot.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert len(by_slot) == max(slots(edges)) + 1 == schedule.usage(edges, None, 3).most_parallel


def test_compare_names_slower_faster_new_and_gone(tmp_path: Path) -> None:
    directory = _project(tmp_path)
    _ninja(directory, "-j3")
    before = analyse(_rows(assemble(read_all(directory / ".ninja_log"))), 3)
    (directory / "build.ninja").write_text(
        MANIFEST.replace("seconds = 0.9", "seconds = 1.5")
        .replace("build chain_1: wait\n  seconds = 0.6", "build chain_1: wait\n  seconds = 0.1")
        .replace("build short_1", "build s_1")
        .replace("short_1", "s_1")
    )
    reader = NinjaLogReader.at_build_start(directory / ".ninja_log")
    for name in ("chain_1", "wide_1", "wide_2", "short_1"):
        (directory / name).unlink(missing_ok=True)
    _ninja(directory, "-j3")
    after = analyse(_rows(assemble(reader.read_new())), 3)
    assert before is not None and after is not None
    changes = {change.output: change.status for change in compare(before, after)}
    assert changes["wide_1"] == "slower" and changes["wide_2"] == "slower"
    assert changes["chain_1"] == "faster"  # 0.6 s of sleep, then 0.1 s
    assert changes["s_1"] == "new" and changes["short_1"] == "gone"


def _rows(edges):  # edges as the history stores them (epoch times, no graph)
    from workbench.history.records import EdgeRow

    return [
        EdgeRow(e.outputs, 1000.0 + e.start_s, 1000.0 + e.end_s, e.session, e.command_hash)
        for e in edges
    ]


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) to give ninja a mount namespace of its own",
)
def test_a_ninja_in_another_mount_namespace_is_read_through_its_own_view(tmp_path: Path) -> None:
    """As a sandboxed Nix builder's: ninja builds in a tmpfs mounted only in its own mount
    namespace, so the directory `readlink /proc/PID/cwd` names does not exist in ours. The log,
    the manifest and the graph are read through the process's view, the last entries after it
    exited, and the edges keep ninja's own names."""
    import psutil

    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (tmp_path / "build.ninja").write_text(MANIFEST)
    script = (
        f"mount -t tmpfs tmpfs {hidden} && mkdir {hidden}/build && "
        f"cp {tmp_path}/build.ninja {hidden}/build/ && cd {hidden}/build && exec ninja -j3"
    )
    recorder = EdgeRecorder(["sh", "build.sh"], tmp_path)
    open_before = len(os.listdir("/proc/self/fd"))
    process = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        started = psutil.Process(process.pid).create_time()
        deadline = time.monotonic() + 30
        while psutil.Process(process.pid).name() != "ninja":
            assert time.monotonic() < deadline, "ninja did not start"
            time.sleep(0.05)
        named = Path(os.readlink(f"/proc/{process.pid}/cwd"))
        assert named == hidden / "build" and not named.exists()  # not there in our namespace
        recorder.observe([(process.pid, started, "ninja")])
        assert recorder.graph_problems() == []
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stored = {edge.outputs[0]: edge for edge in recorder.finish()}
    assert sorted(stored) == sorted(
        ["chain_1", "chain_2", "chain_3", "wide_1", "wide_2", "short_1", "short_2", "final"]
    )
    assert recorder.log_path == hidden / "build" / ".ninja_log"  # ninja's own name for it
    assert stored["chain_2"].deps == ("chain_1",)  # from the graph, read through its view
    assert sorted(stored["final"].deps or ()) == ["chain_3", "short_2", "wide_1", "wide_2"]
    assert stored["final"].rule == "wait"
    assert len(os.listdir("/proc/self/fd")) == open_before  # the directory was let go


def test_a_held_log_is_read_to_its_end_after_its_directory_is_removed(tmp_path: Path) -> None:
    """As a Nix builder's directory, removed as soon as the builder ends: what ninja wrote after
    the reader's last look is read from the log the reader holds open."""
    directory = _project(tmp_path)
    reader = NinjaLogReader.at_build_start(directory / ".ninja_log")
    reader.hold_open()
    process = subprocess.Popen(
        ["ninja", "-j3"], cwd=directory, stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:
        first: list[str] = []
        deadline = time.monotonic() + 60
        while not first:
            assert time.monotonic() < deadline and process.poll() is None, "no entry in time"
            first = [entry.output for entry in reader.read_new()]
            time.sleep(0.05)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    shutil.rmtree(directory)
    rest = [entry.output for entry in reader.read_new()]
    every = ["chain_1", "chain_2", "chain_3", "wide_1", "wide_2", "short_1", "short_2", "final"]
    assert sorted(first + rest) == sorted([*every, "final.extra"])
    assert "final" in rest
    reader.close()
    assert reader.read_new() == []  # nothing held, nothing at the path

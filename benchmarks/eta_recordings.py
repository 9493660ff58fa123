"""Recorded real builds of third-party CMake projects, for `eta_accuracy.py --recordings`.

A recording is what the supervisor stored of each run of one project, reduced to what the ETA
reads: the run's duration, ninja's edge total, every edge's exact times (from the build's own
`.ninja_log`, as the supervisor recorded them), the 1 Hz progress fractions and what the sampler
measured of CPU (each compile edge's CPU seconds where a sample matched its compiler, and the
whole build's CPU seconds at each sample; `add-cpu` adds them to a recording exported before
they were kept, from the history that recorded it). The files under
`benchmarks/data/eta_runs/` were made this way (each says its source commit, host and load):

    cmake -S SRC -B BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release [project options]
    python -m workbench --state-dir STATE run --name NAME -- ninja -C BUILD -j2   # first build
    ninja -C BUILD -t clean; python -m workbench --state-dir STATE run --name NAME -- ...
    python benchmarks/eta_recordings.py export STATE NAME OUT.json --source ... --load ...

A run with contention changing mid-build is recorded with `watch` started beside it: it reads
the live view the supervisor writes each second (what the live ETA reads: the host's other
processes' CPU, `LiveView.other`), starts busy loops (each in a session of its own, as other
users' programs are) when the build reaches one fraction and stops them at another, and keeps
the contention it saw, second by second; `export --contention` puts it into the run's record:

    python benchmarks/eta_recordings.py watch STATE NAME OUT.json --hogs 2 --from 0.3 --until 0.7 &
    python -m workbench --state-dir STATE run --name NAME -- ninja -C BUILD -j2

`record` does all of it in one command, tree after tree (`TREES`, `plan_for`): unpacks each
source archive (`sources` writes them with `git archive` at the commits the recordings name, and
ONNX Runtime's own dependencies at the commits its cmake/deps.txt pins), configures it offline
(tests that download, or optional dependencies, off), runs each first build, a clean rebuild and
a first build with busy loops (one per core, from 30 to 70% of its progress) under the real
`workbench run`, and exports every recording after each step into one file, so a command cut
short still leaves what it finished. A step whose guessed time (its tree's CPU on the 2-core
VM over the jobs, scaled by how far the guesses were off so far on this host) does not fit the
time left is skipped and the log says so. `import` splits that file into one recording each:

    python benchmarks/eta_recordings.py sources /work/.mirror benchmarks/results/tmp/eta-src
    python benchmarks/eta_recordings.py record --sources benchmarks/results/tmp/eta-src \
        --out OUT [--part 1|2] [--budget-s 480] [--only TREE]   # --quick: a small generated tree
    python benchmarks/eta_recordings.py import OUT/eta-recordings-part1.json --tag h100

Pairs of releases (`record --part 3`, `plan_for`): for each tree, a first build of an earlier
release of it (`EARLIER`: a tag some months to a year before the recorded commit, archived by
`sources` as `NAME-VERSION.tar.xz`, e.g. `json-c-0.19.tar.xz`), then at once a first build of the
tree at its recorded commit (`TREES`) in a fresh build directory, both with the same -j, in one
state directory: the second build has no history of its own tree, and its history holds the
first, another tree of the same sources (another release; another variant's build directory is
the same case), as a user's does. Each build is a recording of its own, one run each:
`TREE-jN-earlier-release` and `TREE-jN-after-earlier-release`; besides the fields every
recording has ("source" names each one's own commit and tag, "host", "load", "configure",
"build", "dependencies" of its own graph), each has:

    "pair":       the other recording's "project" (`import` renames both: "h100 zstd-j16-...")
    "pair_order": "1 of 2: built first; ..." or "2 of 2: built right after its pair (TAG) ...",
                  saying the host, the same -j and the one state directory
    "archive":    its own source archive (`source-bytes` reads it: NAME-VERSION.tar.xz)

A pair whose two builds do not fit the time left is skipped whole; a recording whose pair did not
run has no "pair" (only "archive"). `eta_accuracy.load_as_recorded` loads a pair's first
recording into the history before its second (each its own name and work key), so that the
second replays as a first build of its tree with the earlier release in its history as another
tree of the same sources: what the product meets on a user's host. Standing alone, each
recording replays as a first build with nothing to learn from.

    python benchmarks/eta_recordings.py record --sources benchmarks/results/tmp/eta-src \
        --out OUT --part 3 --budget-s 470          # --quick --part 3: a generated pair

`source-bytes` adds to each recording what a live ETA could read of its tree before building
it: each compiled source's own bytes and its bytes with the tree's own headers it includes,
transitively (`source_bytes`), from the archives `sources` wrote (a path in the tree, not the
code):

    python benchmarks/eta_recordings.py source-bytes benchmarks/results/tmp/eta-src

`load` replays a recording into a fresh history, build after build as they ran, so that
`eta.Replay` sees exactly what the supervisor would have read before each run. No source code
of those projects is kept here: only output names and times.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import lzma
import os
import posixpath
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.analysis.graph import GraphError, read_graph
from workbench.history.records import SUCCEEDED, EdgeRow, NewBuild, Sampled
from workbench.history.store import History

DATA = Path(__file__).with_name("data") / "eta_runs"


def export(
    state: Path,
    name: str,
    notes: dict[str, Any],
    labels: list[str],
    contention: dict[int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The successful runs named `name` in the history at `state`, oldest first; `contention`:
    what `watch` saw of some of them, by build id."""
    runs: list[dict[str, Any]] = []
    with History(state) as history:
        records = [r for r in history.builds(limit=1000) if r.name == name]
        records = [r for r in reversed(records) if r.state == SUCCEEDED]
        for index, record in enumerate(records):
            assert record.started is not None and record.duration_s is not None
            start = record.started
            step = record.progress_view.step
            edges, cpu = _edges_and_cpu(history, record.id, start)
            fractions = [
                [round(sample.t - start, 2), round(sample.fraction, 5)]
                for sample in history.samples(record.id)
                if sample.fraction is not None
            ]
            live = record.live_view
            watched = (contention or {}).get(record.id)
            runs.append(
                {
                    "label": labels[index] if index < len(labels) else f"run {index + 1}",
                    "duration_s": round(record.duration_s, 2),
                    "edge_total": step.total if step is not None else None,
                    "jobs": record.jobs,
                    "other_cpu_cores_mean": None
                    if live.other is None
                    else live.other.mean_cpu_cores,
                    "edges": edges,
                    "fractions": fractions,
                    "cpu": cpu,
                    **({} if watched is None else {"contention": watched}),
                }
            )
    return {"project": notes.pop("project", None) or name, **notes, "runs": runs}


def _edges_and_cpu(
    history: History, build_id: int, start: float
) -> tuple[list[list[Any]], list[list[float]]]:
    """A run's edges ([start, end, output] in seconds from the build's start, with a fourth
    value where the sampler matched a compiler to the edge: the CPU seconds its processes used,
    at least) and the build's CPU so far at each 1 Hz sample ([seconds from start, the CPU
    seconds of all its processes])."""
    edges: list[list[Any]] = []
    for edge in history.edges(build_id):
        row: list[Any] = [round(edge.started - start, 3), round(edge.ended - start, 3)]
        row.append(edge.outputs[0])
        if edge.cpu_s is not None:
            row.append(round(edge.cpu_s, 3))
        edges.append(row)
    cpu = [
        [round(sample.t - start, 2), round(sample.cpu_seconds, 2)]
        for sample in history.samples(build_id)
    ]
    return edges, cpu


def add_cpu(recording: dict[str, Any], state: Path, name: str) -> dict[str, Any]:
    """`recording` with what the sampler measured of each run's CPU (see `_edges_and_cpu`),
    read from the history at `state` that recorded it: its successful runs named `name`, oldest
    first, one for each of the recording's runs, the same durations and the same edges (a
    recording exported before the CPU was kept gains it; nothing else changes)."""
    runs: list[dict[str, Any]] = []
    with History(state) as history:
        records = [r for r in history.builds(limit=1000) if r.name == name]
        records = [r for r in reversed(records) if r.state == SUCCEEDED]
        if len(records) != len(recording["runs"]):
            raise SystemExit(
                f"{state}: {len(records)} runs named {name}, the recording has "
                f"{len(recording['runs'])}"
            )
        for record, run in zip(records, recording["runs"], strict=True):
            assert record.started is not None and record.duration_s is not None
            if round(record.duration_s, 2) != run["duration_s"]:
                raise SystemExit(
                    f"{state}: build #{record.id} ran {record.duration_s:.2f} s, the "
                    f"recording's run {run['label']!r} {run['duration_s']} s"
                )
            edges, cpu = _edges_and_cpu(history, record.id, record.started)
            if [edge[:3] for edge in edges] != [edge[:3] for edge in run["edges"]]:
                raise SystemExit(f"{state}: build #{record.id}'s edges are not the recording's")
            runs.append({**run, "edges": edges, "cpu": cpu})
    return {**recording, "runs": runs}


def watch(
    state: Path,
    name: str,
    hogs: int,
    start_at: float,
    stop_at: float,
    timeout_s: float = 7200,
    after_id: int | None = None,
) -> dict[str, Any]:
    """Follow the next build named `name` in the history at `state` from its start to its end,
    second by second: the contention its live view says ([seconds from its start, other
    processes' CPU now, their mean so far, samples], `LiveView.other`) and the host's CPUs. With
    `hogs`, that many busy loops run from when its progress reaches `start_at` to `stop_at`.
    The next build: the first after those in the history now, or after build `after_id` (a
    caller that starts the build at once and must not race this reading)."""
    began = time.monotonic()
    known: set[int] = set()
    with History(state) as history:
        known = {
            record.id
            for record in history.builds(limit=1000)
            if after_id is None or record.id <= after_id
        }
    build_id: int | None = None
    seen: list[list[float]] = []
    cpus = 0
    started_hogs: list[subprocess.Popen[bytes]] = []
    hogs_at: list[float | None] = [None, None]
    try:
        while time.monotonic() - began < timeout_s:
            with History(state) as history:
                if build_id is None:
                    fresh = [r for r in history.builds(limit=20) if r.name == name]
                    fresh = [
                        r
                        for r in fresh
                        if r.id not in known and (after_id is None or r.id > after_id)
                    ]
                    build_id = fresh[-1].id if fresh else None
                record = None if build_id is None else history.get(build_id)
            if record is None or record.started is None:
                time.sleep(0.2)
                continue
            live = record.live_view
            other = live.other
            t = time.time() - record.started
            if other is not None and (not seen or seen[-1][3] != other.samples):
                seen.append(
                    [round(t, 2), other.cpu_cores, other.mean_cpu_cores, float(other.samples)]
                )
            cpus = live.cpus or cpus
            fraction = record.progress_view.fraction or 0.0
            if (
                hogs
                and not started_hogs
                and hogs_at[0] is None
                and fraction >= start_at
                and record.ended is None
            ):
                for _ in range(hogs):
                    started_hogs.append(
                        subprocess.Popen(
                            ["timeout", "600", "sh", "-c", "while :; do :; done"],
                            start_new_session=True,
                        )
                    )
                hogs_at[0] = round(t, 2)
            if started_hogs and hogs_at[1] is None and fraction >= stop_at:
                _stop(started_hogs)
                hogs_at[1] = round(t, 2)
            if record.ended is not None:
                break
            time.sleep(1.0)
    finally:
        _stop(started_hogs)
    return {
        "build_id": build_id,
        "cpus": cpus,
        "hogs": hogs,
        "hogs_from_s": hogs_at[0],
        "hogs_until_s": hogs_at[1],
        "other": seen,
    }


def _stop(started: list[subprocess.Popen[bytes]]) -> None:
    for hog in started:  # ours, by process group (the loop's shell under `timeout`)
        if hog.poll() is None:
            os.killpg(hog.pid, signal.SIGTERM)
            hog.wait()


def load(recording: dict[str, Any], state: Path) -> list[tuple[int, dict[str, Any]]]:
    """Replay `recording`'s runs into a fresh history at `state`: [(build id, run)]. Its runs
    share its name and work key (one tree); another recording loaded into the same history is
    another tree (eta_accuracy.load_as_recorded loads a pair's first release before its
    second)."""
    name = recording["project"]
    work_key = f"ninja:recorded:{name}"
    loaded: list[tuple[int, dict[str, Any]]] = []
    with History(state) as history:
        for index, run in enumerate(recording["runs"]):
            start = 1_000_000.0 + index * 100_000.0
            record = history.create(
                NewBuild(name, "run", ("ninja", "-C", name), "/", "/", {}, name, False),
                now=start,
            )
            history.mark_running(record.id, 1, 1, start)
            for t, fraction in run["fractions"]:
                history.update_live(
                    record.id,
                    0,
                    {},
                    None,
                    Sampled(start + t, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, fraction),
                )
            rows = [
                EdgeRow(
                    (edge[2],),
                    start + edge[0],
                    start + edge[1],
                    0,
                    "0",
                    cpu_s=edge[3] if len(edge) > 3 else None,
                )
                for edge in run["edges"]
            ]
            history.record_edges(record.id, None, rows, work_key)
            total = run["edge_total"] or len(rows)
            progress = {"step": {"tool": "ninja", "done": total, "total": total}, "fraction": 1.0}
            history.finish(
                record.id,
                SUCCEEDED,
                start + run["duration_s"],
                run["duration_s"],
                0,
                None,
                None,
                0,
                progress,
            )
            loaded.append((record.id, run))
    return loaded


# -- recording real builds in one command (`record`) -------------------------------------------


# A recording's load ("load"): the host had nothing else running, or it was shared.
QUIET = "quiet host"
SHARED = "shared host"

# CMake 4 (the H100 host's) refuses a cmake_minimum_required older than 3.5 unless told which
# policies to take. These trees ask for 3.5 or later at their top, so it is a safeguard (a
# subdirectory may ask for less); CMake 3 ignores it (an unused variable).
CONFIGURE = ("-DCMAKE_POLICY_VERSION_MINIMUM=3.5",)


@dataclass(frozen=True)
class Tree:
    """A third-party CMake tree the `record` plan builds: where its source comes from (a git
    commit, archived by `sources`), how it is configured (offline: tests that download, or
    dependencies that are not there, turned off) and roughly what it costs."""

    name: str
    repository: str
    """owner/name on GitHub."""
    commit: str
    tag: str
    """What the commit is (a tag, or the commit the earlier recordings name)."""
    options: tuple[str, ...]
    shape: str
    cpu_s: float
    """CPU seconds a first build took on the 2-core VM (sampled or timed): the plan's guess at
    its cost, scaled by what the steps done so far took against their guesses."""
    tail_s: float = 0.0
    """CPU seconds of its longest edge on the VM: no number of jobs makes a build shorter."""
    cmake_dir: str = "."
    paths: tuple[str, ...] = ()
    """Only these paths of the commit are archived (none: all of it)."""
    needs: str | None = None
    """A tree built (and installed) first, found through CMAKE_PREFIX_PATH."""


TREES = {
    tree.name: tree
    for tree in (
        Tree(
            "json-c",
            "json-c/json-c",
            "d17ad9d1863ebbf39993706140bf67847b7add0f",
            "d17ad9d (the earlier json-c recording's)",
            (),
            "small C units (the library built twice: shared and static), its tests and apps "
            "one unit each, 33 links: 93 edges",
            9.3,
            tail_s=0.7,
        ),
        Tree(
            "libuv",
            "libuv/libuv",
            "6179e7af87413396d5853a1c3722c8b5749336c8",
            "6179e7af8 (the earlier libuv recordings')",
            ("-DLIBUV_BUILD_TESTS=OFF", "-DLIBUV_BUILD_BENCH=OFF"),
            "small C units built twice (static and shared libuv), two links: 73 edges",
            21.0,
            tail_s=1.2,
        ),
        Tree(
            "zstd",
            "facebook/zstd",
            "2dddf0905619b70c25faeca7f1a39601dc97616f",
            "2dddf0905 (the earlier zstd recording's)",
            (),
            "many small C units (static and shared libzstd, the zstd program): 105 edges",
            125.0,
            tail_s=10.7,
            cmake_dir="build/cmake",
        ),
        Tree(
            "flatbuffers",
            "google/flatbuffers",
            "0100f6a5779831fa7a651e4b67ef389a8752bd9b",
            "v23.5.26 (ONNX Runtime's cmake/deps.txt pin)",
            (
                "-DFLATBUFFERS_BUILD_TESTS=OFF",
                "-DFLATBUFFERS_INSTALL=OFF",
                "-DFLATBUFFERS_BUILD_FLATHASH=OFF",
            ),
            "a few heavy C++ units (the schema parser, one code generator per language) "
            "built into the library and flatc: 42 edges",
            300.0,
            tail_s=35.0,
        ),
        Tree(
            "abseil-cpp",
            "abseil/abseil-cpp",
            "4447c7562e3bc702ade25105912dce503f0c4010",
            "20240722.0 (ONNX Runtime's cmake/deps.txt pin)",
            ("-DABSL_BUILD_TESTING=OFF", "-DABSL_PROPAGATE_CXX_STD=ON", "-DCMAKE_CXX_STANDARD=17"),
            "many small and medium C++ units in about 80 static libraries, one archive "
            "each: 245 edges",
            500.0,
            tail_s=15.0,
        ),
        Tree(
            "re2",
            "google/re2",
            "6dcd83d60f7944926bfd308cc13979fc53dd69ca",
            "2024-07-02 (ONNX Runtime's cmake/deps.txt pin)",
            ("-DRE2_BUILD_TESTING=OFF",),
            "a few medium C++ units against an installed abseil-cpp, one library",
            60.0,
            tail_s=15.0,
            needs="abseil-cpp",
        ),
        Tree(
            "protobuf",
            "protocolbuffers/protobuf",
            "f0dc78d7e6e331b8c6bb2d5283e06aa26883ca7c",
            "v21.12 (ONNX Runtime's cmake/deps.txt pin)",
            ("-Dprotobuf_BUILD_TESTS=OFF", "-Dprotobuf_WITH_ZLIB=OFF"),
            "libprotobuf, libprotobuf-lite, libprotoc and protoc: many medium and heavy C++ "
            "units (the lite sources built twice), a few links: 205 edges",
            900.0,
            tail_s=40.0,
            paths=(
                "CMakeLists.txt",
                "cmake",
                "src",
                "configure.ac",
                "protobuf.pc.in",
                "protobuf-lite.pc.in",
                "LICENSE",
            ),
        ),
        Tree(
            "fmt",
            "fmtlib/fmt",
            "60ccad511fd680cb91d8b60a315759f71c67bef9",
            "60ccad51 (the earlier fmt recording's)",
            ("-DFMT_TEST=ON",),
            "a long tail of heavy test units (gmock-gtest-all.cc, format-test.cc, ...) then "
            "many test links: 77 edges",
            600.0,
            tail_s=73.0,
        ),
        Tree(
            "googletest",
            "google/googletest",
            "7260682388d493f155be62c3ce2efc7c7a9a3dcf",
            "72606823 (the earlier googletest recording's)",
            ("-Dgtest_build_tests=ON",),
            "googletest's own tests: 58 C++ units (gtest-all.cc built into 7 libraries, one "
            "long tail unit: gtest_all_test.cc), 52 links: 110 edges",
            750.0,
            tail_s=160.0,
        ),
    )
}


# Each tree's earlier release, by the name of the tree in `TREES` (`record --part 3`): a first
# build of it, then, in the same history, a first build of the tree at its recorded commit in a
# fresh build directory, as a user who built one release (or variant) builds the next. Tags some
# months to a year before the recorded commit, so that most compile units keep their names;
# configured as the recorded tree is (the same options exist at these tags). `paths`: what the
# build reads, where the whole tree would make a large archive.
_EARLIER = (
    Tree(
        "json-c-0.19",
        "json-c/json-c",
        "aa716cd8d663c976b99b0f30f102ee1d8ef63146",
        "json-c-0.19-20260627 (2 months before the recorded commit)",
        (),
        "at its recorded commit: " + TREES["json-c"].shape,
        9.3,
        tail_s=0.7,
    ),
    Tree(
        "libuv-1.51.0",
        "libuv/libuv",
        "5152db2cbfeb5582e9c27c5ea1dba2cd9e10759b",
        "v1.51.0 (a year before the recorded commit)",
        TREES["libuv"].options,
        "at its recorded commit: " + TREES["libuv"].shape,
        21.0,
        tail_s=1.2,
        paths=(
            "CMakeLists.txt",
            "src",
            "include",
            "cmake-toolchains",
            "libuv.pc.in",
            "libuv-static.pc.in",
            "configure.ac",
            "LICENSE",
            "LICENSE-extra",
        ),
    ),
    Tree(
        "zstd-1.5.6",
        "facebook/zstd",
        "794ea1b0afca0f020f4e57b6732332231fb23c70",
        "v1.5.6 (7 months before the recorded commit)",
        (),
        "at its recorded commit: " + TREES["zstd"].shape,
        125.0,
        tail_s=10.7,
        cmake_dir="build/cmake",
        paths=("build/cmake", "lib", "programs", "LICENSE", "COPYING"),
    ),
    Tree(
        "flatbuffers-23.1.21",
        "google/flatbuffers",
        "ee848a02e17a94edaacd1dd95a1664b59c6f06b2",
        "v23.1.21 (4 months before v23.5.26)",
        TREES["flatbuffers"].options,
        "at its recorded commit: " + TREES["flatbuffers"].shape,
        300.0,
        tail_s=35.0,
        paths=("CMakeLists.txt", "CMake", "src", "include", "grpc", "LICENSE.txt"),
    ),
    Tree(
        "abseil-cpp-20240116.2",
        "abseil/abseil-cpp",
        "d7aaad83b488fd62bd51c81ecf16cd938532cc0a",
        "20240116.2 (the release before 20240722.0)",
        TREES["abseil-cpp"].options,
        "at its recorded commit: " + TREES["abseil-cpp"].shape,
        500.0,
        tail_s=15.0,
        paths=("CMakeLists.txt", "CMake", "absl", "LICENSE"),
    ),
    Tree(
        "re2-2024-02-01",
        "google/re2",
        "9665465b69ab699279ef9fb9454559d90fed1d76",
        "2024-02-01 (5 months before 2024-07-02)",
        TREES["re2"].options,
        "at its recorded commit: " + TREES["re2"].shape,
        60.0,
        tail_s=15.0,
        needs="abseil-cpp",
    ),
    Tree(
        "protobuf-21.5",
        "protocolbuffers/protobuf",
        "ab840345966d0fa8e7100d771c92a73bfbadd25c",
        "v21.5 (4 months before v21.12)",
        TREES["protobuf"].options,
        "at its recorded commit: " + TREES["protobuf"].shape,
        900.0,
        tail_s=40.0,
        paths=TREES["protobuf"].paths,
    ),
    Tree(
        "fmt-12.0.0",
        "fmtlib/fmt",
        "e424e3f2e607da02742f73db84873b8084fc714c",
        "12.0.0 (11 months before the recorded commit)",
        TREES["fmt"].options,
        "at its recorded commit: " + TREES["fmt"].shape,
        600.0,
        tail_s=73.0,
    ),
    Tree(
        "googletest-1.17.0",
        "google/googletest",
        "52eb8108c5bdec04579160ae17225d66034bd723",
        "v1.17.0 (15 months before the recorded commit)",
        TREES["googletest"].options,
        "at its recorded commit: " + TREES["googletest"].shape,
        750.0,
        tail_s=160.0,
    ),
)
EARLIER = {
    recorded.name: earlier
    for recorded in TREES.values()
    for earlier in _EARLIER
    if earlier.repository == recorded.repository
}


@dataclass(frozen=True)
class Step:
    """One build of the plan: `kind` is "first" (a fresh build tree), "rebuild" (the same
    tree after `ninja -t clean`), "busy" (a first build with busy loops from 30 to 70% of
    its progress, one per core, `watch`), "earlier" (a first build of the tree's earlier
    release, `EARLIER`) or "later" (then a first build of the tree at its recorded commit in
    a fresh build directory, the earlier release's build in the history: a pair)."""

    tree: str
    jobs: int
    kind: str

    @property
    def recording(self) -> str:
        """The recording it belongs to (one build tree, its runs in order)."""
        suffix = {
            "busy": "-busy-loops",
            "earlier": "-earlier-release",
            "later": "-after-earlier-release",
        }.get(self.kind, "")
        return f"{self.tree}-j{self.jobs}{suffix}"

    @property
    def pair(self) -> Step | None:
        """The other step of an "earlier"/"later" pair."""
        other = {"earlier": "later", "later": "earlier"}.get(self.kind)
        return None if other is None else Step(self.tree, self.jobs, other)


def plan_for(cpus: int, part: int = 1) -> list[Step]:
    """What `record` builds on a host of `cpus` cores, most wanted first (a step that would
    not fit the time left is skipped, so the end of the list is what a short budget loses).
    Part 1: first builds of every tree but googletest with all cores, a clean rebuild of the
    quicker ones, a slower first build (4 jobs, from a fresh tree), then first builds with busy
    loops beside them. Part 2 (a second call, when there is one): googletest (its one long
    unit makes it the dearest), then more 4-job first builds. Part 3: pairs, tree after tree,
    the jobs of part 1's first builds: a first build of the tree's earlier release
    (`EARLIER`), then at once a first build of the tree at its recorded commit in a fresh
    build directory, in the same history (`Step.pair`; a pair whose two builds do not fit the
    time left is skipped whole). The small trees run 2 jobs: with all 16 cores they would end
    in a second or two, too short for a checkpoint at 25% to mean anything."""
    wide = max(1, cpus)
    narrow = min(4, wide)
    small = min(2, wide)
    return _once(_plan(wide, narrow, small, part))


def _once(plan: list[Step]) -> list[Step]:
    """`plan` with each step once (on a host of few cores, 2, 4 and all cores may be one)."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for step in plan:
        if (step.recording, step.kind) not in seen:
            seen.add((step.recording, step.kind))
            kept.append(step)
    return kept


def _plan(wide: int, narrow: int, small: int, part: int) -> list[Step]:
    if part == 3:
        jobs = [
            ("json-c", small),
            ("libuv", small),
            ("zstd", wide),
            ("abseil-cpp", wide),
            ("re2", narrow),
            ("flatbuffers", wide),
            ("protobuf", wide),
            ("fmt", wide),
            ("googletest", wide),
        ]
        return [Step(tree, n, kind) for tree, n in jobs for kind in ("earlier", "later")]
    if part == 2:
        return [
            Step("googletest", wide, "first"),
            Step("googletest", wide, "rebuild"),
            Step("flatbuffers", narrow, "first"),
            Step("abseil-cpp", narrow, "first"),
            Step("libuv", small, "busy"),
            Step("fmt", narrow, "first"),
        ]
    return [
        Step("json-c", small, "first"),
        Step("json-c", small, "rebuild"),
        Step("libuv", small, "first"),
        Step("libuv", small, "rebuild"),
        Step("zstd", wide, "first"),
        Step("zstd", wide, "rebuild"),
        Step("abseil-cpp", wide, "first"),
        Step("abseil-cpp", wide, "rebuild"),
        Step("re2", narrow, "first"),
        Step("flatbuffers", wide, "first"),
        Step("protobuf", wide, "first"),
        Step("fmt", wide, "first"),
        Step("zstd", narrow, "first"),
        Step("zstd", wide, "busy"),
        Step("re2", narrow, "rebuild"),
        Step("flatbuffers", wide, "rebuild"),
        Step("fmt", wide, "rebuild"),
    ]


def sources(mirror: Path, into: Path, trees: Iterable[Tree] | None = None) -> list[Path]:
    """Each tree's source at its commit as `into/NAME.tar.xz` (`git archive` from the git
    directories under `mirror`, `owner+name/repo`, as the `fetch` tool lays them out); by
    default every tree of `TREES` and its earlier release (`EARLIER`: `json-c-0.19.tar.xz`)."""
    into.mkdir(parents=True, exist_ok=True)
    written = []
    for tree in [*TREES.values(), *EARLIER.values()] if trees is None else trees:
        git_dir = mirror / tree.repository.replace("/", "+") / "repo"
        archive = subprocess.run(
            [
                "git",
                f"--git-dir={git_dir}",
                "archive",
                f"--prefix={tree.name}/",
                tree.commit,
                *tree.paths,
            ],
            check=True,
            capture_output=True,
        ).stdout
        target = into / f"{tree.name}.tar.xz"
        temporary = target.with_name(f".{target.name}.{os.getpid()}")
        temporary.write_bytes(lzma.compress(archive, preset=6))
        os.replace(temporary, target)
        written.append(target)
    return written


@dataclass
class Recorder:
    """Runs a plan of builds under `workbench run` and exports what each recorded."""

    archives: Path
    work: Path
    out: Path
    budget_s: float
    trees: dict[str, Tree]
    earlier: dict[str, Tree] = field(default_factory=lambda: dict(EARLIER))
    """Each tree's earlier release, for the plan's "earlier" steps."""
    speed: list[float] = field(default_factory=list)
    """Each step's wall time against its guess (the guesses' error on this host)."""
    log: list[dict[str, Any]] = field(default_factory=list)
    began: float = field(default_factory=time.monotonic)
    load_at_start: float = field(default_factory=lambda: os.getloadavg()[0])
    """The host's load average before the plan's first step: what else ran on it."""
    built: dict[str, Path] = field(default_factory=dict)
    """Each recording's build directory."""
    steps: dict[str, Step] = field(default_factory=dict)
    """Each recording's first step."""
    labels: dict[str, list[str]] = field(default_factory=dict)
    watched: dict[str, list[Path]] = field(default_factory=dict)
    installed: dict[str, Path] = field(default_factory=dict)
    dependencies: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    """Each recording's edges (by first output) and the edges each waited for, from its ninja
    graph after its first build (`BuildGraph.executed_dependencies`)."""

    @property
    def state(self) -> Path:
        return self.work / "state"

    def left_s(self) -> float:
        return self.budget_s - (time.monotonic() - self.began)

    def tree_for(self, step: Step) -> Tree:
        """The tree `step` builds: its earlier release for an "earlier" step."""
        return self.earlier[step.tree] if step.kind == "earlier" else self.trees[step.tree]

    def done(self, step: Step) -> bool:
        """Whether `step` ran to its end (the log has its time)."""
        return any(
            e.get("step") == step.recording and e.get("kind") == step.kind and "took_s" in e
            for e in self.log
        )

    def guess_s(self, step: Step) -> float:
        """How long `step` should take here: its tree's VM CPU over the cores it can use (at
        most its jobs, never more than the host's), a few seconds for configure and start,
        scaled by how far the guesses were off so far; busy loops halve its cores."""
        cores = max(1, min(step.jobs, os.cpu_count() or 1))
        tree = self.tree_for(step)
        seconds = max(tree.cpu_s / cores, tree.tail_s) + 8.0
        if step.kind == "busy":
            seconds *= 1.6
        scale = statistics.median(self.speed) if self.speed else 1.0
        return seconds * scale

    def say(self, **entry: Any) -> None:
        entry = {"t_s": round(time.monotonic() - self.began, 1), **entry}
        self.log.append(entry)
        print(json.dumps(entry), flush=True)

    def run(self, plan: Sequence[Step]) -> dict[str, Any]:
        for step in plan:
            tree = self.tree_for(step)
            guess = self.guess_s(step)
            # An earlier release's build starts only if its pair's later build fits after it.
            needed = guess + (
                self.guess_s(step.pair) if step.kind == "earlier" and step.pair else 0
            )
            if tree.needs is not None and tree.needs not in self.installed:
                self.say(step=step.recording, kind=step.kind, skipped=f"needs {tree.needs}")
                continue
            if step.kind == "later" and step.pair is not None and not self.done(step.pair):
                self.say(step=step.recording, kind=step.kind, skipped="no earlier release built")
                continue
            if step.kind == "rebuild" and step.recording not in self.built:
                self.say(step=step.recording, kind=step.kind, skipped="no first build")
                continue
            if needed > self.left_s():
                self.say(
                    step=step.recording,
                    kind=step.kind,
                    skipped=f"guess {needed:.0f} s, {self.left_s():.0f} s left",
                )
                continue
            began = time.monotonic()
            try:
                outcome = self.build(step)
            except (subprocess.SubprocessError, OSError) as error:
                self.say(step=step.recording, kind=step.kind, failed=str(error)[-2000:])
                continue
            took = time.monotonic() - began
            self.speed.append(took / guess)
            self.say(
                step=step.recording,
                kind=step.kind,
                guess_s=round(guess),
                took_s=round(took, 1),
                **outcome,
            )
            self.export()
        return self.export()

    def _unpacked(self, tree: Tree) -> Path:
        source = self.work / "src" / tree.name
        if not source.exists():
            with tarfile.open(self.archives / f"{tree.name}.tar.xz", "r:xz") as archive:
                archive.extractall(self.work / "src", filter="data")
        return source

    def configure_argv(self, tree: Tree, build: Path) -> list[str]:
        options = list(tree.options)
        if tree.needs is not None:
            options.append(f"-DCMAKE_PREFIX_PATH={self.installed[tree.needs]}")
        source = self._unpacked(tree) / tree.cmake_dir
        return [
            "cmake",
            "-S",
            str(source),
            "-B",
            str(build),
            "-G",
            "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            *CONFIGURE,
            *options,
        ]

    def build(self, step: Step) -> dict[str, Any]:
        tree = self.tree_for(step)
        build = self.built.get(step.recording)
        if step.kind == "rebuild":
            assert build is not None
            _quiet(["ninja", "-C", str(build), "-t", "clean"])
            label = "clean rebuild"
        elif step.kind in ("earlier", "later"):
            build = self.work / "build" / step.recording
            shutil.rmtree(build, ignore_errors=True)
            _quiet(self.configure_argv(tree, build), timeout=max(30.0, self.left_s()))
            self.built[step.recording] = build
            self.steps[step.recording] = step
            release = self.earlier[step.tree].tag.split(" ")[0]
            label = (
                f"first build of {release} (no history)"
                if step.kind == "earlier"
                else (
                    f"first build of {tree.commit[:10] or tree.name} in a fresh build directory "
                    f"(no history of this tree; the history holds {release}'s first build just "
                    "before)"
                )
            )
        else:
            build = self.work / "build" / step.recording
            shutil.rmtree(build, ignore_errors=True)
            _quiet(self.configure_argv(tree, build), timeout=max(30.0, self.left_s()))
            self.built[step.recording] = build
            self.steps[step.recording] = step
            label = "first build (no history)"
        watcher = None
        watch_file = self.work / f"watch-{step.recording}.json"
        hogs = os.cpu_count() or 1
        if step.kind == "busy":
            latest = 0
            if self.state.exists():
                with History(self.state) as history:
                    latest = max((r.id for r in history.builds(limit=5)), default=0)
            watcher = subprocess.Popen(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "watch",
                    str(self.state),
                    step.recording,
                    str(watch_file),
                    "--hogs",
                    str(hogs),
                    "--after",
                    str(latest),
                    "--timeout",
                    str(max(60.0, self.left_s() + 30)),
                ]
            )
            self.watched.setdefault(step.recording, []).append(watch_file)
        load_before = os.getloadavg()[0]
        argv = [
            sys.executable,
            "-m",
            "workbench",
            "--state-dir",
            str(self.state),
            "run",
            "--name",
            step.recording,
            "--",
            "ninja",
            "-C",
            str(build),
            f"-j{step.jobs}",
        ]
        try:
            _quiet(argv, timeout=max(10.0, self.left_s() + 30.0))
        finally:
            if watcher is not None:
                try:
                    watcher.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    watcher.terminate()  # ours: it stops its busy loops as it ends
                    watcher.wait()
        how = f"{label}, load average {load_before:.1f} before it (earlier steps' builds included)"
        if step.kind == "busy" and watch_file.exists():
            seen = json.loads(watch_file.read_text())
            if seen["hogs_from_s"] is None:
                how += ", no busy loops (it ended before they were due)"
            else:
                how += (
                    f", {hogs} busy loops from {seen['hogs_from_s']} s to {seen['hogs_until_s']} s"
                )
        self.labels.setdefault(step.recording, []).append(how)
        if step.kind != "rebuild":
            self.dependencies[step.recording] = dependencies_of(build)
        needed = {t.needs for t in (*self.trees.values(), *self.earlier.values())}
        if tree.name in needed and step.kind in ("first", "later"):
            prefix = self.work / "prefix" / tree.name
            _quiet(["cmake", "--install", str(build), "--prefix", str(prefix)])
            self.installed[tree.name] = prefix
        return {"label": how, "jobs": step.jobs}

    def quiet(self) -> bool:
        """Whether nothing else ran on the host when the plan began: a load average under a
        quarter of its cores (the plan's own builds keep it high from one step to the next)."""
        return self.load_at_start < 0.25 * (os.cpu_count() or 1)

    def load_words(self) -> str:
        if self.quiet():
            return (
                f"idle (load average {self.load_at_start:.1f} before the plan): nothing else "
                "running but this plan's steps (eta_recordings.py record)"
            )
        return (
            f"shared with other work (load average {self.load_at_start:.1f} before the plan; "
            "each run's label says it before that run)"
        )

    def host(self) -> str:
        model = ""
        with contextlib.suppress(OSError):
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        return f"{os.cpu_count()} cores ({model or 'model unknown'})"

    def pair_notes(self, step: Step) -> dict[str, Any]:
        """What a recording of a pair says of it (see the module docstring): the other
        recording's name, which was built first, and its own archive; nothing for a recording
        that is not of a pair."""
        if step.pair is None:
            return {}
        tree = self.tree_for(step)
        notes: dict[str, Any] = {"archive": f"{tree.name}.tar.xz"}
        if not (self.done(step) and self.done(step.pair)):
            return notes
        earlier = self.tree_for(step if step.kind == "earlier" else step.pair)
        later = self.trees[step.tree]
        order = (
            f"1 of 2: built first; its pair ({step.pair.recording}: "
            f"{later.commit[:10]}) right after it"
            if step.kind == "earlier"
            else f"2 of 2: built right after its pair ({step.pair.recording}: "
            f"{earlier.tag.split(' ')[0]})"
        )
        notes.update(
            pair=step.pair.recording,
            pair_order=(
                f"{order}, on this host with the same -j, in one state directory (the "
                "supervisor's history held the earlier release's build when the later one ran), "
                "each in a fresh build directory: two trees of the same sources"
            ),
        )
        return notes

    def export(self) -> dict[str, Any]:
        """Every recording so far, with the plan's log, to `out` (a JSON file)."""
        documents = []
        for recording in self.built:
            step = self.steps[recording]
            tree = self.tree_for(step)
            steps = [e for e in self.log if e.get("step") == recording and "took_s" in e]
            if not steps:
                continue
            watched = [
                json.loads(p.read_text()) for p in self.watched.get(recording, []) if p.exists()
            ]
            jobs = steps[0]["jobs"]
            notes = {
                "project": recording,
                "source": (
                    f"github:{tree.repository}@{tree.commit[:10]} ({tree.tag})"
                    if tree.repository
                    else tree.tag
                )
                + ("" if tree.cmake_dir == "." else f" ({tree.cmake_dir})"),
                "configure": " ".join(
                    [
                        "cmake -S SRC -B BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release",
                        *CONFIGURE,
                        *tree.options,
                    ]
                    + (
                        ["-DCMAKE_PREFIX_PATH=<its installed " + tree.needs + ">"]
                        if tree.needs
                        else []
                    )
                ),
                "build": f"workbench run -- ninja -C BUILD -j{jobs}",
                "shape": tree.shape,
                "host": f"{self.host()}, {self.load_words()}",
                "load": QUIET if self.quiet() else SHARED,
                **self.pair_notes(step),
            }
            document = export(
                self.state,
                recording,
                notes,
                list(self.labels.get(recording, [])),
                {w["build_id"]: w for w in watched},
            )
            if recording in self.dependencies:
                document["dependencies"] = self.dependencies[recording]
            documents.append(document)
        document = {"host": self.host(), "budget_s": self.budget_s, "log": self.log,
                    "recordings": documents}  # fmt: skip
        self.out.parent.mkdir(parents=True, exist_ok=True)
        _write(self.out, document)
        return document


QUICK = Tree(
    "quick",
    "",
    "",
    "generated by eta_recordings.py record --quick",
    (),
    "a generated C library (static and shared) and two programs: a check of the driver",
    4.0,
)


# `record --quick --part 3`'s earlier release of `QUICK`: one unit fewer, one of another name.
QUICK_EARLIER = Tree(
    "quick-earlier",
    "",
    "",
    "quick-earlier (generated by eta_recordings.py record --quick --part 3)",
    (),
    "the quick tree with one unit fewer and one named otherwise",
    4.0,
)


def quick_archive(archives: Path, units: int = 6, name: str = "quick", older: bool = False) -> Path:
    """A small CMake C tree (`QUICK`) as `archives/NAME.tar.xz`, for `record --quick`; `older`:
    its earlier release (`QUICK_EARLIER`: the last unit gone, the first named otherwise)."""
    names = [f"u{n}" for n in range(units)]
    if older:
        names = ["u0_old", *names[1:-1]]
    lines = [
        "cmake_minimum_required(VERSION 3.13)",
        "project(quick C)",
        "set(SOURCES " + " ".join(f"{unit}.c" for unit in names) + ")",
        "add_library(quick_static STATIC ${SOURCES})",
        "add_library(quick_shared SHARED ${SOURCES})",
        "add_executable(tool main.c)",
        "target_link_libraries(tool quick_static)",
        "add_executable(tool2 main.c)",
        "target_link_libraries(tool2 quick_shared)",
    ]
    files = {f"{name}/CMakeLists.txt": "\n".join(lines) + "\n"}
    for n, unit in enumerate(names):
        files[f"{name}/{unit}.c"] = f"int {unit}(int x) {{ return x * {n + 1}; }}\n"
    files[f"{name}/main.c"] = f"int {names[0]}(int);\nint main(void) {{ return {names[0]}(0); }}\n"
    archives.mkdir(parents=True, exist_ok=True)
    target = archives / f"{name}.tar.xz"
    with tarfile.open(target, "w:xz") as archive:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
    return target


def split(document: dict[str, Any], into: Path, tag: str) -> list[Path]:
    """`record`'s recordings (its `eta-recordings.json`) as one file each under `into`, named
    `TAG-RECORDING.json` (the project named the same way: "TAG RECORDING", and the `pair` it
    names)."""
    written = []
    for recording in document["recordings"]:
        name = f"{tag}-{recording['project']}"
        target = into / f"{name}.json"
        renamed = {**recording, "project": f"{tag} {recording['project']}"}
        if recording.get("pair"):
            renamed["pair"] = f"{tag} {recording['pair']}"
        _write(target, renamed)
        written.append(target)
    return written


def dependencies_of(build: Path) -> dict[str, list[str]]:
    """Every edge of the ninja graph in `build` (by first output) and the edges it waits for
    (phony ones looked through): what the rest of a build can run side by side, which the
    edges' times alone do not say. Empty when ninja cannot print the graph."""
    try:
        graph = read_graph(build)
    except GraphError:
        return {}
    edges = {id(edge): edge for edge in graph.producer.values() if edge.rule != "phony"}
    return graph.executed_dependencies(edge.outputs for edge in edges.values())


def _quiet(argv: list[str], timeout: float = 600.0) -> None:
    """Run `argv`; on failure raise with the end of what it said."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise subprocess.SubprocessError(
            f"{' '.join(argv)} exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}"
        )


def _write(path: Path, document: dict[str, Any]) -> None:
    """`document` to `path` atomically (a temporary file beside it, then renamed)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    os.replace(temporary, path)


# A quoted include (`#include "fmt/format.h"`): the tree's own headers; `<...>` are the system's.
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.MULTILINE)
# What a tree's compile units and the headers they include are named.
TEXT_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".h", ".hh", ".hpp", ".hxx", ".inc", ".ipp")
UNIT_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu")


def source_bytes(files: Mapping[str, bytes]) -> dict[str, tuple[int, int]]:
    """Each compile unit of a tree (`files`: path in the tree → its text): its own bytes and
    its bytes with every header of the tree it includes, transitively, each counted once. An
    include resolves beside the including file, else to the tree's shortest path ending with it
    (an include directory the scan does not know: `absl/base/config.h` is `absl/base/config.h`
    wherever the tree keeps it); one that resolves nowhere (a generated header, the system's)
    counts nothing."""
    includes = {path: _INCLUDE.findall(text) for path, text in files.items()}
    by_ending: dict[str, str] = {}
    for path in sorted(files, key=lambda p: (len(p), p)):
        parts = path.split("/")
        for start in range(len(parts)):
            by_ending.setdefault("/".join(parts[start:]), path)

    def resolve(including: str, name: bytes) -> str | None:
        wanted = posixpath.normpath(name.decode("utf-8", "replace"))
        beside = posixpath.normpath(posixpath.join(posixpath.dirname(including), wanted))
        return beside if beside in files else by_ending.get(wanted)

    found: dict[str, tuple[int, int]] = {}
    for unit in files:
        if not unit.endswith(UNIT_SUFFIXES):
            continue
        seen = {unit}
        waiting = [unit]
        while waiting:
            including = waiting.pop()
            for name in includes[including]:
                header = resolve(including, name)
                if header is not None and header not in seen:
                    seen.add(header)
                    waiting.append(header)
        found[unit] = (len(files[unit]), sum(len(files[path]) for path in seen))
    return found


def archive_texts(archive: Path) -> dict[str, bytes]:
    """The C/C++ sources and headers of a `git archive` tarball (`sources`), by path in the
    tree (its top folder, the tree's name, left out)."""
    texts: dict[str, bytes] = {}
    with tarfile.open(archive) as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(TEXT_SUFFIXES):
                handle = tar.extractfile(member)
                if handle is not None:
                    texts[member.name.split("/", 1)[-1]] = handle.read()
    return texts


def tree_of(recording: dict[str, Any]) -> str:
    """The tree a recording built: `github:fmtlib/fmt@60ccad51 ...` → `fmt`."""
    return str(recording["source"]).split("@", 1)[0].rsplit("/", 1)[-1]


def add_source_bytes(archives: Path, directory: Path = DATA) -> list[Path]:
    """Each recording under `directory` with `source_bytes` of its tree's archive in `archives`
    (`<tree>.tar.xz`, or the recording's own `archive`: an earlier release's): {path in the
    tree: [own bytes, with the tree's headers it includes]}."""
    written = []
    cache: dict[str, dict[str, tuple[int, int]]] = {}
    for path in sorted(directory.glob("*.json")):
        recording = json.loads(path.read_text())
        tree = recording.get("archive", f"{tree_of(recording)}.tar.xz").removesuffix(".tar.xz")
        archive = archives / f"{tree}.tar.xz"
        if not archive.is_file():
            continue
        if tree not in cache:
            cache[tree] = source_bytes(archive_texts(archive))
        recording["source_bytes"] = {unit: list(sizes) for unit, sizes in cache[tree].items()}
        recording["source_bytes_from"] = (
            f"{archive.name} (`sources`, the commit in `source`): each compile unit's bytes and "
            'its bytes with the tree\'s own headers it includes (`#include "..."`), transitively'
        )
        _write(path, recording)
        written.append(path)
    return written


def recordings(directory: Path = DATA) -> list[dict[str, Any]]:
    """Every recording kept under `directory`, by file name."""
    return [json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))]


def main() -> None:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    out = commands.add_parser("export", help="write one project's runs from a state directory")
    out.add_argument("state", type=Path)
    out.add_argument("name")
    out.add_argument("output", type=Path)
    out.add_argument("--source", required=True, help="e.g. github:fmtlib/fmt@60ccad51")
    out.add_argument("--configure", required=True, help="the cmake command line used")
    out.add_argument("--shape", required=True, help="what kind of tree it is")
    out.add_argument("--label", action="append", default=[], help="each run's label, in order")
    out.add_argument("--host", default=f"{os.cpu_count()} cores")
    out.add_argument("--project", help="the recording's name, when not the builds' name")
    out.add_argument(
        "--contention", type=Path, action="append", default=[], help="a `watch` file (repeat)"
    )
    follow = commands.add_parser("watch", help="keep a build's contention; busy loops mid-build")
    follow.add_argument("state", type=Path)
    follow.add_argument("name")
    follow.add_argument("output", type=Path)
    follow.add_argument("--hogs", type=int, default=0, help="busy loops to run mid-build")
    follow.add_argument("--from", dest="start_at", type=float, default=0.3)
    follow.add_argument("--until", dest="stop_at", type=float, default=0.7)
    follow.add_argument("--after", type=int, help="follow the first build after this id")
    follow.add_argument("--timeout", type=float, default=7200.0, help="seconds at most")
    cpu = commands.add_parser(
        "add-cpu", help="add the sampled CPU to a recording, from the history that recorded it"
    )
    cpu.add_argument("state", type=Path)
    cpu.add_argument("name")
    cpu.add_argument("recording", type=Path)
    archive = commands.add_parser(
        "sources", help="archive each tree of `record` at its commit from git directories"
    )
    archive.add_argument("mirror", type=Path, help="a folder of owner+name/repo git dirs")
    archive.add_argument("into", type=Path)
    record = commands.add_parser(
        "record", help="configure and build each tree of the plan under `workbench run`"
    )
    record.add_argument("--sources", type=Path, help="the archives `sources` wrote")
    record.add_argument("--work", type=Path, help="where trees are unpacked and built")
    record.add_argument(
        "--out", type=Path, required=True, help="a folder: eta-recordings-partN.json goes here"
    )
    record.add_argument("--budget-s", type=float, default=480.0, help="stop starting steps then")
    record.add_argument("--only", action="append", default=[], help="a tree of the plan (repeat)")
    record.add_argument("--quick", action="store_true", help="a small generated tree only")
    record.add_argument(
        "--part", type=int, choices=(1, 2, 3), default=1, help="which plan (3: release pairs)"
    )
    split_out = commands.add_parser(
        "import", help="split `record`'s eta-recordings.json into one recording per file"
    )
    split_out.add_argument("recordings", type=Path, nargs="+", help="eta-recordings-*.json")
    split_out.add_argument("--tag", required=True, help="e.g. h100: names the files and projects")
    split_out.add_argument("--into", type=Path, default=DATA)
    sized = commands.add_parser(
        "source-bytes", help="add each compile unit's bytes (with its headers) to the recordings"
    )
    sized.add_argument("archives", type=Path, help="the archives `sources` wrote")
    sized.add_argument("--into", type=Path, default=DATA)
    args = parser.parse_args()
    if args.command == "source-bytes":
        for path in add_source_bytes(args.archives, args.into):
            print(path, file=sys.stderr)
        return
    if args.command == "sources":
        for path in sources(args.mirror, args.into):
            print(f"{path}: {path.stat().st_size} bytes", file=sys.stderr)
        return
    if args.command == "import":
        for recordings_file in args.recordings:
            document = json.loads(recordings_file.read_text())
            for path in split(document, args.into, args.tag):
                print(path, file=sys.stderr)
        return
    if args.command == "record":
        work = args.work or Path(tempfile.mkdtemp(prefix="eta-record-"))
        earlier = dict(EARLIER)
        if args.quick and args.part == 3:
            archives = work / "archives"
            quick_archive(archives)
            quick_archive(archives, name=QUICK_EARLIER.name, older=True)
            trees, earlier = {"quick": QUICK}, {"quick": QUICK_EARLIER}
            plan = [Step("quick", 2, "earlier"), Step("quick", 2, "later")]
        elif args.quick:
            archives = work / "archives"
            quick_archive(archives)
            trees = {"quick": QUICK}
            plan = [
                Step("quick", 2, "first"),
                Step("quick", 2, "rebuild"),
                Step("quick", 2, "busy"),
            ]
        else:
            if args.sources is None:
                raise SystemExit("workbench: error: record: --sources DIR is needed (or --quick)")
            archives, trees = args.sources, TREES
            plan = plan_for(os.cpu_count() or 1, args.part)
            if args.only:
                plan = [step for step in plan if step.tree in args.only]
        name = f"eta-recordings-part{args.part}.json"
        if args.quick:
            name = "eta-recordings-quick.json" if args.part != 3 else "eta-recordings-quick3.json"
        recorder = Recorder(archives, work, args.out / name, args.budget_s, trees, earlier)
        document = recorder.run(plan)
        summary = {
            "eta_recordings record": {
                "host": document["host"],
                "recordings": {
                    r["project"]: [run["label"] for run in r["runs"]]
                    for r in document["recordings"]
                },
                "skipped": [e for e in document["log"] if "skipped" in e or "failed" in e],
                "elapsed_s": round(time.monotonic() - recorder.began, 1),
            }
        }
        print(json.dumps(summary, indent=1))
        return
    if args.command == "add-cpu":
        document = add_cpu(json.loads(args.recording.read_text()), args.state, args.name)
        _write(args.recording, document)
        print(f"{args.recording}: CPU of {len(document['runs'])} runs", file=sys.stderr)
        return
    if args.command == "watch":
        # Stopped from outside (`record` past its time): the busy loops go with it.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
        seen = watch(
            args.state,
            args.name,
            args.hogs,
            args.start_at,
            args.stop_at,
            args.timeout,
            args.after,
        )
        args.output.write_text(json.dumps(seen) + "\n")
        print(
            f"{args.output}: build #{seen['build_id']}, {len(seen['other'])} samples",
            file=sys.stderr,
        )
        return
    watched = [json.loads(path.read_text()) for path in args.contention]
    notes = {
        "source": args.source,
        "configure": args.configure,
        "build": "workbench run -- ninja -C BUILD -j2",
        "shape": args.shape,
        "host": args.host,
        "project": args.project,
    }
    document = export(args.state, args.name, notes, args.label, {w["build_id"]: w for w in watched})
    args.output.parent.mkdir(parents=True, exist_ok=True)
    _write(args.output, document)
    print(f"{args.output}: {len(document['runs'])} runs", file=sys.stderr)


if __name__ == "__main__":
    main()

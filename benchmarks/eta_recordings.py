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

`load` replays a recording into a fresh history, build after build as they ran, so that
`eta.Replay` sees exactly what the supervisor would have read before each run. No source code
of those projects is kept here: only output names and times.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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
    state: Path, name: str, hogs: int, start_at: float, stop_at: float, timeout_s: float = 7200
) -> dict[str, Any]:
    """Follow the next build named `name` in the history at `state` from its start to its end,
    second by second: the contention its live view says ([seconds from its start, other
    processes' CPU now, their mean so far, samples], `LiveView.other`) and the host's CPUs. With
    `hogs`, that many busy loops run from when its progress reaches `start_at` to `stop_at`."""
    began = time.monotonic()
    known: set[int] = set()
    with History(state) as history:
        known = {record.id for record in history.builds(limit=1000)}
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
                    fresh = [r for r in fresh if r.id not in known]
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
            if hogs and not started_hogs and hogs_at[0] is None and fraction >= start_at:
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
    """Replay `recording`'s runs into a fresh history at `state`: [(build id, run)]."""
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


def _write(path: Path, document: dict[str, Any]) -> None:
    """`document` to `path` atomically (a temporary file beside it, then renamed)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    os.replace(temporary, path)


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
    cpu = commands.add_parser(
        "add-cpu", help="add the sampled CPU to a recording, from the history that recorded it"
    )
    cpu.add_argument("state", type=Path)
    cpu.add_argument("name")
    cpu.add_argument("recording", type=Path)
    args = parser.parse_args()
    if args.command == "add-cpu":
        document = add_cpu(json.loads(args.recording.read_text()), args.state, args.name)
        _write(args.recording, document)
        print(f"{args.recording}: CPU of {len(document['runs'])} runs", file=sys.stderr)
        return
    if args.command == "watch":
        seen = watch(args.state, args.name, args.hogs, args.start_at, args.stop_at)
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

"""Recorded real builds of third-party CMake projects, for `eta_accuracy.py --recordings`.

A recording is what the supervisor stored of each run of one project, reduced to what the ETA
reads: the run's duration, ninja's edge total, every edge's exact times (from the build's own
`.ninja_log`, as the supervisor recorded them) and the 1 Hz progress fractions. The files under
`benchmarks/data/eta_runs/` were made this way (each says its source commit, host and load):

    cmake -S SRC -B BUILD -G Ninja -DCMAKE_BUILD_TYPE=Release [project options]
    python -m workbench --state-dir STATE run --name NAME -- ninja -C BUILD -j2   # first build
    ninja -C BUILD -t clean; python -m workbench --state-dir STATE run --name NAME -- ...
    python benchmarks/eta_recordings.py export STATE NAME OUT.json --source ... --load ...

`load` replays a recording into a fresh history, build after build as they ran, so that
`eta.Replay` sees exactly what the supervisor would have read before each run. No source code
of those projects is kept here: only output names and times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from workbench.history.records import SUCCEEDED, EdgeRow, NewBuild, Sampled
from workbench.history.store import History

DATA = Path(__file__).with_name("data") / "eta_runs"


def export(state: Path, name: str, notes: dict[str, Any], labels: list[str]) -> dict[str, Any]:
    """The successful runs named `name` in the history at `state`, oldest first."""
    runs: list[dict[str, Any]] = []
    with History(state) as history:
        records = [r for r in history.builds(limit=1000) if r.name == name]
        records = [r for r in reversed(records) if r.state == SUCCEEDED]
        for index, record in enumerate(records):
            assert record.started is not None and record.duration_s is not None
            start = record.started
            step = record.progress_view.step
            edges = [
                [
                    round(edge.started - start, 3),
                    round(edge.ended - start, 3),
                    edge.outputs[0],
                ]
                for edge in history.edges(record.id)
            ]
            fractions = [
                [round(sample.t - start, 2), round(sample.fraction, 5)]
                for sample in history.samples(record.id)
                if sample.fraction is not None
            ]
            live = record.live_view
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
                }
            )
    return {"project": name, **notes, "runs": runs}


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
                EdgeRow((output,), start + began, start + ended, 0, "0")
                for began, ended, output in run["edges"]
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
    args = parser.parse_args()
    notes = {
        "source": args.source,
        "configure": args.configure,
        "build": "workbench run -- ninja -C BUILD -j2",
        "shape": args.shape,
        "host": args.host,
    }
    document = export(args.state, args.name, notes, args.label)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    print(f"{args.output}: {len(document['runs'])} runs", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Reading a 100k-edge `.ninja_log` incrementally, and analysing it; prints JSON.

A generated v6 log of N edges (CMake-like outputs, 8 jobs' worth of overlapping times, each
link depending on its target's objects) is appended to in steps of 1k edges while one
`NinjaLogReader` follows it, as the supervisor does once a second. Figures: time per 1k new
edges (median), the whole-log first read, and the analysis (edges, critical path, slot usage,
a 60-column series, the build screen's 4096 one-second values). Baseline in the same run:
`wc -l` over the same file, and Python's bare `bytes.split` of each step.

    python benchmarks/ninja_log.py [--edges 100000]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from workbench.analysis import schedule
from workbench.analysis.edges import EdgeAssembler
from workbench.analysis.ninja_log import NinjaLogReader


def _lines(count: int, jobs: int = 8) -> tuple[list[bytes], dict[str, list[str]]]:
    rng = random.Random(16)
    free = [0] * jobs
    lines: list[bytes] = []
    dependencies: dict[str, list[str]] = {}
    objects: list[str] = []
    for index in range(count):
        slot = min(range(jobs), key=free.__getitem__)
        start = free[slot]
        end = start + rng.randint(50, 4000)
        free[slot] = end
        if index % 200 == 199:
            output = f"lib/libtarget_{index // 200}.so"
            dependencies[output] = objects
            objects = []
        else:
            output = f"CMakeFiles/target_{index // 200}.dir/src/dir_{index % 37}/file_{index}.cc.o"
            dependencies[output] = []
            objects.append(output)
        lines.append(b"%d\t%d\t%d\t%s\t%016x\n" % (start, end, end, output.encode(), index))
    lines.sort(key=lambda line: int(line.split(b"\t")[1]))  # ninja writes in end order
    return lines, dependencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--edges", type=int, default=100_000)
    parser.add_argument("--step", type=int, default=1000)
    parser.add_argument(
        "--quick", action="store_true", help="seconds, not minutes: 2,000 edges (checks the script)"
    )
    args = parser.parse_args()
    if args.quick:
        args.edges, args.step = 2000, 500
    lines, dependencies = _lines(args.edges)
    with tempfile.TemporaryDirectory() as directory:
        log = Path(directory) / ".ninja_log"
        log.write_bytes(b"# ninja log v6\n")
        reader = NinjaLogReader.at_build_start(log)
        assembler = EdgeAssembler()
        per_step: list[float] = []
        split_baseline: list[float] = []
        with open(log, "ab") as handle:
            for first in range(0, len(lines), args.step):
                chunk = b"".join(lines[first : first + args.step])
                handle.write(chunk)
                handle.flush()
                began = time.perf_counter()
                assembler.add(reader.read_new())
                per_step.append(time.perf_counter() - began)
                began = time.perf_counter()
                chunk.split(b"\n")
                split_baseline.append(time.perf_counter() - began)
        assembler.flush()
        edges = assembler.edges
        began = time.perf_counter()
        whole = NinjaLogReader.whole(log).read_new()
        first_read_s = time.perf_counter() - began
        began = time.perf_counter()
        subprocess.run(["wc", "-l", str(log)], capture_output=True, check=True)
        wc_s = time.perf_counter() - began
        size = log.stat().st_size
    began = time.perf_counter()
    path = schedule.critical_path(edges, dependencies)
    critical_s = time.perf_counter() - began
    began = time.perf_counter()
    usage = schedule.usage(edges, dependencies, 8)
    usage_s = time.perf_counter() - began
    began = time.perf_counter()
    schedule.series(edges, 60)
    series_s = time.perf_counter() - began
    # What the build screen draws when a build ends: one value a second, its last 4096 seconds.
    end = max(edge.end_s for edge in edges)
    began = time.perf_counter()
    schedule.running_per_interval(((e.start_s, e.end_s) for e in edges), end - 4096, 1.0, 4096)
    per_second_s = time.perf_counter() - began
    print(
        json.dumps(
            {
                "edges": len(edges),
                "entries_read_whole": len(whole),
                "log_bytes": size,
                "incremental_ms_per_1k_edges_median": 1000 * statistics.median(per_step),
                "incremental_ms_per_1k_edges_max": 1000 * max(per_step),
                "baseline_bytes_split_ms_per_1k_median": 1000 * statistics.median(split_baseline),
                "whole_log_first_read_s": first_read_s,
                "baseline_wc_l_s": wc_s,
                "analysis_critical_path_s": critical_s,
                "analysis_slot_usage_s": usage_s,
                "analysis_series_60_s": series_s,
                "analysis_per_second_4096_s": per_second_s,
                "critical_path_edges": len(path.edges),
                "mean_parallelism": usage.mean_parallelism,
            },
            indent=2,
            sort_keys=True,
        )
    )


if __name__ == "__main__":
    main()

"""Throughput of the progress parse pipeline on a generated 2-million-line build log, beside wc -l.

The log is what the supervisor records for a Nix build with `-L --log-format internal-json`
mixed with a plain build's output: `@nix` JSON lines (builder log lines carrying ninja's
`[f/t]` status and compiler output, phases, progress and activity events) and plain lines
(ninja status lines, warnings, cmake chatter). Its mix is printed with the results.

The parse runs in a child process so that its peak RSS (from wait4) is its own, not the
generator's. Targets: at least 500k lines/s and peak RSS under 100 MB; plain lines alone
above 1M lines/s.

Store hook: the supervisor's SQLite history is not built yet. `--sink module:function` passes
every line the tracker shows to `function(line)` inside the timed loop, so the history's writer
can be measured here once it exists (the "store" half of the issue's benchmark).

    python benchmarks/log_pipeline.py [--lines 2000000] [--keep DIR] [--sink module:function]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.progress import ProgressTracker

SOURCES = [
    "onnxruntime/core/providers/cuda/nn/conv.cc",
    "onnxruntime/core/providers/cuda/math/gemm.cc",
    "onnxruntime/contrib_ops/cuda/bert/attention.cc",
    "onnxruntime/core/framework/allocation_planner.cc",
    "onnxruntime/core/graph/graph.cc",
    "onnxruntime/contrib_ops/cuda/bert/flash_attention/flash_fwd_hdim128_fp16_sm80.cu",
]
WARNINGS = [
    "{src}:{line}:12: warning: unused variable 'status' [-Wunused-variable]",
    "  {line} |   auto status = ComputeInternal(context);",
    "      |        ^~~~~~",
    "In file included from {src}:4:",
    "-- Looking for pthread_create in pthreads - not found",
    "nvcc warning : The 'compute_35' architecture is deprecated \"quoted\" \u00e9",
]


def _json_line(value: dict[str, object]) -> str:
    # Nix's own encoding: compact, keys sorted (nlohmann::json's std::map order).
    return "@nix " + json.dumps(value, separators=(",", ":"), sort_keys=True) + "\n"


def generate(path: Path, lines: int, seed: int = 42) -> dict[str, int]:
    """Write the mixed log; returns how many lines of each sort it holds."""
    rng = random.Random(seed)
    counts = {"nix_build_log_line": 0, "nix_other_event": 0, "plain": 0}
    total_edges = 9000
    edge = 0
    activity = 10**14
    drv = 0
    with path.open("w", encoding="utf-8") as out:
        written = 0
        while written < lines:
            if written % 50_000 == 0:
                drv += 1
                activity += 1
                name = f"/nix/store/{'a' * 31}{drv % 10}-onnxruntime-part-{drv}.drv"
                out.write(
                    _json_line(
                        {
                            "action": "start",
                            "fields": [name, "", 1, 1],
                            "id": activity,
                            "level": 3,
                            "parent": 0,
                            "text": f"building '{name}'",
                            "type": 105,
                        }
                    )
                )
                out.write(
                    _json_line(
                        {"action": "result", "fields": ["buildPhase"], "id": activity, "type": 104}
                    )
                )
                counts["nix_other_event"] += 2
                written += 2
                continue
            roll = rng.random()
            source = rng.choice(SOURCES)
            if roll < 0.22:
                edge = edge % total_edges + 1
                text = f"[{edge}/{total_edges}] Building CXX object {source}.o"
            else:
                text = rng.choice(WARNINGS).format(src=source, line=rng.randint(1, 999))
            if roll < 0.70:
                out.write(
                    _json_line({"action": "result", "fields": [text], "id": activity, "type": 101})
                )
                counts["nix_build_log_line"] += 1
            elif roll < 0.75:
                done = rng.randint(0, 40)
                out.write(
                    _json_line(
                        {"action": "result", "fields": [done, 40, 1, 0], "id": 7, "type": 105}
                    )
                )
                counts["nix_other_event"] += 1
            else:
                out.write(text + "\n")
                counts["plain"] += 1
            written += 1
    return counts


def generate_plain(path: Path, lines: int, seed: int = 7) -> None:
    """Plain lines only: a non-Nix build's log (ninja status lines and compiler output)."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for index in range(lines):
            source = rng.choice(SOURCES)
            if index % 5 == 0:
                out.write(f"[{index % 9000 + 1}/9000] Building CXX object {source}.o\n")
            else:
                out.write(rng.choice(WARNINGS).format(src=source, line=index % 999) + "\n")


def pipeline(path: Path, sink: Callable[[str], object] | None = None) -> dict[str, object]:
    """Read the log as the supervisor would and fold every line into a tracker."""
    tracker = ProgressTracker()
    feed = tracker.feed
    started = time.perf_counter()
    cpu = time.process_time()
    with path.open(encoding="utf-8", errors="replace") as log:
        if sink is None:
            for line in log:
                feed(line)
        else:
            for line in log:
                shown = feed(line)
                if shown is not None:
                    sink(shown)
    seconds = time.perf_counter() - started
    progress = tracker.snapshot()
    return {
        "lines": progress.lines,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(time.process_time() - cpu, 3),
        "lines_per_second": round(progress.lines / seconds),
        "final_step": None if progress.step is None else [progress.step.done, progress.step.total],
    }


def _load_sink(spec: str | None) -> Callable[[str], object] | None:
    if not spec:
        return None
    module, _, function = spec.partition(":")
    return getattr(importlib.import_module(module), function)


def _child(path: Path, sink: str | None) -> dict[str, object]:
    """Run the pipeline in a child process; adds its peak RSS from wait4."""
    argv = [sys.executable, __file__, "--parse", str(path)]
    if sink:
        argv += ["--sink", sink]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    output = child.stdout.read()
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"the parse child failed with {child.returncode}")
    result = json.loads(output)
    result["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)  # Linux reports KiB
    return result


def wc_lines(path: Path) -> dict[str, object]:
    """`wc -l` on the same file: the baseline of both log benchmarks."""
    started = time.perf_counter()
    child = subprocess.Popen(["wc", "-l", str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    output = child.stdout.read()
    _pid, _status, usage = os.wait4(child.pid, 0)
    child.returncode = 0
    seconds = time.perf_counter() - started
    lines = int(output.split()[0])
    return {
        "lines": lines,
        "seconds": round(seconds, 3),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
        "lines_per_second": round(lines / seconds),
    }


def _best(measure: Callable[[], dict[str, object]], runs: int) -> dict[str, object]:
    """The fastest of `runs` measurements (others on the machine only ever slow a run down),
    with every run's lines/s beside it."""
    results = [measure() for _ in range(max(1, runs))]
    best = min(results, key=lambda result: float(result["seconds"]))
    return {**best, "runs_lines_per_second": [result["lines_per_second"] for result in results]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--keep", metavar="DIR", help="write the logs here and keep them")
    parser.add_argument("--sink", metavar="MODULE:FUNCTION", help="the store hook, see above")
    parser.add_argument("--runs", type=int, default=3, help="report the best of this many")
    parser.add_argument("--parse", metavar="FILE", help=argparse.SUPPRESS)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 20,000 lines, one run (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.lines, args.runs = 20_000, 1
    if args.parse:
        print(json.dumps(pipeline(Path(args.parse), _load_sink(args.sink))))
        return 0

    directory = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="log-pipeline-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        mixed, plain = directory / "build.log", directory / "plain.log"
        mix = generate(mixed, args.lines)
        generate_plain(plain, args.lines // 2)
        wc_lines(mixed)  # warm the page cache for both readers alike
        wc = _best(lambda: wc_lines(mixed), args.runs)
        parse = _best(lambda: _child(mixed, args.sink), args.runs)
        plain_parse = _best(lambda: _child(plain, None), args.runs)
        report = {
            "benchmark": "log_pipeline",
            "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
            "log": {
                "lines": args.lines,
                "megabytes": round(mixed.stat().st_size / 2**20, 1),
                "mix": mix,
            },
            "parse": parse,
            "wc_l": wc,
            "parse_vs_wc_l_time": round(
                float(parse["seconds"]) / max(float(wc["seconds"]), 1e-6), 1
            ),
            "plain_lines_only": {"lines": args.lines // 2, **plain_parse},
            "store": "not measured yet: the SQLite history plugs in through --sink",
            "targets": {
                "at_least_500k_lines_per_second": int(parse["lines_per_second"]) >= 500_000,
                "peak_rss_under_100_mb": float(parse["peak_rss_mb"]) < 100,
                "plain_lines_over_1m_per_second": int(plain_parse["lines_per_second"]) >= 1_000_000,
            },
        }
        print(json.dumps(report, indent=2))
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

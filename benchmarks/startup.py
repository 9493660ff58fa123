"""Start-up time of `workbench --version` (target: under 150 ms), beside bare `python -c pass`.

Both are measured in the same run, as fresh processes, so the interpreter's own start-up is the
baseline. Prints JSON. Run: python benchmarks/startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_MS = 150.0


def timed_runs(argv: list[str], runs: int) -> list[float]:
    subprocess.run(argv, capture_output=True, check=True)  # warm the page cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return times


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_ms": round(statistics.median(ordered), 1),
        "p90_ms": round(ordered[int(len(ordered) * 0.9) - 1], 1),
        "min_ms": round(ordered[0], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    script = Path(sys.executable).parent / "workbench"
    command = [str(script)] if script.exists() else [shutil.which("workbench") or "workbench"]
    baseline = timed_runs([sys.executable, "-c", "pass"], args.runs)
    version = timed_runs([*command, "--version"], args.runs)
    variants = timed_runs([*command, "variants", "--names"], max(5, args.runs // 3))
    result = {
        "benchmark": "startup",
        "runs": args.runs,
        "python_c_pass": summary(baseline),
        "workbench_version": summary(version),
        "workbench_variants_names": summary(variants),
        "version_over_bare_python_ms": round(
            statistics.median(version) - statistics.median(baseline), 1
        ),
        "target_ms": TARGET_MS,
        "meets_target": statistics.median(version) < TARGET_MS,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

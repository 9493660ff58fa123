"""The supervisor's whole log pipeline on a 2-million-line recorded log, beside `wc -l`.

The "store" half of the log benchmark. The log is not stored line by line in SQLite: it lives in
the build's log file, written as it comes, and the history gets state, progress and one sample
a second (a few small transactions a second, whatever the log's rate). So what is measured is
the real supervisor process (`python -m workbench.supervision.supervisor`) supervising
`cat LOG` as the build: read from the pipe, write the log file, split and parse every line
with the progress tracker, sample the processes at 1 Hz, update the SQLite history (WAL).

Logs: benchmarks/log_pipeline.py's generator (a Nix internal-json build mixed with plain ninja
and compiler lines) and a plain-only log. Checked after each run: the log file is byte for
byte the input, and the tracker counted as many lines as `wc -l`. Peak RSS is the
supervisor's, from wait4. Targets: at least 500k lines/s and peak RSS under 100 MB.

    python benchmarks/history_store.py [--lines 2000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# the other half's recorded-log generator and its `wc -l` baseline
from log_pipeline import generate, generate_plain, wc_lines

from workbench.history.records import NewBuild
from workbench.history.store import History
from workbench.supervision.control import supervisor_argv

ROOT = Path(__file__).resolve().parent.parent


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def supervise(log: Path, state: Path, lines: int) -> dict[str, object]:
    """Run the real supervisor with `cat LOG` as the build; its figures and checks."""
    with History(state) as history:
        record = history.create(
            NewBuild(
                name="history-store-benchmark",
                backend="run",
                argv=("cat", str(log)),
                cwd=str(log.parent),
                checkout=str(log.parent),
                settings={},
                eta_key="benchmark",
                nix=False,
            )
        )
    argv = supervisor_argv(state, record.id)
    started = time.perf_counter()
    with open(state / "supervisor.log", "wb") as output:
        child = subprocess.Popen(argv, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if child.returncode != 0:
        raise RuntimeError((state / "supervisor.log").read_text())
    with History(state) as history:
        done = history.get(record.id)
        samples = len(history.samples(record.id))
    seconds = done.duration_s or wall
    copy = Path(done.log_path)
    connection = sqlite3.connect(state / "history.sqlite3")
    journal = connection.execute("PRAGMA journal_mode").fetchone()[0]
    connection.close()
    return {
        "state": done.state,
        "lines_counted": done.lines,
        "seconds": round(seconds, 3),
        "lines_per_second": round(lines / seconds),
        "process_wall_seconds": round(wall, 3),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # Linux reports KiB
        "sqlite_samples_written": samples,
        "sqlite_journal_mode": journal,
        "log_identical": copy.stat().st_size == log.stat().st_size
        and _digest(copy) == _digest(log),
        "final_step": (done.progress.get("step") or {}).get("done"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--keep", metavar="DIR", help="write the logs and state here, keep them")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 20,000 lines (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.lines = 20_000
    directory = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="history-store-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        mixed, plain = directory / "nix-build.log", directory / "plain.log"
        mix = generate(mixed, args.lines)
        generate_plain(plain, args.lines)
        runs: dict[str, object] = {}
        for label, log in (("nix_internal_json_mixed", mixed), ("plain", plain)):
            wc_lines(log)  # warm the page cache for both readers alike
            wc = wc_lines(log)
            result = supervise(log, directory / f"state-{label}", int(wc["lines"]))
            result["lines_match_wc_l"] = result["lines_counted"] == wc["lines"]
            runs[label] = {
                "megabytes": round(log.stat().st_size / 2**20, 1),
                "supervisor": result,
                "wc_l": wc,
                "supervisor_vs_wc_l_time": round(
                    float(result["seconds"]) / max(float(wc["seconds"]), 1e-6), 1
                ),
            }
        worst = min(
            int(run["supervisor"]["lines_per_second"])  # type: ignore[index]
            for run in runs.values()
        )
        peak = max(float(run["supervisor"]["peak_rss_mb"]) for run in runs.values())  # type: ignore[index]
        report = {
            "benchmark": "history_store",
            "what": "the supervisor process pumping `cat LOG` through pipe, log file, tracker "
            "and SQLite history (1 Hz samples)",
            "lines": args.lines,
            "mix": mix,
            "cpus": len(os.sched_getaffinity(0)),
            "runs": runs,
            "targets": {
                "at_least_500k_lines_per_second": worst >= 500_000,
                "peak_rss_under_100_mb": peak < 100,
                "log_identical": all(
                    run["supervisor"]["log_identical"]  # type: ignore[index]
                    for run in runs.values()
                ),
            },
        }
        print(json.dumps(report, indent=2))
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

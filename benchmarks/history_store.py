"""The supervisor's whole log pipeline on a 2-million-line recorded log, beside `wc -l`.

The "store" half of the log benchmark. The log is not stored line by line in SQLite: it lives in
the build's log file, written as it comes, and the history gets state, progress and one sample
a second (a few small transactions a second, whatever the log's rate). So what is measured is
the real supervisor process (`python -m workbench.supervision.supervisor`) supervising
`cat LOG` as the build: read from the pipe, write the log file, split and parse every line
with the progress tracker, keep the log's readable form beside it (`build.readable` and its
map, `logs.readable_map`), sample the processes at 1 Hz, update the SQLite history (WAL).

Logs: benchmarks/log_pipeline.py's generator (a Nix internal-json build mixed with plain ninja
and compiler lines) and a plain-only log. Checked after each run: the log file is byte for
byte the input, and the tracker counted as many lines as `wc -l`. Peak RSS is the
supervisor's, from wait4. Targets: at least 1M lines/s with the readable map on, the map
costing at most 1.2x the pump without it (issue 23 item 4), peak RSS under 100 MB.

The map off is the same supervisor with the readable form's writer left out (its `_readable`
replaced, as a supervisor that adopts a build runs). `--baseline DIR` runs another checkout's
supervisor (a `git worktree` of an older commit) alike, interleaved with this one's, so both
are measured in the same run; what `workbench logs` prints from its readable form and map (the
map's own bytes follow the pipe's reads: where a record falls moves with the load), whether the
map covers the whole log, and its progress must come out identical.
Figures are medians of `--repeat` runs, with their spread; against a baseline also the ratios of
each round's two runs (they ran one after the other, which tree first alternating by round), whose
median a host that drifts moves less. `--pin` runs the supervisor on one CPU and the build on
another core's (a host whose scheduler moves them reads the same code 1.5x apart from run to run).

`--instructions` counts instead, with valgrind (cachegrind, no cache simulation): the
instructions a line costs the pump itself (`LogPipeline.feed` in reads of the supervisor's size,
`pipeline.READ_SIZE`, the log and the readable form written to /dev/null), map on and off, for
each checkout: a count that the load of a shared machine does not move, where its timings do.
The process's start is taken out (two runs over different lengths of the log, the difference
divided by the lines between them). It leaves out what the kernel does (the writes) and what
the supervisor does around the pump (its loop, sampling, SQLite).

    python benchmarks/history_store.py [--lines 2000000] [--repeat 3] [--baseline DIR]
        [--map on|off|both] [--log mixed|plain|both] [--pin] [--keep DIR] [--instructions]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# the other half's recorded-log generator and its `wc -l` baseline
from log_pipeline import generate, generate_plain, wc_lines

from workbench.history.records import NewBuild
from workbench.history.store import History
from workbench.logs.readable_map import copy_readable, read_stretches, readable_paths

ROOT = Path(__file__).resolve().parent.parent
# The supervisor with the readable form's writer left out: the pump without the map.
WITHOUT_MAP = (
    "import sys\n"
    "import workbench.supervision.supervisor as supervisor\n"
    "supervisor._readable = lambda record, log_size: None\n"
    "supervisor.main_and_exit(sys.argv[1:])\n"
)
# What of the history's progress must be the same whoever wrote it (not times, not samples).
SAME_PROGRESS = ("lines", "step", "planned", "done", "failed", "last_line", "first_error", "nix")


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# taskset's work where there is none: `python -c PIN_AND_EXEC CPU PROGRAM ARGS...`
PIN_AND_EXEC = (
    "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])}); "
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


def pinned_cpus() -> tuple[int, int] | None:
    """(the supervisor's CPU, the build's): two CPUs this process may run on, not threads of one
    core (sysfs's thread_siblings_list), the last ones; None where there are not two."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None
    supervisor = allowed[-1]
    siblings = {supervisor}
    topology = Path(f"/sys/devices/system/cpu/cpu{supervisor}/topology/thread_siblings_list")
    try:
        for part in topology.read_text().strip().split(","):
            first, _, last = part.partition("-")
            siblings.update(range(int(first), int(last or first) + 1))
    except (OSError, ValueError):
        pass
    others = [cpu for cpu in allowed if cpu not in siblings] or allowed[:-1]
    return supervisor, others[-1]


def supervise(
    log: Path,
    state: Path,
    lines: int,
    checkout: Path = ROOT,
    readable_map: bool = True,
    cpus: tuple[int, int] | None = None,
) -> dict[str, object]:
    """Run `checkout`'s supervisor with `cat LOG` as the build; its figures and checks.

    `cpus`: (the supervisor's CPU, the build's): each pinned to its own (`taskset` runs the
    build), so that where the host's scheduler puts them moves no figure."""
    build: tuple[str, ...] = ("cat", str(log))
    if cpus is not None and shutil.which("taskset"):
        build = ("taskset", "--cpu-list", str(cpus[1]), *build)
    elif cpus is not None:  # (no util-linux: the same by Python, its start in the build's time)
        build = (sys.executable, "-c", PIN_AND_EXEC, str(cpus[1]), *build)
    with History(state) as history:
        record = history.create(
            NewBuild(
                name="history-store-benchmark",
                backend="run",
                argv=build,
                cwd=str(log.parent),
                checkout=str(log.parent),
                settings={},
                eta_key="benchmark",
                nix=False,
            )
        )
    code = ["-m", "workbench.supervision.supervisor"] if readable_map else ["-c", WITHOUT_MAP]
    argv = [sys.executable, *code, "--state-dir", str(state), "--build-id", str(record.id)]
    environment = dict(os.environ, PYTHONPATH=str(checkout))
    started = time.perf_counter()
    with open(state / "supervisor.log", "wb") as output:
        child = subprocess.Popen(
            argv,
            cwd=checkout,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
            preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, {cpus[0]}),
        )
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
    readable_path, map_path = readable_paths(copy)
    return {
        "state": done.state,
        "lines_counted": done.lines,
        "seconds": round(seconds, 3),
        "lines_per_second": round(lines / seconds),
        "process_wall_seconds": round(wall, 3),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
        "user_seconds": round(usage.ru_utime, 3),
        "system_seconds": round(usage.ru_stime, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # Linux reports KiB
        # pages the kernel mapped in on first touch (each costs system time: a heap that glibc
        # gives back and takes again between reads faults its pages in every time)
        "minor_page_faults": usage.ru_minflt,
        "sqlite_samples_written": samples,
        "sqlite_journal_mode": journal,
        "log_identical": copy.stat().st_size == log.stat().st_size
        and _digest(copy) == _digest(log),
        "final_step": (done.progress.get("step") or {}).get("done"),
        # What must not depend on who wrote it (compared between checkouts, then dropped).
        "_outputs": {
            "readable_form": _readable_form(copy, state) if readable_map else None,
            "map_covers_log": _map_covers(copy, readable_path, map_path) if readable_map else None,
            "progress": {key: done.progress.get(key) for key in SAME_PROGRESS},
        },
    }


# The pump alone, in a process of its own: LogPipeline.feed over the log's first LIMIT bytes
# (whole lines) in reads of the supervisor's size (pipeline.READ_SIZE, 256 KiB: what it asks
# of a pipe that holds 1 MiB, and gets while the build writes faster than it reads), the
# readable map on or off, everything written to /dev/null.
PUMP_ALONE = """
import os, sys
from workbench.logs.readable_map import ReadableMapWriter
from workbench.progress import ProgressTracker
from workbench.supervision.pipeline import READ_SIZE, LogPipeline
path, readable_map, limit = sys.argv[1], sys.argv[2] == "on", int(sys.argv[3])
with open(path, "rb") as handle:
    data = handle.read(limit)
data = data[: data.rfind(b"\\n") + 1]
fds = [os.open(os.devnull, os.O_WRONLY) for _ in range(3)]
writer = ReadableMapWriter(fds[1], fds[2], 0) if readable_map else None
pipeline = LogPipeline(fds[0], ProgressTracker(), readable=writer)
for start in range(0, len(data), READ_SIZE):
    pipeline.feed(data[start : start + READ_SIZE])
pipeline.close()
"""


def _instructions(log: Path, limit: int, checkout: Path, readable_map: bool) -> int:
    """Instructions (user space) of the pump alone over the log's first `limit` bytes."""
    argv = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        "-c",
        PUMP_ALONE,
        str(log),
        "on" if readable_map else "off",
        str(limit),
    ]
    environment = dict(os.environ, PYTHONPATH=str(checkout))
    done = subprocess.run(argv, cwd=checkout, env=environment, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    for line in done.stderr.splitlines():
        if "I" in line and "refs:" in line:
            return int(line.split("refs:")[1].replace(",", "").strip())
    raise RuntimeError(f"no instruction count in valgrind's output: {done.stderr[-2000:]}")


def _lines_within(log: Path, limit: int) -> int:
    with log.open("rb") as handle:
        data = handle.read(limit)
    return data[: data.rfind(b"\n") + 1].count(b"\n")


def instructions_report(
    logs: dict[str, Path], checkouts: dict[str, Path], maps: tuple[bool, ...]
) -> dict[str, dict[str, object]]:
    """Instructions a line for each log, checkout and map setting (`--instructions`)."""
    runs: dict[str, dict[str, object]] = {}
    for label, log in logs.items():
        size = log.stat().st_size
        short, long = size // 5, size  # the first fifth, then the whole log
        lines = _lines_within(log, long) - _lines_within(log, short)
        entry: dict[str, object] = {"lines_between": lines}
        for name, checkout in checkouts.items():
            for readable_map in maps:
                counts = [
                    _instructions(log, limit, checkout, readable_map) for limit in (short, long)
                ]
                key = f"{name}_map_{'on' if readable_map else 'off'}"
                entry[key] = round((counts[1] - counts[0]) / lines)
            if len(maps) == 2:
                on, off = entry[f"{name}_map_on"], entry[f"{name}_map_off"]
                entry[f"{name}_map_cost"] = round(on / off, 3)  # type: ignore[operator]
        if "baseline" in checkouts:
            for readable_map in maps:
                setting = f"map_{'on' if readable_map else 'off'}"
                this, base = entry[f"this_{setting}"], entry[f"baseline_{setting}"]
                entry[f"this_over_baseline_{setting}"] = round(this / base, 3)  # type: ignore[operator]
        runs[label] = entry
    return runs


def _readable_form(log: Path, state: Path) -> str:
    """The digest of what `workbench logs` prints of the log (mapped stretches copied, the rest
    rendered). Not the map's bytes: where its records fall follows the pipe's reads, which the
    load moves from run to run."""
    out = state / "readable-form"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        copy_readable(log, fd)
    finally:
        os.close(fd)
    digest = _digest(out)
    out.unlink()
    return digest


def _map_covers(log: Path, readable_path: Path, map_path: Path) -> bool:
    """Whether the map's trusted records cover the whole log (so the readable form above was
    copied, not rendered when read)."""
    if not (readable_path.exists() and map_path.exists()):
        return False
    size = log.stat().st_size
    stretches = read_stretches(map_path, size, readable_path.stat().st_size)
    return bool(stretches) and stretches[-1].raw_end == size


def _median(runs: list[dict[str, object]], key: str) -> float:
    return statistics.median(float(run[key]) for run in runs)  # type: ignore[arg-type]


def _summary(runs: list[dict[str, object]], lines: int) -> dict[str, object]:
    """Medians of the runs of one checkout, log and map setting, and every run's figures."""
    seconds = _median(runs, "seconds")
    return {
        "lines_per_second": round(lines / seconds),
        "seconds": round(seconds, 3),
        "cpu_seconds": round(_median(runs, "cpu_seconds"), 3),
        "peak_rss_mb": max(float(run["peak_rss_mb"]) for run in runs),  # type: ignore[arg-type]
        "checks_passed": all(
            run["state"] == "succeeded" and run["log_identical"] and run["lines_counted"] == lines
            for run in runs
        ),
        "lines_per_second_spread": [
            round(lines / max(float(run["seconds"]) for run in runs)),  # type: ignore[arg-type]
            round(lines / min(float(run["seconds"]) for run in runs)),  # type: ignore[arg-type]
        ],
        "runs": [{k: v for k, v in run.items() if not k.startswith("_")} for run in runs],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each (medians)")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="another checkout (e.g. `git worktree add /tmp/base COMMIT`) run alike, interleaved",
    )
    parser.add_argument("--map", choices=("on", "off", "both"), default="both")
    parser.add_argument(
        "--log",
        choices=("mixed", "plain", "both"),
        default="both",
        help="which generated log (mixed: the Nix internal-json one)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="the supervisor on one CPU, the build (`cat`, by taskset) on another core's",
    )
    parser.add_argument("--keep", metavar="DIR", help="write the logs and state here, keep them")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count the pump's instructions a line with valgrind instead of timing the supervisor",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 20,000 lines, one run (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.lines, args.repeat = 20_000, 1
    checkouts = {"this": ROOT}
    if args.baseline:
        checkouts["baseline"] = Path(args.baseline).resolve()
        if not (checkouts["baseline"] / "workbench" / "supervision" / "supervisor.py").is_file():
            print(f"history_store.py: error: --baseline {args.baseline}: no checkout there")
            return 2
    maps = {"on": (True,), "off": (False,), "both": (True, False)}[args.map]
    directory = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="history-store-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        mixed, plain = directory / "nix-build.log", directory / "plain.log"
        logs = {"nix_internal_json_mixed": mixed, "plain": plain}
        if args.log != "both":
            logs = {label: log for label, log in logs.items() if label.endswith(args.log)}
        mix = generate(mixed, args.lines) if mixed in logs.values() else None
        if plain in logs.values():
            generate_plain(plain, args.lines)
        cpus = pinned_cpus() if args.pin else None
        if args.pin and cpus is None:
            print("history_store.py: error: --pin: fewer than two CPUs to run on")
            return 2
        wc: dict[str, dict[str, object]] = {}
        for label, log in logs.items():
            wc_lines(log)  # warm the page cache for both readers alike
            wc[label] = wc_lines(log)
        if args.instructions:
            report = {
                "benchmark": "history_store --instructions",
                "what": "instructions a line (valgrind cachegrind, user space) of LogPipeline.feed "
                "alone in reads of pipeline.READ_SIZE, the log and its readable form written to "
                "/dev/null: the difference between the log's first fifth and the whole log, over "
                "the lines between",
                "lines": args.lines,
                "mix": mix,
                "python": sys.version.split()[0],
                "checkouts": {name: str(path) for name, path in checkouts.items()},
                "runs": instructions_report(logs, checkouts, maps),
            }
            print(json.dumps(report, indent=2))
            return 0
        results: dict[tuple[str, str, bool], list[dict[str, object]]] = {}
        count = 0
        for _round in range(args.repeat):  # interleaved: a load that comes and goes hits all
            for label, log in logs.items():
                for readable_map in maps:
                    # which tree goes first alternates by round (a host that drifts hits both)
                    order = list(checkouts.items())[:: -1 if _round % 2 else 1]
                    for name, checkout in order:
                        count += 1
                        state = directory / f"state-{count}"
                        lines = int(wc[label]["lines"])  # type: ignore[call-overload]
                        run = supervise(log, state, lines, checkout, readable_map, cpus)
                        results.setdefault((name, label, readable_map), []).append(run)
                        if not args.keep:
                            shutil.rmtree(state, ignore_errors=True)
        runs: dict[str, dict[str, Any]] = {}
        identical = True
        for label, log in logs.items():
            lines = int(wc[label]["lines"])  # type: ignore[call-overload]
            entry: dict[str, object] = {
                "megabytes": round(log.stat().st_size / 2**20, 1),
                "wc_l": wc[label],
            }
            for name in checkouts:
                for readable_map in maps:
                    key = f"{name}_map_{'on' if readable_map else 'off'}"
                    entry[key] = _summary(results[(name, label, readable_map)], lines)
                if len(maps) == 2:
                    on = entry[f"{name}_map_on"]
                    off = entry[f"{name}_map_off"]
                    entry[f"{name}_map_cost"] = {
                        "cpu_on_over_off": round(on["cpu_seconds"] / off["cpu_seconds"], 2),  # type: ignore[index]
                        "seconds_on_over_off": round(on["seconds"] / off["seconds"], 2),  # type: ignore[index]
                    }
            if "baseline" in checkouts:
                for readable_map in maps:
                    setting = f"map_{'on' if readable_map else 'off'}"
                    this, base = entry[f"this_{setting}"], entry[f"baseline_{setting}"]
                    # each round's two runs ran one after the other: their ratios, round by
                    # round, move less with a host whose speed drifts than the medians' ratio
                    paired = [
                        float(mine["seconds"]) / float(theirs["seconds"])  # type: ignore[arg-type]
                        for mine, theirs in zip(
                            results[("this", label, readable_map)],
                            results[("baseline", label, readable_map)],
                            strict=True,
                        )
                    ]
                    entry[f"this_over_baseline_{setting}"] = {
                        "lines_per_second": round(
                            this["lines_per_second"] / base["lines_per_second"],  # type: ignore[index]
                            2,
                        ),
                        "cpu_seconds": round(this["cpu_seconds"] / base["cpu_seconds"], 2),  # type: ignore[index]
                        "lines_per_second_round_by_round": [
                            round(1 / ratio, 2) for ratio in paired
                        ],
                        "lines_per_second_median_of_rounds": round(
                            1 / statistics.median(paired), 2
                        ),
                    }
                    outputs = [
                        run["_outputs"]
                        for name in checkouts
                        for run in results[(name, label, readable_map)]
                    ]
                    same = all(output == outputs[0] for output in outputs)
                    entry[f"outputs_identical_to_baseline_{setting}"] = same
                    identical = identical and same
            runs[label] = entry
        settings = [f"map_{'on' if readable_map else 'off'}" for readable_map in maps]
        summaries = [
            (name, entry[f"{name}_{setting}"])
            for entry in runs.values()
            for name in checkouts
            for setting in settings
        ]
        targets: dict[str, object] = {
            "checks_passed": all(summary["checks_passed"] for _, summary in summaries),  # type: ignore[index]
            "peak_rss_under_100_mb": all(
                float(summary["peak_rss_mb"]) < 100  # type: ignore[index]
                for name, summary in summaries
                if name == "this"
            ),
        }
        if True in maps:
            targets["at_least_1m_lines_per_second_map_on"] = {
                label: int(entry["this_map_on"]["lines_per_second"]) >= 1_000_000  # type: ignore[index]
                for label, entry in runs.items()
            }
        if len(maps) == 2:
            targets["map_at_most_1_2x_cpu_of_the_pump_without_it"] = all(
                entry["this_map_cost"]["cpu_on_over_off"] <= 1.2  # type: ignore[index]
                for entry in runs.values()
            )
        if "baseline" in checkouts:
            targets["outputs_identical_to_baseline"] = identical
        report = {
            "benchmark": "history_store",
            "what": "the supervisor process pumping `cat LOG` through pipe, log file, tracker, "
            "readable form and map (map on) and SQLite history (1 Hz samples); medians of "
            f"{args.repeat} interleaved runs",
            "lines": args.lines,
            "repeat": args.repeat,
            "mix": mix,
            "cpus": len(os.sched_getaffinity(0)),
            "pinned": None if cpus is None else {"supervisor": cpus[0], "build": cpus[1]},
            "load_average_after": os.getloadavg(),
            "checkouts": {name: str(path) for name, path in checkouts.items()},
            "runs": runs,
            "targets": targets,
        }
        print(json.dumps(report, indent=2))
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

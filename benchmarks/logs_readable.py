"""`workbench logs ID` (readable) against `workbench logs ID --raw` on a large log: time, peak RSS.

The issue's figures: on a 2 GB log the readable form took 12 min 30 s and 870 MB, `--raw` 19 s.
Target: readable within 2x of raw, in constant memory. Both run as the real CLI in a child
process with stdout to /dev/null (the terminal's speed is not what is measured); peak RSS is
what GNU time (`/usr/bin/time -f %M`) reports for the command alone (wait4's figure would include
the pages a forked child shares with this process). `cat` of the same file is printed beside
them for scale.

Two logs, both built by repeating log_pipeline.py's generated logs up to the size asked, and
written the way a user's log is: a build (`workbench run -- cat FILE`) whose output the real
supervisor pumps into its log, keeping the readable form beside it as it goes:
- plain: a non-Nix build (ninja status lines, compiler warnings, cmake chatter);
- nix: `nix build -L --log-format internal-json`, mostly `@nix` builder-line events, which the
  readable form decodes line by line.
`logs (no map)` is the same log with the map beside it removed: what the reader renders itself
(a log from before maps, or the tail of a running build). The pump's own time for the build is
printed too (`build through the pump`), for scale.

    python benchmarks/logs_readable.py [--megabytes 256] [--mix plain|nix|both] [--keep DIR]
        [--repetitions 5]     # each command timed 5 times in turn; medians and every run
    python benchmarks/logs_readable.py --megabytes 2048      # the issue's 2 GB
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.log_pipeline import generate, generate_plain
from workbench.history.store import History
from workbench.logs.readable_map import readable_paths

MB = 1 << 20
SAMPLE_LINES = 200_000


def _fill(sample: Path, target: Path, size: int) -> int:
    """`target` made of whole copies of `sample` until it is at least `size` bytes."""
    data = sample.read_bytes()
    written = 0
    with target.open("wb") as out:
        while written < size:
            out.write(data)
            written += len(data)
    return written


def _build(state: Path, name: str, source: Path, checkout: Path) -> tuple[int, Path, float]:
    """`workbench run --name NAME -- cat SOURCE`: the log as the supervisor writes it."""
    started = time.perf_counter()
    result = subprocess.run(
        [*_cli(state), "run", "--name", name, "--", "cat", str(source)],
        cwd=checkout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"the build failed ({result.returncode}): {result.stderr.decode()}")
    with History(state) as history:
        record = history.builds(limit=1)[0]
    return record.id, Path(record.log_path), elapsed


def _cli(state: Path) -> list[str]:
    return [sys.executable, "-m", "workbench", "--state-dir", str(state)]


def _measure(argv: list[str]) -> dict[str, float | None]:
    """Wall time and peak RSS of one command whose stdout goes to /dev/null."""
    gnu_time = shutil.which("time", path="/usr/bin")
    report = tempfile.NamedTemporaryFile(suffix=".rss")  # noqa: SIM115 - closed below
    wrapped = [gnu_time, "-f", "%M", "-o", report.name, *argv] if gnu_time else argv
    with open(os.devnull, "wb") as sink:
        started = time.perf_counter()
        result = subprocess.run(wrapped, stdout=sink, stderr=subprocess.PIPE, check=False)
        elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{argv} failed ({result.returncode}): {result.stderr.decode()}")
    with report:
        text = Path(report.name).read_text().strip()
    rss = round(int(text.splitlines()[-1]) / 1024, 1) if gnu_time and text else None
    return {"seconds": round(elapsed, 2), "peak_rss_mb": rss}


def _measure_alternating(commands: dict[str, list[str]], repetitions: int) -> dict[str, dict]:
    """Each command `repetitions` times, in turn (machine noise hits all alike): the median
    time, every run, and the highest peak RSS."""
    runs: dict[str, list[dict[str, float | None]]] = {name: [] for name in commands}
    names = list(commands)
    for repetition in range(repetitions):
        shift = repetition % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(_measure(commands[name]))
    summary = {}
    for name, measured in runs.items():
        seconds = sorted(float(run["seconds"] or 0.0) for run in measured)
        rss = [run["peak_rss_mb"] for run in measured if run["peak_rss_mb"] is not None]
        summary[name] = {
            "seconds": seconds[len(seconds) // 2],
            "runs_s": [run["seconds"] for run in measured],
            "peak_rss_mb": max(rss) if rss else None,
        }
    return summary


def run(
    megabytes: int, mixes: list[str], keep: Path | None, repetitions: int = 5
) -> dict[str, object]:
    """Generate each log, then time cat, `logs --raw` and `logs` on it (medians)."""
    work = keep or Path(tempfile.mkdtemp(prefix="wb-logs-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    state = work / "state"
    results: dict[str, object] = {"megabytes_asked": megabytes}
    try:
        for mix in mixes:
            sample = work / f"sample-{mix}.log"
            if mix == "plain":
                generate_plain(sample, SAMPLE_LINES)
            else:
                generate(sample, SAMPLE_LINES)
            source = work / f"source-{mix}.log"
            size = _fill(sample, source, megabytes * MB)
            sample.unlink()
            checkout = work / "checkout"
            checkout.mkdir(exist_ok=True)
            build_id, path, pumped = _build(state, mix, source, checkout)
            source.unlink()
            cli = [*_cli(state), "logs"]
            timed = _measure_alternating(
                {
                    "cat": ["cat", str(path)],
                    "raw": [*cli, str(build_id), "--raw"],
                    "readable": [*cli, str(build_id)],
                },
                repetitions,
            )
            cat, raw, readable = timed["cat"], timed["raw"], timed["readable"]
            ratio = readable["seconds"] / raw["seconds"] if raw["seconds"] else None
            _readable_path, map_path = readable_paths(path)
            map_path.rename(map_path.with_name("moved-aside"))
            unmapped = _measure([*cli, str(build_id)])
            results[mix] = {
                "log_mb": round(size / MB),
                "build through the pump": {"seconds": round(pumped, 2)},
                "cat (baseline)": cat,
                "logs --raw": raw,
                "logs (readable)": readable,
                "logs (no map)": unmapped,
                "readable / raw time": None if ratio is None else round(ratio, 2),
                "readable MB/s": round(size / MB / readable["seconds"], 1),
                "within 2x of raw": ratio is not None and ratio <= 2.0,
                "readable peak RSS under 100 MB": (readable["peak_rss_mb"] or 0) < 100,
            }
            for leftover in (path, _readable_path, map_path.with_name("moved-aside")):
                leftover.unlink(missing_ok=True)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=256, help="log size (default 256)")
    parser.add_argument("--mix", choices=("plain", "nix", "both"), default="both")
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    parser.add_argument(
        "--repetitions", type=int, default=5, help="timings of each command, in turn (default 5)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 1 MB logs, one timing each (checks the script)",
    )
    args = parser.parse_args()
    if args.quick:
        args.megabytes, args.repetitions = 1, 1
    mixes = ["plain", "nix"] if args.mix == "both" else [args.mix]
    print(json.dumps(run(args.megabytes, mixes, args.keep, args.repetitions), indent=2))


if __name__ == "__main__":
    main()

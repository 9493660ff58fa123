"""Issue 16, item 7: a memory-bound CUDA build on a GPU host, OOM at -j16, then "auto" fits.

On the host it runs on (as root, for the memory cgroup):

1. writes a CUDA project whose units each hold a large `__device__` table initialiser: nvcc's
   front ends (cudafe++, cicc) and the host compiler each parse it, so every unit takes a
   large, known amount of memory while it compiles;
2. calibrates: one unit built alone under `workbench run`, its peak RSS read from the history;
3. makes a memory cgroup (v2, else v1) limited to LIMIT_UNITS x that peak, and builds all units
   inside it with `-j JOBS` (16): more units at once than fit, so the OOM killer strikes; the
   supervisor's note is recorded;
4. asks `ninja_jobs = "auto"` (tuning.choose_jobs_for, inside the cgroup) for the jobs that fit,
   from what the killed run measured and the cgroup's limit;
5. builds again inside the cgroup with those jobs, which must complete.

Writes one JSON record (the machine, each step's command, outcome, note and figures) to
OUT_DIR/NAME.json after every step. `tests/host/test_gpu_memory_bound_record.py` replays it.

    python benchmarks/gpu_memory_bound.py [--name h100-x1-memory-bound] [--out-dir DIR]
        [--units 8] [--elements 1000000] [--jobs 16]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

LIMIT_UNITS = 3.0  # the cgroup's limit: this many times one unit's measured peak


def _project(root: Path, units: int, elements: int) -> Path:
    source = root / "src"
    source.mkdir(parents=True)
    names = []
    for unit in range(units):
        numbers = ",".join(str((i * 7919 + unit) % 1000003) for i in range(elements))
        (source / f"table_{unit}.cu").write_text(
            f"__device__ long table_{unit}[] = {{{numbers}}};\n"
            f"__global__ void read_{unit}(long *out, int i) {{ *out = table_{unit}[i]; }}\n"
        )
        names.append(f"table_{unit}.cu")
    (source / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(memorybound CUDA)\n"
        "set(CMAKE_CUDA_ARCHITECTURES 90)\n"
        f"add_library(tables STATIC {' '.join(names)})\n"
    )
    build = root / "build"
    _check(["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja"])
    return build


def _clean(build: Path) -> Path:
    """The configured build directory with nothing built (`ninja -t clean`)."""
    _check(["ninja", "-C", str(build), "-t", "clean"])
    return build


def _check(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if result.returncode != 0:
        raise SystemExit(f"{argv} failed: {result.stdout}{result.stderr}")
    return result


def _memory_cgroup(limit: int) -> tuple[Path, int]:
    """A fresh memory cgroup limited to `limit` bytes: (its directory, cgroup version)."""
    name = f"workbench-memory-bound-{uuid.uuid4().hex[:8]}"
    unified = Path("/sys/fs/cgroup")
    if (unified / "cgroup.controllers").exists():
        controllers = (unified / "cgroup.subtree_control").read_text().split()
        if "memory" not in controllers:
            (unified / "cgroup.subtree_control").write_text("+memory")
        group = unified / name
        group.mkdir()
        (group / "memory.max").write_text(str(limit))
        swap = group / "memory.swap.max"
        if swap.exists():
            swap.write_text("0")  # no swapping instead of the OOM kill
        return group, 2
    group = unified / "memory" / name
    group.mkdir()
    (group / "memory.limit_in_bytes").write_text(str(limit))
    return group, 1


def _in(group: Path):
    def enter() -> None:
        (group / "cgroup.procs").write_text(str(os.getpid()))

    return enter


def _workbench(state: Path, *args: str, group: Path | None = None) -> dict[str, Any]:
    argv = [sys.executable, "-m", "workbench", "--state-dir", str(state), *args]
    started = time.monotonic()
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=None if group is None else _in(group),
        timeout=900,
    )
    return {
        "argv": argv[3:],
        "exit": result.returncode,
        "seconds": round(time.monotonic() - started, 2),
        "stderr_tail": result.stderr[-3000:],
    }


def _latest(state: Path) -> dict[str, Any]:
    """The build just run, as the history keeps it: outcome, note, what was measured."""
    from workbench.history.store import History

    with History(state) as history:
        record = history.builds(limit=1)[0]
        measured = history.measured(record.id)
    row: dict[str, Any] = {
        "id": record.id,
        "state": record.state,
        "note": record.note,
        "exit_status": record.exit_status,
        "signal": record.signal,
        "duration_s": record.duration_s,
    }
    if measured is not None:
        row["peak_rss"] = measured.peak_rss
        row["most_jobs"] = measured.most_jobs
        row["peak_job_rss"] = measured.peak_job_rss
        row["slowest"] = [
            {"file": job.file, "tool": job.tool, "seconds": job.seconds, "peak_rss": job.peak_rss}
            for job in measured.slowest
        ]
    return row


def _job_peaks(state: Path, name: str) -> list[dict[str, Any]]:
    """The largest CUDA (nvcc) and host-compiler job of each build called `name`."""
    from workbench.history.store import History

    with History(state) as history:
        return [
            {
                "build": p.build_id,
                "kind": kind,
                "file": p.file,
                "tool": p.tool,
                "peak_rss": p.peak_rss,
            }
            for kind in ("cuda", "compiler")
            for p in history.job_memory_peaks(name, kind)
        ]


def _build_in(group: Path, state: Path, build: Path, jobs: int) -> dict[str, Any]:
    """`workbench run --name memory-bound -- ninja -C BUILD -jJOBS` inside the memory cgroup,
    with the build as the history keeps it."""
    step = _workbench(
        state,
        "run",
        "--name",
        "memory-bound",
        "--",
        "ninja",
        "-C",
        str(build),
        f"-j{jobs}",
        group=group,
    )
    step["build"] = _latest(state)
    return step


def _machine() -> dict[str, Any]:
    def out(argv: list[str]) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    return {
        "python": platform.python_version(),
        "kernel": platform.release(),
        "nvidia_smi": out(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv"]),
        "nvcc": out(["nvcc", "--version"]).splitlines()[-1:],
        "cmake": out(["cmake", "--version"]).splitlines()[:1],
        "ninja": out(["ninja", "--version"]),
        "cores": os.cpu_count(),
        "memory_total": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="h100-x1-memory-bound")
    parser.add_argument("--out-dir", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--units", type=int, default=8)
    parser.add_argument("--elements", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="seconds, not minutes: 3 small units at -j3, one CMake configure for the three "
        "builds (calibration: the first unit's object; checks the script; whether -j3 meets the "
        "OOM killer depends on the peak the calibration sampled)",
    )
    args = parser.parse_args()
    if args.quick:
        args.units, args.elements, args.jobs = 3, 2000, 3
    args.out_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "machine": _machine(),
        "units": args.units,
        "elements": args.elements,
    }
    out = args.out_dir / f"{args.name}.json"

    def save() -> None:
        out.write_text(json.dumps(record, indent=2, default=str))

    save()
    work = Path(tempfile.mkdtemp(prefix="wb-memory-bound-"))
    state = work / "state"
    group: Path | None = None
    try:
        if args.quick:  # CMake's CUDA configure is most of a quick run: one for all three
            shared = _project(work / "all", args.units, args.elements)
            target = ["CMakeFiles/tables.dir/table_0.cu.o"]
            one = shared
        else:
            shared, target = None, []
            one = _project(work / "one", 1, args.elements)
        step = _workbench(
            state, "run", "--name", "memory-bound-one", "--", "ninja", "-C", str(one), *target
        )
        step["build"] = _latest(state)
        step["job_peaks"] = _job_peaks(state, "memory-bound-one")
        record["calibration"] = step
        save()
        peaks = [p["peak_rss"] for p in step["job_peaks"] if p["peak_rss"]]
        if step["exit"] != 0 or not peaks:
            raise SystemExit("calibration failed: " + step["stderr_tail"])
        unit_peak = max(peaks)
        limit = int(unit_peak * LIMIT_UNITS)
        group, version = _memory_cgroup(limit)
        record["cgroup"] = {"directory": str(group), "version": version, "limit": limit}
        record["unit_peak_rss"] = unit_peak
        save()

        build = _clean(shared) if shared else _project(work / "all", args.units, args.elements)
        record["oom_run"] = _build_in(group, state, build, args.jobs)
        save()

        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys, json; from pathlib import Path\n"
                "from workbench.configs.matrix import load_matrix\n"
                "from workbench.configs.settings import load_settings\n"
                "from workbench.history.store import History\n"
                "from workbench.planning.tuning import choose_jobs_for\n"
                "configs = Path(sys.argv[1])\n"
                "settings = load_settings(configs, load_matrix(configs))\n"
                "choice = choose_jobs_for(History(Path(sys.argv[2])), settings, 'memory-bound',"
                " True, None)\n"
                "print(json.dumps({'jobs': choice.jobs, 'per_job_gb': choice.job_memory.gb,"
                " 'source': choice.job_memory.source, 'ninja_jobs': str(settings.ninja_jobs),"
                " 'reason': str(getattr(choice, 'reason', ''))}))",
                str(REPO / "configs"),
                str(state),
            ],
            capture_output=True,
            text=True,
            preexec_fn=_in(group),
            check=False,
        )
        record["auto"] = {"exit": probe.returncode, "stderr_tail": probe.stderr[-2000:]}
        if probe.returncode == 0:
            record["auto"].update(json.loads(probe.stdout.strip().splitlines()[-1]))
        save()
        jobs = record["auto"].get("jobs")
        if jobs:
            if shared:
                build = _clean(shared)
            else:
                shutil.rmtree(build, ignore_errors=True)
                build = _project(work / "again", args.units, args.elements)
            record["auto_run"] = _build_in(group, state, build, jobs)
            save()
        key = "memory.events" if version == 2 else "memory.failcnt"
        record["cgroup"]["after"] = (group / key).read_text()
        save()
    finally:
        if group is not None:
            for _ in range(50):
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.2)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(record, indent=2, default=str))


if __name__ == "__main__":
    main()

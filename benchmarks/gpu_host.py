"""Everything issue 7 asks of a real GPU host, with the workbench itself, in one run.

On the host it runs on:

1. the machine: nvidia-smi (the doctor's query, the R470 query, `-q`), the kernel module's
   version, CPU, memory, compiler versions;
2. `workbench doctor --json` (and the human text);
3. `workbench smoke --python python3 --json` with the onnxruntime installed there, and
   `workbench debug-bt --gdb cuda-gdb` on the provider-bridge fixture (hosts with cuda-gdb and
   no gdb);
4. the CUDA fixture (workbench/samples/cuda_sample_project.py) built with `workbench run` for each
   CMAKE_CUDA_ARCHITECTURES (default `90`, `90;120`, `80;86;89;90;100;120`), while a 10 Hz
   psutil recorder keeps the argv of the nvcc / cicc / ptxas / cudafe++ / fatbinary / gcc
   processes it sees with their classification; the fixture's executable then runs on the
   GPU and checks every kernel's output;
5. the C++ fixture (workbench/samples/sample_project.write_project, more units) built with
   `workbench run` at each of --jobs (default 1, 2, 4, 8, 16, 32);
6. the measurements from the workbench's own history (`history --json`, `report A B`) and
   where the workbench's jobs recommendation falls on the jobs curve.

Prints one JSON document and writes it to OUT_DIR/NAME.json (default benchmarks/results/),
after every step, so a run cut short still leaves what it measured.

    python benchmarks/gpu_host.py [--name h100-x1] [--out-dir DIR] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402

from workbench.monitor.classification import classify  # noqa: E402
from workbench.samples import cuda_sample_project, sample_project  # noqa: E402

ARCHITECTURES = ("90", "90;120", "80;86;89;90;100;120")
JOBS = (1, 2, 4, 8, 16, 32)
CXX_UNITS = 64
CXX_DEPTH = 6
# Tools whose argv the recorder keeps (the CUDA toolchain and what nvcc runs under it).
RECORDED_TOOLS = frozenset(
    ("nvcc", "cicc", "ptxas", "cudafe++", "fatbinary", "nvlink", "gcc", "g++", "cc1plus", "as")
)
RECORDS_PER_TOOL = 2  # per tool and target architecture, per build
_GCC_LIKE = re.compile(r"^(?:gcc|g\+\+|c\+\+|cc1)")
_ARCH = re.compile(r"\b(?:sm|compute)_\d+a?\b")
SMI_QUERY = "name,compute_cap,driver_version"
SMI_QUERY_OLD = "name,driver_version"


def run(argv: list[str], timeout: float = 120, **kwargs: Any) -> dict[str, Any]:
    """Run argv; its output, exit status and seconds (never raises for a failing program)."""
    begin = time.perf_counter()
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
        )
    except FileNotFoundError as exc:
        return {"argv": argv, "returncode": None, "error": str(exc), "seconds": 0.0}
    except subprocess.TimeoutExpired as exc:
        return {
            "argv": argv,
            "returncode": None,
            "error": f"timed out after {timeout} s",
            "stdout": (exc.stdout or b"").decode(errors="replace")[-4000:]
            if isinstance(exc.stdout, bytes)
            else (exc.stdout or "")[-4000:],
            "seconds": round(time.perf_counter() - begin, 3),
        }
    return {
        "argv": argv,
        "returncode": done.returncode,
        "stdout": done.stdout,
        "stderr": done.stderr,
        "seconds": round(time.perf_counter() - begin, 3),
    }


def tail(text: str | None, lines: int = 15) -> str:
    return "\n".join((text or "").splitlines()[-lines:])


class Results:
    """The document, written to disk after every step."""

    def __init__(self, path: Path, argv: list[str]) -> None:
        self.path = path
        self.document: dict[str, Any] = {
            "schema": "workbench-gpu-host/1",
            "command": shlex.join(argv),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    def __setitem__(self, key: str, value: Any) -> None:
        self.document[key] = value
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.document, indent=1, sort_keys=True) + "\n")
        temporary.replace(self.path)


# -- 1. the machine -----------------------------------------------------------------------------


def machine(out_dir: Path, name: str) -> dict[str, Any]:
    """What the host is: GPU(s) as nvidia-smi says, driver, CPU, memory, tool versions."""
    from workbench.host.hardware import detect_memory, read_cpuinfo, usable_cores
    from workbench.reading.doctor import version_line

    model, flags = read_cpuinfo()
    memory = detect_memory()
    info: dict[str, Any] = {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "cpu_model": model,
        "cpu_flags_of_interest": sorted(
            flags & {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_tile"}
        ),
        "cpus_usable": usable_cores(),
        "cpus_online": os.cpu_count(),
        "memory_total": memory.total,
        "memory_available": memory.available,
        "memory_cgroup_limit": memory.cgroup_limit,
    }
    with contextlib.suppress(OSError):
        text = Path("/proc/cpuinfo").read_text()
        info["cpuinfo_first_processor"] = text.split("\n\n", 1)[0] + "\n"
    with contextlib.suppress(OSError):
        info["meminfo_head"] = Path("/proc/meminfo").read_text().splitlines()[:3]
    smi = shutil.which("nvidia-smi")
    info["nvidia_smi_path"] = smi
    if smi:
        for key, query in (
            ("nvidia_smi_query", SMI_QUERY),
            ("nvidia_smi_query_old", SMI_QUERY_OLD),
        ):
            result = run([smi, f"--query-gpu={query}", "--format=csv,noheader"], timeout=30)
            info[key] = {
                "query": query,
                "stdout": result.get("stdout"),
                "stderr": result.get("stderr"),
                "returncode": result.get("returncode"),
            }
        full = run([smi, "-q"], timeout=60)
        text = full.get("stdout") or ""
        (out_dir / f"{name}-nvidia-smi-q.txt").write_text(text)
        info["nvidia_smi_q_file"] = f"{name}-nvidia-smi-q.txt"
        info["nvidia_smi_plain"] = run([smi], timeout=30).get("stdout")
    try:
        info["proc_driver_nvidia_version"] = Path("/proc/driver/nvidia/version").read_text()
    except OSError as exc:
        info["proc_driver_nvidia_version"] = None
        info["proc_driver_nvidia_version_error"] = str(exc)
    versions = {}
    nvcc = cuda_sample_project.find_nvcc()
    for tool, argv in (
        ("nvcc", [nvcc or "nvcc", "--version"]),
        ("cmake", ["cmake", "--version"]),
        ("ninja", ["ninja", "--version"]),
        ("g++", ["g++", "--version"]),
        ("gdb", ["gdb", "--version"]),
        ("cuda-gdb", ["cuda-gdb", "--version"]),
    ):
        result = run(argv, timeout=30)
        text = (result.get("stdout") or "") + (result.get("stderr") or "")
        versions[tool] = version_line(text) if result.get("returncode") is not None else None
    info["tool_versions"] = versions
    cuda_gdb = shutil.which("cuda-gdb")
    if cuda_gdb:
        result = run([cuda_gdb, "--version"], timeout=30)
        info["cuda_gdb_version_output"] = {
            "stdout": (result.get("stdout") or "").splitlines()[:8],
            "stderr": (result.get("stderr") or "").splitlines()[:8],
        }
    # Which host compiler nvcc and ninja run: a wrapper script, or the compiler itself.
    compilers = {}
    for program in ("g++", "gcc", "g++-real", "c++"):
        path = shutil.which(program)
        entry: dict[str, Any] = {"path": path}
        if path:
            entry["realpath"] = os.path.realpath(path)
            head = b""
            with contextlib.suppress(OSError), open(path, "rb") as handle:
                head = handle.read(400)
            if head.startswith(b"#!"):
                entry["script"] = head.decode(errors="replace").splitlines()[:8]
        compilers[program] = entry
    info["host_compilers"] = compilers
    if nvcc:
        # nvcc puts its own bin/ and nvvm/bin/ first on the PATH of the steps it runs.
        cuda_bin = Path(os.path.realpath(nvcc)).parent
        info["cuda_bin_compilers"] = sorted(
            str(p)
            for d in (cuda_bin, cuda_bin.parent / "nvvm" / "bin")
            if d.is_dir()
            for p in d.iterdir()
            if _GCC_LIKE.match(p.name)
        )
    info["nvcc_path"] = nvcc
    return info


# -- 2. doctor ----------------------------------------------------------------------------------


def workbench(state: Path, *args: str, timeout: float = 900) -> dict[str, Any]:
    return run([sys.executable, "-m", "workbench", "--state-dir", str(state), *args], timeout)


def doctor(state: Path) -> dict[str, Any]:
    """`workbench doctor --json` and the human text."""
    as_json = workbench(state, "doctor", "--json", timeout=120)
    human = workbench(state, "doctor", timeout=120)
    document = None
    if as_json.get("returncode") == 0:
        document = json.loads(as_json["stdout"])
    return {
        "command": "workbench doctor --json",
        "returncode": as_json.get("returncode"),
        "seconds": as_json.get("seconds"),
        "json": document,
        "stderr": tail(as_json.get("stderr")),
        "text": human.get("stdout"),
    }


# -- 3. smoke and cuda-gdb ----------------------------------------------------------------------


def smoke(state: Path) -> dict[str, Any]:
    """`workbench smoke --python python3 --json` with the host's onnxruntime."""
    result = workbench(state, "smoke", "--python", "python3", "--json", timeout=300)
    document = None
    with contextlib.suppress(json.JSONDecodeError):
        document = json.loads(result.get("stdout") or "")
    return {
        "command": "workbench smoke --python python3 --json",
        "returncode": result.get("returncode"),
        "seconds": result.get("seconds"),
        "json": document,
        "stdout_tail": None if document else tail(result.get("stdout")),
        "stderr": tail(result.get("stderr")),
    }


def cuda_gdb_capture(state: Path, work: Path) -> dict[str, Any]:
    """`workbench debug-bt --gdb cuda-gdb` on the provider-bridge loop at -O2."""
    gdb = shutil.which("cuda-gdb")
    if gdb is None:
        return {"skipped": "cuda-gdb is not on PATH"}
    fixtures = REPO / "tests" / "debugging" / "fixtures"
    binary = work / "bridge_o2"
    compiled = run(
        [
            "g++",
            "-O2",
            "-g",
            "-pthread",
            f"-I{fixtures}",
            str(fixtures / "bridge_provider.cc"),
            str(fixtures / "bridge_host.cc"),
            "-o",
            str(binary),
        ],
        timeout=300,
    )
    if compiled.get("returncode") != 0:
        return {"error": "g++ failed", "stderr": tail(compiled.get("stderr"))}
    argv = ["debug-bt", "--json", "--gdb", "cuda-gdb", "--samples", "3", "--interval", "0.15"]
    result = workbench(state, *argv, "--", str(binary), timeout=300)
    document = None
    with contextlib.suppress(json.JSONDecodeError):
        document = json.loads(result.get("stdout") or "")
    # Also what `workbench bt` finds by itself: gdb, else cuda-gdb.
    from workbench.debugging.gdb.gdb_session import find_gdb

    try:
        found = find_gdb()
    except Exception as exc:  # GdbNotFoundError: say so in the results
        found = f"error: {exc}"
    return {
        "command": "workbench " + shlex.join([*argv, "--", "bridge_o2"]),
        "find_gdb": found,
        "gdb_version": (run([gdb, "--version"]).get("stdout") or "").splitlines()[:1],
        "returncode": result.get("returncode"),
        "seconds": result.get("seconds"),
        "json": document,
        "stderr": tail(result.get("stderr")),
    }


# -- process recorder ---------------------------------------------------------------------------


class Recorder(threading.Thread):
    """Polls every process at 10 Hz and keeps the argv of new CUDA-toolchain processes whose
    argv names `marker` (the build's directory) or one of nvcc's temporary files.

    A process is keyed by (pid, start time, comm): a forked child that has not exec'd yet
    still shows its parent's argv, and is seen again once it has.
    """

    def __init__(self, marker: str, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.marker = marker
        self.interval = interval
        self.stop_event = threading.Event()
        self.seen: set[tuple[int, float, str]] = set()
        self.records: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {}
        self.kept: dict[tuple[str, str, bool], int] = {}

    def run(self) -> None:
        while not self.stop_event.is_set():
            for process in psutil.process_iter(["pid", "ppid", "name", "cmdline", "create_time"]):
                info = process.info
                key = (info["pid"], info["create_time"] or 0.0, info["name"] or "")
                if key in self.seen:
                    continue
                self.seen.add(key)
                argv = info["cmdline"] or []
                name = info["name"] or ""
                found = classify(name, argv)
                # Also compiler drivers the classification does not know by name (a
                # "g++-real" behind a wrapper script), to find out what they are.
                if found.tool not in RECORDED_TOOLS and not _GCC_LIKE.match(name):
                    continue
                self.counts[found.tool] = self.counts.get(found.tool, 0) + 1
                if self.marker not in " ".join(argv) and "tmpxft_" not in " ".join(argv):
                    continue  # not this build's (another build on the host)
                # Keep a few of each tool per target architecture (ptxas -arch sm_120, ...) and
                # step (nvcc's `g++ -E` preprocessing, or its host compile).
                arch = next((m.group(0) for a in argv if (m := _ARCH.search(a))), "")
                key = (found.tool, arch, "-E" in argv)
                if self.kept.get(key, 0) >= RECORDS_PER_TOOL:
                    continue
                self.kept[key] = self.kept.get(key, 0) + 1
                parent = ""
                with contextlib.suppress(psutil.Error, TypeError):
                    parent = psutil.Process(info["ppid"]).name()
                self.records.append(
                    {
                        "comm": name,
                        "argv": argv,
                        "parent": parent,
                        "kind": found.kind.value,
                        "tool": found.tool,
                        "file": found.file,
                    }
                )
            self.stop_event.wait(self.interval)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=10)


# -- builds through `workbench run` -------------------------------------------------------------


def supervised(state: Path, name: str, argv: list[str], cwd: Path) -> dict[str, Any]:
    """`workbench run --name NAME -- ARGV` from cwd; the build's id and outcome."""
    result = run(
        [
            sys.executable,
            "-m",
            "workbench",
            "--state-dir",
            str(state),
            "run",
            "--name",
            name,
            "--",
            *argv,
        ],
        timeout=1200,
        cwd=cwd,
    )
    found = re.search(r"build #(\d+)", result.get("stderr") or "")
    return {
        "command": shlex.join(["workbench", "run", "--name", name, "--", *argv]),
        "build_id": int(found.group(1)) if found else None,
        "returncode": result.get("returncode"),
        "client_seconds": result.get("seconds"),
        "stderr_tail": tail(result.get("stderr"), 4),
        "stdout_tail": tail(result.get("stdout"), 3),
    }


def measured(state: Path, build_id: int) -> dict[str, Any]:
    """A build's measurements, from the workbench's history, with every compile job."""
    from workbench.history.store import History

    with History(state) as history:
        record = history.get(build_id)
        facts = history.measured(build_id, slowest=5)
        jobs = history.jobs(build_id)
    summary: dict[str, Any] = {
        "build_id": build_id,
        "state": record.state,
        "exit_status": record.exit_status,
        "jobs": record.jobs,
        "wall_s": record.duration_s,
    }
    if facts is not None:
        summary.update(
            cpu_seconds=facts.cpu_seconds,
            cpu_utilisation=facts.cpu_utilisation,
            cpus=facts.cpus,
            peak_rss=facts.peak_rss,
            peak_job_rss=facts.peak_job_rss,
            peak_process_rss=facts.peak_process_rss,
            most_jobs=facts.most_jobs,
            samples=facts.samples,
            processes_seen=facts.census,
        )
    by_kind: dict[str, list[Any]] = {}
    for job in jobs:
        by_kind.setdefault(job.kind, []).append(job)
    summary["compile_jobs"] = {}
    for kind, rows in by_kind.items():
        seconds = [row.seconds for row in rows]
        rss = [row.peak_rss for row in rows]
        summary["compile_jobs"][kind] = {
            "count": len(rows),
            "named": sum(1 for row in rows if row.file),
            "tools": sorted({row.tool for row in rows}),
            "seconds_median": round(statistics.median(seconds), 2),
            "seconds_max": round(max(seconds), 2),
            "peak_rss_median": int(statistics.median(rss)),
            "peak_rss_max": max(rss),
            "files": sorted({os.path.basename(row.file) for row in rows if row.file}),
        }
    return summary


def report(state: Path, first: int, second: int) -> dict[str, Any]:
    """`workbench report A B` as Markdown and as JSON's table."""
    markdown = workbench(state, "report", str(first), str(second), timeout=60)
    as_json = workbench(state, "report", str(first), str(second), "--format", "json", timeout=60)
    table = None
    if as_json.get("returncode") == 0:
        table = json.loads(as_json["stdout"])["table"]
    return {
        "command": f"workbench report {first} {second}",
        "markdown": markdown.get("stdout"),
        "table": table,
    }


def slug(architectures: str) -> str:
    return architectures.replace(";", "-")


def cuda_builds(
    state: Path, work: Path, architectures: list[str], jobs: int, units: int, depth: int
) -> dict[str, Any]:
    """The CUDA fixture per architecture list, each in a fresh build directory."""
    source = work / "cuda-src"
    cuda_sample_project.write_project(source, units, depth)
    builds: dict[str, Any] = {"units": units, "depth": depth, "jobs": jobs, "runs": []}
    gpu = shutil.which("nvidia-smi") is not None
    cuobjdump = shutil.which("cuobjdump") or (
        "/usr/local/cuda/bin/cuobjdump"
        if os.access("/usr/local/cuda/bin/cuobjdump", os.X_OK)
        else None
    )
    for archs in architectures:
        output = work / f"cuda-build-{slug(archs)}"
        begin = time.perf_counter()
        configured = cuda_sample_project.configure(source, output, archs)
        entry: dict[str, Any] = {
            "architectures": archs,
            "configure_command": shlex.join(
                cuda_sample_project.configure_argv(
                    source, output, archs, cuda_sample_project.find_nvcc() or "nvcc"
                )
            ),
            "configure_s": round(time.perf_counter() - begin, 2),
            "configure_returncode": configured.returncode,
        }
        if configured.returncode != 0:
            entry["configure_error"] = tail(configured.stdout + configured.stderr, 30)
            builds["runs"].append(entry)
            continue
        recorder = Recorder(str(work))
        recorder.start()
        try:
            entry["run"] = supervised(
                state, f"cuda-{slug(archs)}", ["ninja", "-C", str(output), "-j", str(jobs)], work
            )
        finally:
            recorder.stop()
        entry["recorded_processes"] = recorder.records
        entry["processes_counted_by_recorder"] = recorder.counts
        if entry["run"]["build_id"] is not None:
            entry["measured"] = measured(state, entry["run"]["build_id"])
        if cuobjdump:
            listed = run([cuobjdump, "--list-elf", str(output / "libcuda_fixture.a")], timeout=60)
            elves = re.findall(r"sm_\d+a?", listed.get("stdout") or "")
            entry["cubin_architectures"] = sorted(set(elves), key=lambda s: int(s[3:].rstrip("a")))
        executable = output / "cuda_fixture_main"
        if gpu and executable.exists():
            ran = run([str(executable)], timeout=120)
            entry["gpu_check"] = {
                "returncode": ran.get("returncode"),
                "stdout_tail": tail(ran.get("stdout"), 3),
                "stderr_tail": tail(ran.get("stderr"), 3),
            }
        builds["runs"].append(entry)
    ids = [run_.get("run", {}).get("build_id") for run_ in builds["runs"]]
    if ids and ids[0] is not None:
        builds["reports"] = [report(state, ids[0], other) for other in ids[1:] if other]
    walls = [
        (run_["architectures"], run_["measured"]["wall_s"])
        for run_ in builds["runs"]
        if run_.get("measured")
    ]
    if walls:
        base = walls[0][1]
        builds["ratios_to_first"] = {archs: round(wall / base, 2) for archs, wall in walls}
    return builds


def cxx_builds(
    state: Path, work: Path, jobs_list: list[int], units: int, depth: int = CXX_DEPTH
) -> dict[str, Any]:
    """The C++ fixture with every job count, rebuilt from clean each time."""
    source, output = work / "cxx-src", work / "cxx-build"
    heavy = tuple(range(0, units, 2))
    sample_project.write_project(source, units=units, heavy=heavy, depth=depth)
    configure = sample_project.configure_argv(source, output)
    configured = run(configure, timeout=300)
    builds: dict[str, Any] = {
        "units": units,
        "heavy_units": len(heavy),
        "depth": depth,
        "configure_command": shlex.join(configure),
        "configure_returncode": configured.get("returncode"),
        "runs": [],
    }
    if configured.get("returncode") != 0:
        builds["configure_error"] = tail(configured.get("stderr"), 30)
        return builds
    for jobs in jobs_list:
        run(["ninja", "-C", str(output), "-t", "clean"], timeout=120)
        entry: dict[str, Any] = {"jobs": jobs}
        entry["run"] = supervised(
            state, f"cxx-j{jobs}", ["ninja", "-C", str(output), "-j", str(jobs)], work
        )
        if entry["run"]["build_id"] is not None:
            entry["measured"] = measured(state, entry["run"]["build_id"])
        builds["runs"].append(entry)
    runs = [entry for entry in builds["runs"] if entry.get("measured")]
    if runs:
        base = runs[0]["measured"]["wall_s"]
        builds["curve"] = [
            {
                "jobs": entry["jobs"],
                "wall_s": round(entry["measured"]["wall_s"], 2),
                "speedup": round(base / entry["measured"]["wall_s"], 2),
                "efficiency": round(base / entry["measured"]["wall_s"] / entry["jobs"], 2),
                "cpu_utilisation": round(entry["measured"].get("cpu_utilisation", 0.0), 1),
                "cores_busy": round(
                    entry["measured"].get("cpu_utilisation", 0.0)
                    / 100
                    * entry["measured"].get("cpus", 0),
                    1,
                ),
                "peak_compile_job_rss": entry["measured"].get("peak_job_rss", {}).get("compiler"),
            }
            for entry in runs
        ]
        ids = {entry["jobs"]: entry["run"]["build_id"] for entry in runs}
        pairs = [(1, 16), (8, 16), (16, 32)]
        builds["reports"] = [
            report(state, ids[a], ids[b]) for a, b in pairs if a in ids and b in ids
        ]
    return builds


def recommendations(state: Path, doctor_json: dict[str, Any] | None) -> dict[str, Any]:
    """The workbench's jobs recommendation for this host: the doctor's (for its variant), and
    for the C++ and CUDA fixtures from the settings' defaults and from what was measured."""
    from workbench.configs.matrix import load_matrix
    from workbench.configs.settings import load_settings
    from workbench.history.store import History
    from workbench.host.hardware import detect_memory, usable_cores
    from workbench.host.parallelism import recommend
    from workbench.planning.tuning import default_job_memory, measured_job_memory

    matrix = load_matrix(REPO / "configs")
    settings = load_settings(REPO / "configs", matrix)
    cores, available = usable_cores(), detect_memory().available
    out: dict[str, Any] = {"cores": cores, "memory_available": available}
    if doctor_json:
        out["doctor"] = doctor_json.get("parallelism")
        out["doctor_variant"] = (doctor_json.get("recommended") or [{}])[0].get("variant")

    def advice(job_memory: Any, cuda: bool, architectures: int = 1) -> dict[str, Any]:
        result = recommend(cores, available, job_memory, cuda, architectures)
        return {
            "jobs": result.jobs,
            "nvcc_threads": result.nvcc_threads,
            "limited_by": result.limited_by,
            "job_memory_gb": round(job_memory.gb, 3),
            "job_memory_source": job_memory.source,
        }

    out["cxx_default"] = advice(default_job_memory(settings, False), False)
    out["cuda_default"] = advice(default_job_memory(settings, True), True)
    with History(state) as history:
        for name, cuda, architectures in (
            ("cxx-j16", False, 1),
            ("cuda-90", True, 1),
            ("cuda-80-86-89-90-100-120", True, 6),
        ):
            job_memory = measured_job_memory(history, name, cuda)
            if job_memory is not None:
                out[f"measured_{name}"] = advice(job_memory, cuda, architectures)
    return out


def summary(document: dict[str, Any]) -> dict[str, Any]:
    """The figures of the document, short enough to read at the end of a terminal."""
    doctor_json = (document.get("doctor") or {}).get("json") or {}
    gpus = doctor_json.get("gpus") or {}
    smoke_json = (document.get("smoke") or {}).get("json") or {}
    check = smoke_json.get("check") or {}
    gdb_json = (document.get("cuda_gdb") or {}).get("json") or {}
    short: dict[str, Any] = {
        "results": document.get("results_file"),
        "gpus": [
            f"{d['name']} cc {d['compute_capability']} {d['sm']}" for d in gpus.get("devices", [])
        ],
        "driver": gpus.get("driver_version"),
        "cuda_toolkits_usable": [
            t["version"] for t in doctor_json.get("cuda_toolkits", []) if t.get("usable")
        ],
        "isas": (doctor_json.get("cpu") or {}).get("isas"),
        "recommended": [r["variant"] for r in doctor_json.get("recommended", [])],
        "parallelism": {
            key: (doctor_json.get("parallelism") or {}).get(key)
            for key in ("ninja_jobs", "nvcc_threads", "limited_by")
        },
        "smoke": {
            "status": smoke_json.get("status"),
            "onnxruntime": check.get("onnxruntime"),
            "providers": check.get("available_providers"),
            "runs": {r["provider"]: r["ok"] for r in check.get("runs", [])},
        },
        "cuda_gdb": {
            "gdb": gdb_json.get("gdb"),
            "diagnosis": (gdb_json.get("diagnosis") or {}).get("kind"),
        },
    }
    cuda = document.get("cuda") or {}
    short["cuda"] = [
        {
            "architectures": entry["architectures"],
            "wall_s": round((entry.get("measured") or {}).get("wall_s") or 0, 1),
            "cpu_utilisation": round((entry.get("measured") or {}).get("cpu_utilisation") or 0),
            "cuda_jobs": ((entry.get("measured") or {}).get("compile_jobs") or {}).get("cuda"),
            "gpu_check": (entry.get("gpu_check") or {}).get("stdout_tail"),
            "cubins": entry.get("cubin_architectures"),
        }
        for entry in cuda.get("runs", [])
    ]
    short["cuda_ratios"] = cuda.get("ratios_to_first")
    short["cxx_curve"] = (document.get("cxx") or {}).get("curve")
    return short


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default=None, help="results file name (default: host name)")
    parser.add_argument("--out-dir", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--architectures", nargs="+", default=list(ARCHITECTURES))
    parser.add_argument("--jobs", default=",".join(map(str, JOBS)), help="C++ job counts")
    parser.add_argument("--cuda-jobs", type=int, default=None, help="default: usable cores")
    parser.add_argument("--cuda-units", type=int, default=cuda_sample_project.DEFAULT_UNITS)
    parser.add_argument("--cuda-depth", type=int, default=cuda_sample_project.DEFAULT_DEPTH)
    parser.add_argument("--cxx-units", type=int, default=CXX_UNITS)
    parser.add_argument("--cxx-depth", type=int, default=CXX_DEPTH, help="heavy units' chain")
    parser.add_argument("--skip", nargs="*", default=[], help="steps: smoke gdb cuda cxx")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny projects (to check the script itself): 3 CUDA units at depth 4, 2 C++ units "
        "at depth 1",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.cuda_units, args.cuda_depth, args.cxx_units, args.cxx_depth = 3, 4, 2, 1
    name = args.name or platform.node() or "host"
    out_dir: Path = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    results = Results(
        out_dir / f"{name}.json",
        ["python", "benchmarks/gpu_host.py", *(sys.argv[1:] if argv is None else argv)],
    )
    results["results_file"] = f"{name}.json"
    from workbench.host.hardware import usable_cores

    with tempfile.TemporaryDirectory(prefix="gpu-host-") as scratch:
        work = Path(scratch)
        state = work / "state"
        print("machine ...", file=sys.stderr, flush=True)
        results["machine"] = machine(out_dir, name)
        print("doctor ...", file=sys.stderr, flush=True)
        results["doctor"] = doctor(state)
        if "smoke" not in args.skip:
            print("smoke ...", file=sys.stderr, flush=True)
            results["smoke"] = smoke(state)
        if "gdb" not in args.skip:
            print("debug-bt with cuda-gdb ...", file=sys.stderr, flush=True)
            results["cuda_gdb"] = cuda_gdb_capture(state, work)
        if "cuda" not in args.skip:
            if cuda_sample_project.missing_tools():
                results["cuda"] = {"skipped": f"missing {cuda_sample_project.missing_tools()}"}
            else:
                print("CUDA fixture ...", file=sys.stderr, flush=True)
                results["cuda"] = cuda_builds(
                    state,
                    work,
                    args.architectures,
                    args.cuda_jobs or usable_cores(),
                    args.cuda_units,
                    args.cuda_depth,
                )
        if "cxx" not in args.skip:
            print("C++ fixture ...", file=sys.stderr, flush=True)
            jobs_list = [int(text) for text in args.jobs.split(",") if text]
            results["cxx"] = cxx_builds(state, work, jobs_list, args.cxx_units, args.cxx_depth)
        results["recommendations"] = recommendations(
            state, (results.document.get("doctor") or {}).get("json")
        )
        history = workbench(state, "history", "--json", "--limit", "100", timeout=60)
        if history.get("returncode") == 0:
            results["history"] = [
                {key: build[key] for key in ("id", "name", "argv", "jobs", "state", "duration_s")}
                | {"measurements": build.get("measurements")}
                for build in json.loads(history["stdout"])["builds"]
            ]
    results["ended"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    print(json.dumps(summary(results.document), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

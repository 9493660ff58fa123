"""A build history with fixed times for snapshots, written through the core's `History` API.

Three builds, as the supervisor records them: the bundled sample project with -j2 and then -j1
(samples, compile and link jobs, measurements and a log each), and a CUDA variant's Nix build
killed by the OOM killer. Paths are relative, the sample builds ran on a small machine (4 cores,
16 GiB) so their graphs have something to show, and every time derives from `START`: with the
app's clock frozen at `NOW` (`make_app(clock=frozen_clock)`) and TZ=UTC the screens read the
same on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from recorded_builds import end, new_build, running_build

from workbench.history.records import KILLED, JobRow, Measured, Sampled
from workbench.history.store import History

START = 1_767_258_000.0  # 2026-01-01 09:00:00 UTC
NOW = START + 5 * 3600 + 1800  # 14:30, the frozen clock
GIB = 1024**3
MIB = 1024**2
CPUS = 4
MEMORY_TOTAL = 16 * GIB
AVAILABLE = 14 * GIB
SAMPLE_PROJECT = "sample-project"
VARIANT = "onnxruntime-python313-cuda12_9-sm90-avx512"


def frozen_clock() -> float:
    """The app's clock in snapshots: always `NOW`."""
    return NOW


@dataclass(frozen=True)
class Job:
    """One compile or link job of a sample build: its output line and measurements."""

    file: str
    kind: str
    tool: str
    start_s: float
    seconds: float
    peak_mb: int

    @property
    def line(self) -> str:
        what = "Linking CXX executable" if self.kind == "linker" else "Building CXX object"
        name = self.file.rsplit("/", 1)[-1]
        output = name if self.kind == "linker" else f"CMakeFiles/fixture.dir/{name}.o"
        return f"{what} {output}"


# The sample project's units: the heavy ones instantiate templates for about two seconds.
SOURCES = (
    ("src/heavy_0.cc", 2.9, 121),
    ("src/light_1.cc", 0.4, 38),
    ("src/light_2.cc", 0.5, 41),
    ("src/light_3.cc", 0.3, 36),
    ("src/light_4.cc", 0.4, 39),
    ("src/heavy_5.cc", 2.6, 116),
    ("src/light_6.cc", 0.3, 37),
    ("src/light_7.cc", 0.4, 52),
    ("src/light_8.cc", 0.3, 35),
    ("src/light_9.cc", 0.2, 38),
    ("src/heavy_10.cc", 2.7, 118),
    ("src/light_11.cc", 0.3, 36),
    ("src/main.cc", 0.1, 27),
)
WARNING = "../src/light_2.cc:14:9: warning: unused variable 'spare' [-Wunused-variable]"


def sample_jobs(parallel: int) -> list[Job]:
    """The units compiled `parallel` at a time (one after another in each lane), then linked."""
    lanes = [0.2] * parallel
    jobs = []
    for file, seconds, peak in SOURCES:
        lane = lanes.index(min(lanes))
        jobs.append(Job(file, "compiler", "g++", lanes[lane], seconds, peak))
        lanes[lane] += seconds + 0.05
    end = max(lanes)
    jobs.append(Job("fixture_main", "linker", "g++", end, 0.2, 35))
    return jobs


def sample_log(jobs: list[Job]) -> str:
    """ninja's output for these jobs, with the compiler's warning after the unit that has it."""
    lines = ["ninja: Entering directory `build'"]
    total = len(jobs)
    for number, job in enumerate(sorted(jobs, key=lambda j: j.start_s), start=1):
        lines.append(f"[{number}/{total}] {job.line}")
        if job.file == "src/light_2.cc":
            lines += [WARNING, "   14 |     int spare = 0;", "      |         ^~~~~"]
    return "\n".join(lines) + "\n"


def sample_samples(jobs: list[Job], started: float, duration: float) -> list[Sampled]:
    """One sample a second: CPU as a share of all cores, RSS of the jobs running then."""
    samples = []
    total = len(jobs)
    for second in range(int(duration) + 1):
        running = [job for job in jobs if job.start_s <= second < job.start_s + job.seconds]
        done = sum(1 for job in jobs if job.start_s + job.seconds <= second)
        rss = (8 + sum(job.peak_mb for job in running)) * MIB
        cores = len(running) * 0.97
        samples.append(
            Sampled(
                t=started + second,
                cpu_percent=100.0 * cores / CPUS,
                cpu_cores=cores,
                cpu_seconds=round(
                    sum(
                        min(second, j.start_s + j.seconds) - j.start_s
                        for j in jobs
                        if j.start_s < second
                    ),
                    2,
                ),
                rss=rss,
                memory_available=AVAILABLE - rss,
                processes=1 + 3 * len(running),
                compile_jobs=sum(1 for job in running if job.kind == "compiler"),
                cuda_jobs=0,
                link_jobs=sum(1 for job in running if job.kind == "linker"),
                fraction=done / total if second else None,
            )
        )
    return samples


def final_progress(total: int, last: str) -> dict[str, object]:
    """The tracker's snapshot of a ninja build that reached its end."""
    return {
        "derivations": [],
        "done": 0,
        "failed": 0,
        "failed_derivations": [],
        "fraction": 1.0,
        "last_line": f"[{total}/{total}] {last}",
        "lines": total + 4,
        "nix": False,
        "planned": 0,
        "running": 0,
        "step": {"description": last, "done": total, "tool": "ninja", "total": total},
        "step_failures": [],
    }


def add_sample_build(history: History, parallel: int, started: float) -> int:
    """A finished build of the sample project with `ninja -jN`; its id."""
    jobs = sample_jobs(parallel)
    duration = round(max(job.start_s + job.seconds for job in jobs) + 0.3, 2)
    argv = ("ninja", f"-j{parallel}", "-C", "build")
    plan = new_build(
        SAMPLE_PROJECT,
        argv=argv,
        cwd="sample-checkout",
        settings={"argv": list(argv), "cwd": "sample-checkout"},
        eta_key=f"run-{SAMPLE_PROJECT}-j{parallel}",
        jobs=parallel,
    )
    # Its pid: 40,000 and its id (its id is known once created: the pid is set as it runs).
    record = history.create(plan, now=started - 0.2)
    history.mark_running(record.id, 40_000 + record.id, 40_000 + record.id, started)
    samples = sample_samples(jobs, started, duration)
    for sample in samples:
        history.update_live(record.id, 0, {}, sample=sample)
    log = sample_log(jobs)
    path = Path(record.log_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(log)
    lines = log.count("\n")
    end(
        history,
        record.id,
        ended=started + duration,
        duration_s=duration,
        lines=lines,
        progress=final_progress(len(jobs), jobs[-1].line),
    )
    cpu_seconds = round(sum(job.seconds for job in jobs) + 0.4, 2)
    compilers = [job for job in jobs if job.kind == "compiler"]
    history.record_measurements(
        record.id,
        Measured(
            build_id=record.id,
            wall_s=duration,
            cpu_seconds=cpu_seconds,
            cpu_utilisation=100.0 * cpu_seconds / (duration * CPUS),
            cpus=CPUS,
            peak_rss=max(sample.rss for sample in samples),
            min_memory_available=min(sample.memory_available for sample in samples),
            memory_total=MEMORY_TOTAL,
            most_jobs=max(sample.compile_jobs for sample in samples),
            samples=len(samples),
            peak_job_rss={
                "compiler": max(job.peak_mb for job in compilers) * MIB,
                "linker": 35 * MIB,
            },
            peak_process_rss={"cc1plus": 118 * MIB, "ld": 31 * MIB, "ninja": 4 * MIB},
            census=[
                {
                    "count": len(compilers),
                    "derivations": [],
                    "files": [job.file for job in compilers[:5]],
                    "kind": "compiler",
                    "tool": "cc1plus",
                    "user": "dev",
                },
                {
                    "count": 1,
                    "derivations": [],
                    "files": [],
                    "kind": "driver",
                    "tool": "ninja",
                    "user": "dev",
                },
            ],
        ),
        [
            JobRow(
                job.file, job.kind, job.tool, job.seconds, job.peak_mb * MIB, started + job.start_s
            )
            for job in jobs
        ],
    )
    return record.id


def add_killed_variant_build(history: History, started: float) -> int:
    """A CUDA variant's Nix build that the OOM killer ended 42 minutes in; its id."""
    argv = (
        "nix",
        "--extra-experimental-features",
        "nix-command flakes",
        "build",
        f".#{VARIANT}",
        "-L",
        "--log-format",
        "internal-json",
        "--cores",
        "32",
        "--max-jobs",
        "1",
    )
    plan = new_build(
        VARIANT,
        backend="nix",
        argv=argv,
        cwd="builder-flake",
        settings={"ninja_jobs": 32, "max_jobs": 1, "nvcc_threads": 1},
        eta_key=f"nix-{VARIANT}",
        variant=VARIANT,
        target=VARIANT,
        jobs=32,
    )
    record = running_build(history, plan, pid=41_000, started=started, created=started - 1.0)
    path = Path(record.log_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("building onnxruntime-1.23.2 for sm90 with 32 jobs\n")
    duration = 42 * 60 + 17.0
    end(
        history,
        record.id,
        KILLED,
        ended=started + duration,
        duration_s=duration,
        exit_status=None,
        signal=9,
        note="killed (OOM?) while compiling flash_fwd_hdim128_fp16_sm90.cu, peak 231.40 GiB",
        progress={"nix": True, "planned": 3, "done": 2, "failed": 1, "derivations": []},
    )
    return record.id


def write_history(state: Path) -> list[int]:
    """The three builds in `state`'s history; their ids, oldest first."""
    with History(state) as history:
        return [
            add_sample_build(history, 2, START),
            add_sample_build(history, 1, START + 120),
            add_killed_variant_build(history, START + 3600),
        ]

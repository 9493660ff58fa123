"""The supervision core without a build: argv, lock, history, ETA, tuning, log pump, report."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from recorded_builds import end, job_peak_measured, new_build
from supervised import REPO, Bench
from workbench_cli import run_workbench

from workbench.configs.matrix import Matrix
from workbench.configs.settings import load_settings
from workbench.history.records import (
    RUNNING,
    STARTING,
    SUCCEEDED,
    EarlierRun,
    JobRow,
    Measured,
    NewBuild,
    Sampled,
)
from workbench.history.store import History
from workbench.host.parallelism import GIB, JobMemory
from workbench.planning.launch import (
    LaunchError,
    display,
    find_checkout,
    jobs_in_argv,
    nix_build_argv,
    plan_run,
    resolve_target,
)
from workbench.planning.tuning import choose_jobs, measured_job_memory, memory_warning
from workbench.progress import ProgressTracker
from workbench.reading import report
from workbench.supervision import live_eta
from workbench.supervision.lock import BuildLock, LockBusy, is_held
from workbench.supervision.pipeline import LogPipeline

CPU_VARIANT = "onnxruntime-python313-cpu-avx2"


# -- launch -------------------------------------------------------------------------------------


def test_nix_argv_is_exact() -> None:
    argv = nix_build_argv("onnxruntime-cuda-dyn", 8, 2)
    assert argv == [
        "nix",
        "--extra-experimental-features",
        "nix-command flakes",
        "build",
        ".#onnxruntime-cuda-dyn",
        "-L",
        "--log-format",
        "internal-json",
        "--cores",
        "8",
        "--max-jobs",
        "2",
    ]
    # -L before --log-format: Nix 2.8's -L resets the log format to plain text.
    assert argv.index("-L") < argv.index("--log-format")
    assert display(argv) == (
        "nix --extra-experimental-features 'nix-command flakes' build '.#onnxruntime-cuda-dyn' "
        "-L --log-format internal-json --cores 8 --max-jobs 2"
    )


@pytest.mark.parametrize("attr", ["-rf", "a b", "x;y", "../x", "", "a'b", "$(id)"])
def test_names_that_could_smuggle_arguments_are_refused(attr: str) -> None:
    with pytest.raises(LaunchError):
        nix_build_argv(attr, 1, 1)


def test_targets_resolve_by_variant_flavour_and_attribute(matrix: Matrix) -> None:
    assert resolve_target(CPU_VARIANT, matrix).attr == CPU_VARIANT
    assert resolve_target("cuda-dyn", matrix).attr == "onnxruntime-cuda-dyn"
    assert resolve_target("onnxruntime-cuda-dyn", matrix).name == "cuda-dyn"
    static = resolve_target("onnxruntime", matrix)
    assert static.name == "cuda-static" and static.cuda
    with pytest.raises(LaunchError, match="did you mean onnxruntime-python313-cpu-avx2"):
        resolve_target("onnxruntime-python313-cpu-avx", matrix)
    with pytest.raises(LaunchError, match="did you mean cuda-dyn"):
        resolve_target("cuda-dym", matrix)


def test_jobs_are_read_from_common_command_lines() -> None:
    assert jobs_in_argv(["ninja", "-C", "build", "-j4"]) == 4
    assert jobs_in_argv(["make", "-j", "8"]) == 8
    assert jobs_in_argv(["./build.sh", "--parallel", "6"]) == 6
    assert jobs_in_argv(["cmake", "--build", "b", "--parallel=3"]) == 3
    assert jobs_in_argv(["ninja"]) is None


def test_run_refuses_empty_and_unknown_commands(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match="no command"):
        plan_run(["--"], None, tmp_path)
    with pytest.raises(LaunchError, match="command not found"):
        plan_run(["--", "no-such-build-tool-xyz"], None, tmp_path)
    with pytest.raises(LaunchError, match="build name"):
        plan_run(["true"], "-bad name", tmp_path)
    plan = plan_run(["--", "true", "-j2"], "ok", tmp_path)
    assert plan.argv == ("true", "-j2") and plan.jobs == 2 and plan.backend == "run"


def test_checkout_is_the_nearest_git_root(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "a" / "b").mkdir(parents=True)
    assert find_checkout(tmp_path / "repo" / "a" / "b") == (tmp_path / "repo").resolve()


def _cli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    return run_workbench(*args, state=state)


def test_dry_run_prints_the_exact_command_and_starts_nothing(tmp_path: Path) -> None:
    result = _cli(
        "build", CPU_VARIANT, "--jobs", "3", "--max-jobs", "2", "--dry-run", state=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "nix --extra-experimental-features 'nix-command flakes' build "
        f"'.#{CPU_VARIANT}' -L --log-format internal-json --cores 3 --max-jobs 2 "
        f"--out-link result-{CPU_VARIANT}\n"
    )
    assert f"# in {REPO}" in result.stderr
    with History(tmp_path) as history:
        assert history.builds() == []
    flox = _cli(
        "build", CPU_VARIANT, "--backend", "flox", "--jobs", "3", "--dry-run", state=tmp_path
    )
    assert flox.returncode == 0, flox.stderr
    # flox build takes no job count: they reach the Nix it runs through NIX_CONFIG.
    assert flox.stdout.endswith(f"cores = 3\\nmax-jobs = 1' flox build {CPU_VARIANT}\n")
    assert flox.stdout.startswith("env $'NIX_CONFIG=")
    assert "flox build takes no job count" in flox.stderr


def test_unknown_variant_gets_suggestions_and_exit_2(tmp_path: Path) -> None:
    result = _cli("build", "onnxruntime-python313-cpu-avx", "--dry-run", state=tmp_path)
    assert result.returncode == 2
    assert "did you mean onnxruntime-python313-cpu-avx2" in result.stderr


def test_dry_run_warns_when_jobs_times_peak_exceed_memory(tmp_path: Path) -> None:
    result = _cli("build", "cpu", "--jobs", "4000000", "--dry-run", state=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "4000000 jobs × 0.30 GiB = 1200000.0 GiB (default from settings.toml" in result.stderr
    assert "more than the" in result.stderr and "OOM kill (exit 137)" in result.stderr


# -- lock ---------------------------------------------------------------------------------------


def test_lock_refuses_a_second_holder_and_says_who(tmp_path: Path) -> None:
    first = BuildLock.acquire(tmp_path, "/src/ort")
    first.describe(build_id=7, name="cuda-dyn", pid=os.getpid())
    with pytest.raises(LockBusy) as refused:
        BuildLock.acquire(tmp_path, "/src/ort")
    message = str(refused.value)
    assert "build #7 (cuda-dyn) is already building /src/ort" in message
    assert "workbench stop 7" in message and "--force" in message
    BuildLock.acquire(tmp_path, "/src/other").release()  # another checkout: free
    first.release()
    BuildLock.acquire(tmp_path, "/src/ort").release()


def test_lock_of_a_killed_holder_is_never_stale(tmp_path: Path) -> None:
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from workbench.supervision.lock import BuildLock\n"
        f"lock = BuildLock.acquire(Path({str(tmp_path)!r}), '/src/ort')\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert is_held(tmp_path, "/src/ort")
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=10)
        assert not is_held(tmp_path, "/src/ort")
        BuildLock.acquire(tmp_path, "/src/ort").release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


# -- history ------------------------------------------------------------------------------------


def _new(name: str = "fixture", **settings: object) -> NewBuild:
    return new_build(
        name, argv=("ninja", "-j2"), cwd="/src", settings=settings, eta_key=f"key-{name}", jobs=2
    )


def test_history_is_wal_and_keeps_a_build_from_start_to_end(tmp_path: Path) -> None:
    with History(tmp_path) as history:
        record = history.create(_new())
        assert record.state == STARTING and record.log_path.endswith(
            f"builds/{record.id}/build.log"
        )
        history.set_supervisor(record.id, 1234, 1.5)
        history.mark_running(record.id, 4321, 4321, time.time())
        progress = {"step": {"tool": "ninja", "done": 3, "total": 9, "description": "x"}}
        sample = Sampled(time.time(), 50.0, 1.0, 2.0, 10, 100, 3, 1, 0, 0, 1 / 3)
        history.update_live(record.id, 7, progress, {"cpu_cores": 1.0}, sample)
        assert history.get(record.id).state == RUNNING
        assert history.get(record.id).progress == progress
        end(history, record.id, duration_s=12.5, lines=9, progress=progress)
        done = history.get(record.id)
        assert (done.state, done.exit_status, done.duration_s, done.lines) == (
            SUCCEEDED,
            0,
            12.5,
            9,
        )
        assert len(history.samples(record.id)) == 1
        # A finished build is never marked lost afterwards.
        assert history.mark_lost(record.id, "gone") is False
    connection = sqlite3.connect(tmp_path / "history.sqlite3")
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    connection.close()


def test_measured_job_memory_comes_from_the_latest_builds(tmp_path: Path) -> None:
    with History(tmp_path) as history:
        assert measured_job_memory(history, "cpu", cuda=False) is None
        for peak in (400 * 1024**2, 900 * 1024**2):
            record = history.create(_new("cpu", nvcc_threads=1))
            history.record_measurements(
                record.id,
                job_peak_measured(record.id, peak),
                [JobRow("conv.cc", "compiler", "g++", 30.0, peak, 0.0)],
            )
            end(history, record.id, duration_s=100.0)
        memory = measured_job_memory(history, "cpu", cuda=False)
    assert memory is not None
    assert memory.gb == pytest.approx(900 / 1024)
    assert memory.source.startswith("measured: build #2 of cpu on ")
    assert "conv.cc (g++) peaked at 0.88 GiB" in memory.source


def test_auto_jobs_use_the_measured_memory(tmp_path: Path, matrix: Matrix) -> None:
    settings = load_settings(REPO / "configs", matrix)
    assert settings.ninja_jobs == "auto"
    measured = JobMemory(3.0, "measured: build #4 of cpu")
    choice = choose_jobs(settings, None, measured, cores=64, available_bytes=16 * GIB, cuda=False)
    # 16 GB x 0.85 / 3 GB = 4 jobs, not 64.
    assert choice.jobs == 4 and "memory" in choice.source
    assert any("measured: build #4 of cpu" in reason for reason in choice.reasons)
    assert choice.warning is None
    explicit = choose_jobs(settings, 8, measured, cores=64, available_bytes=16 * GIB, cuda=False)
    assert explicit.jobs == 8 and explicit.warning is not None
    assert explicit.warning.startswith(
        "memory at peak: 8 jobs × 3.00 GiB = 24.0 GiB (measured: build #4 of cpu), more than the "
        "16.0 GiB available now"
    )
    assert "at most 4 jobs fit (--jobs 4)" in explicit.warning


def test_memory_warning_counts_nvcc_threads() -> None:
    warning = memory_warning(4, 2, JobMemory(5.0, "x"), 32 * GIB)
    assert warning is not None and "4 jobs × 2 nvcc threads × 5.00 GiB = 40.0 GiB" in warning
    assert memory_warning(2, 1, JobMemory(5.0, "x"), 32 * GIB) is None


# -- ETA ----------------------------------------------------------------------------------------


def test_eta_from_earlier_builds_at_the_same_progress() -> None:
    # Earlier builds ran 100 s and 120 s, reaching half-way at 40 s and 60 s.
    earlier = [
        EarlierRun(1, 100.0, ((0.0, 0.0), (40.0, 0.5), (100.0, 1.0))),
        EarlierRun(2, 120.0, ((0.0, 0.0), (60.0, 0.5), (120.0, 1.0))),
    ]
    estimate = live_eta.estimate(elapsed_s=50.0, fraction=0.5, earlier=earlier)
    assert estimate is not None and estimate.remaining_s == pytest.approx(60.0)
    assert "#1, #2" in estimate.basis
    by_time = live_eta.estimate(elapsed_s=50.0, fraction=None, earlier=earlier)
    assert by_time is not None and by_time.remaining_s == pytest.approx(60.0)
    alone = live_eta.estimate(elapsed_s=60.0, fraction=0.25, earlier=[])
    assert alone is not None and alone.remaining_s == pytest.approx(180.0)
    assert live_eta.estimate(elapsed_s=1.0, fraction=0.01, earlier=[]) is None


# -- the log pump -------------------------------------------------------------------------------


def test_pipeline_writes_every_byte_and_feeds_complete_lines(tmp_path: Path) -> None:
    path = tmp_path / "build.log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    tracker = ProgressTracker()
    pipeline = LogPipeline(fd, tracker)
    text = "[1/3] Building CXX object a.cc.o\n[2/3] Bui" + "ld ü\n" + "[3/3] Linking"
    data = text.encode()
    split = data.index("ü".encode()) + 1  # cut inside the two-byte ü
    pipeline.feed(data[:split])
    assert path.read_bytes() == data[:split]  # a partial line is in the file at once
    pipeline.feed(data[split:])
    assert tracker.snapshot().step.done == 2
    assert tracker.last_line == "[2/3] Build ü"
    pipeline.close()
    os.close(fd)
    assert path.read_bytes() == data
    assert tracker.lines == 3 and tracker.snapshot().step.done == 3


# -- report -------------------------------------------------------------------------------------


def test_report_compares_two_builds(tmp_path: Path) -> None:
    with History(tmp_path) as history:
        ids = []
        for jobs, wall, peak in ((1, 200.0, 235 * 1024**2), (4, 50.0, 240 * 1024**2)):
            record = history.create(
                new_build("ort", argv=("ninja", f"-j{jobs}"), cwd="/s", jobs=jobs)
            )
            measured = job_peak_measured(record.id, peak)
            measured = Measured(**{**measured.__dict__, "wall_s": wall, "most_jobs": jobs})
            history.record_measurements(
                record.id, measured, [JobRow("conv.cc", "compiler", "g++", 30.0, peak, 0.0)]
            )
            end(history, record.id, duration_s=wall)
            ids.append(record.id)
        builds = [report.load(history, build_id) for build_id in ids]
    text = report.markdown(builds)
    assert "| Metric | #1 ort (j1) | #2 ort (j4) | Change |" in text
    assert "| Build time | 3m20s | 50.0s | 4.00x faster |" in text
    assert "| Compile jobs at once (most) | 1 | 4 | +3 |" in text
    assert "| Peak RSS per C/C++ compile job | 235 MiB | 240 MiB | +2% |" in text
    document = report.to_json(builds)
    rows = {row["key"]: row for row in document["table"]}
    assert rows["wall_s"]["values"] == [200.0, 50.0]
    assert [b["id"] for b in document["builds"]] == ids


def test_report_refuses_a_running_build(bench: Bench) -> None:
    with bench.history() as history:
        record = history.create(_new())
        history.set_supervisor(record.id, os.getpid(), _own_start())
        history.mark_running(record.id, os.getpid(), os.getpid(), time.time())
    result = bench.run("report", str(record.id), timeout=60)
    assert result.returncode == 2 and "still running" in result.stderr
    missing = bench.run("report", "99", timeout=60)
    assert missing.returncode == 2 and "no build #99" in missing.stderr


def _own_start() -> float:
    import psutil

    return psutil.Process().create_time()

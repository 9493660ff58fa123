"""PeakTracker's fold on hand-made samples: jobs, peaks, slowest files, the OOM line."""

from __future__ import annotations

from workbench.analysis.build_peaks import PeakTracker, oom_note
from workbench.monitor import BuildSample, ProcessSample, Sample

GB = 2**30


def _process(
    pid: int, tool: str, file: str | None, rss: int, job: int, job_kind: str | None, started: float
) -> ProcessSample:
    kind = {"g++": "compiler", "cc1plus": "compiler", "nvcc": "cuda", "cicc": "cuda"}.get(
        tool, "linker" if job_kind == "linker" else "driver"
    )
    return ProcessSample(
        pid=pid,
        ppid=1,
        kind=kind,
        tool=tool,
        file=file,
        cpu_percent=100.0,
        rss=rss,
        started=started,
        cpu_seconds=1.0,
        state="R",
        threads=1,
        job=job,
        job_kind=job_kind,
        derivation=None,
    )


def _sample(t: float, processes: list[ProcessSample], jobs: int, cpu: float) -> Sample:
    build = BuildSample(
        t=t,
        interval=1.0,
        processes=len(processes),
        cpus=4,
        cpu_percent=50.0,
        cpu_cores=2.0,
        cpu_seconds=cpu,
        rss=sum(p.rss for p in processes),
        memory_available=8 * GB - sum(p.rss for p in processes),
        memory_total=16 * GB,
        compile_jobs=jobs,
        cuda_jobs=0,
        link_jobs=0,
    )
    return Sample(build, tuple(processes))


def test_jobs_peaks_and_slowest_files() -> None:
    ninja = _process(10, "ninja", None, 10 * 2**20, 0, None, 0.0)
    conv = [
        _process(20, "g++", "conv.cc", 5 * 2**20, 20, "compiler", 1.0),
        _process(21, "cc1plus", "conv.cc", 300 * 2**20, 20, "compiler", 1.1),
    ]
    fwd = [
        _process(30, "nvcc", "fwd.cu", 20 * 2**20, 30, "cuda", 2.0),
        _process(31, "cicc", "fwd.cu", 4 * GB, 30, "cuda", 2.5),
    ]
    peaks = PeakTracker()
    peaks.add(_sample(2.0, [ninja, *conv], 1, 1.0))
    peaks.add(_sample(3.0, [ninja, *conv, *fwd], 2, 3.0))
    peaks.add(_sample(9.0, [ninja, *fwd], 1, 9.0))  # conv.cc ended after t=3
    # The PID of conv.cc's g++ comes back as another job: a new record, not a longer one.
    again = _process(20, "g++", "gemm.cc", 6 * 2**20, 20, "compiler", 9.5)
    peaks.add(_sample(10.0, [ninja, again, fwd[0]], 2, 10.0))
    summary = peaks.summary(root_cpu_seconds=12.0)
    assert summary.samples == 4 and summary.wall_s == 8.0
    assert summary.cpu_seconds == 12.0
    assert summary.cpu_utilisation == 100.0 * 12.0 / (8.0 * 4)
    assert summary.most_jobs == 2 and summary.most_jobs_at == 3.0
    assert summary.peak_job_rss == {"compiler": 305 * 2**20, "cuda": 4 * GB + 20 * 2**20}
    assert summary.peak_process_rss["cicc"] == 4 * GB
    assert summary.peak_rss == 10 * 2**20 + 305 * 2**20 + 4 * GB + 20 * 2**20
    files = {(job.file, job.running) for job in summary.jobs}
    assert files == {("conv.cc", False), ("fwd.cu", True), ("gemm.cc", True)}
    slowest = summary.slowest(1)
    assert [job.file for job in slowest] == ["fwd.cu"] and slowest[0].seconds == 8.0
    assert {job.file for job in summary.last_jobs} == {"gemm.cc", "fwd.cu"}
    note = oom_note(summary)
    assert note.startswith("killed (OOM?) while compiling ")
    assert "gemm.cc" in note and "fwd.cu" in note and note.endswith("peak 4.33 GiB")


def test_empty_summary_and_note() -> None:
    summary = PeakTracker().summary()
    assert summary.samples == 0 and summary.jobs == () and summary.cpu_utilisation == 0.0
    assert oom_note(summary) == "killed (OOM?), peak 0 MiB"

"""The jobs / nvcc threads recommendation from cores, memory and per-job memory."""

from __future__ import annotations

from workbench.host.parallelism import GIB, JobMemory, estimated_peak_gb, recommend


def test_cpp_build_is_limited_by_cores_on_the_seed_host() -> None:
    # The ninja-jobs report's host: 8 threads, 28 GB, ~0.25 GB per cc1plus.
    advice = recommend(8, 28 * GIB, JobMemory(0.25, "measured"), cuda=False)
    assert advice.jobs == 8
    assert advice.limited_by == "cores"
    assert advice.nvcc_threads == 1


def test_cuda_build_is_limited_by_memory() -> None:
    advice = recommend(64, 64 * GIB, JobMemory(5.0, "default"), cuda=True)
    assert advice.jobs == 10  # floor(64 * 0.85 / 5)
    assert advice.limited_by == "memory"
    assert advice.peak_memory_gb <= 64 * 0.85


def test_nvcc_threads_only_with_several_architectures_and_room() -> None:
    job = JobMemory(5.0, "default")
    saturated = recommend(16, 512 * GIB, job, cuda=True, cuda_architectures=3)
    assert (saturated.jobs, saturated.nvcc_threads) == (16, 1)  # no spare cores
    fixed = recommend(16, 512 * GIB, job, cuda=True, cuda_architectures=3, jobs=4)
    assert (fixed.jobs, fixed.nvcc_threads) == (4, 3)  # 4 spare cores per job, 3 archs
    assert fixed.limited_by == "settings"
    one_arch = recommend(16, 512 * GIB, job, cuda=True, cuda_architectures=1, jobs=4)
    assert one_arch.nvcc_threads == 1  # threads only split architectures
    tight = recommend(16, 48 * GIB, job, cuda=True, cuda_architectures=3, jobs=4)
    assert tight.nvcc_threads == 2  # floor(40.8 GB / (4 jobs x 5 GB))


def test_less_memory_than_one_job_warns() -> None:
    advice = recommend(8, 2 * GIB, JobMemory(5.0, "default"), cuda=True)
    assert advice.jobs == 1
    assert any("OOM" in reason for reason in advice.reasons)


def test_peak_estimate() -> None:
    assert estimated_peak_gb(4, 2, 5.0) == 40.0
    assert estimated_peak_gb(4, 0, 0.25) == 1.0


def test_jobs_are_sized_for_the_nvcc_threads_the_settings_give() -> None:
    """6 x 8 in settings.toml: "auto" must not plan jobs that only fit at one thread each."""
    job = JobMemory(5.0, "default")
    free = recommend(32, 96 * GIB, job, cuda=True, cuda_architectures=3)
    assert free.jobs == 16  # floor(81.6 GiB / 5 GiB) at one thread per job
    sized = recommend(32, 96 * GIB, job, cuda=True, cuda_architectures=3, nvcc_threads=8)
    assert sized.nvcc_threads == 8
    assert sized.jobs == 2  # floor(81.6 GiB / (5 GiB x 8 threads))
    assert sized.peak_memory_gb <= sized.memory_budget_gb
    cores = recommend(16, 960 * GIB, job, cuda=True, nvcc_threads=4)
    assert (cores.jobs, cores.limited_by) == (4, "cores")  # 4 jobs x 4 threads = 16 cores
    assert any("GiB" in reason for reason in sized.reasons)
    assert not any(" GB" in reason for reason in sized.reasons)


def test_the_recommendation_words_its_peak_as_the_planner_does() -> None:
    """One estimate, one wording: the recommendation's peak is the planner's `MemoryEstimate`
    ("memory at peak: 2 jobs × 0.30 GiB = 0.6 GiB ..."), never a second "x ... thread(s)" form."""
    from workbench.planning.tuning import MemoryEstimate

    job = JobMemory(0.30, "default from settings.toml (cxx_job_memory_gb)")
    advice = recommend(2, 4 * GIB, job, cuda=False)
    planned = MemoryEstimate(advice.jobs, advice.nvcc_threads, job, 4 * GIB)
    assert advice.memory == planned
    assert planned.figure() == "2 jobs × 0.30 GiB = 0.6 GiB"
    assert f"memory at peak: {planned.line()}; limited by cores" in advice.reasons
    assert not any("thread(s)" in reason or " x " in reason for reason in advice.reasons)
    cuda = recommend(64, 64 * GIB, JobMemory(5.0, "default"), cuda=True, nvcc_threads=2)
    assert cuda.memory.figure() == "5 jobs × 2 nvcc threads × 5.00 GiB = 50.0 GiB"
    assert cuda.peak_memory_gb == cuda.memory.peak_gib

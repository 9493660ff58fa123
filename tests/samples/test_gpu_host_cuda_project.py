"""The CUDA fixture project (workbench/samples/cuda_sample_project.py) that issue 7 measured.

The generator is checked everywhere; the build runs only where nvcc, cmake and ninja are
installed (the GPU host, or a development machine with the CUDA toolkit): it goes through
`workbench run` as on the H100 host, and the workbench must classify and name its nvcc jobs.
No GPU is needed to build; without one the fixture's own run check says "CUDA error".
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.samples import cuda_sample_project
from workbench.samples.cuda_sample_project import configure_argv, write_project

REPO = Path(__file__).resolve().parents[2]


def test_write_project_makes_units_main_and_cmake(tmp_path: Path) -> None:
    names = write_project(tmp_path, units=3, depth=5)
    assert names == ["kernels_0.cu", "kernels_1.cu", "kernels_2.cu"]
    unit = (tmp_path / "kernels_1.cu").read_text()
    assert "namespace unit_ns_1" in unit and "Chain<5>" in unit
    assert "__global__ void kernel" in unit and "#pragma unroll" in unit
    main = (tmp_path / "main.cu").read_text()
    assert "int unit_2(int n);" in main and "cuda fixture: %d units" in main
    cmake = (tmp_path / "CMakeLists.txt").read_text()
    assert "project(cuda_fixture CUDA CXX)" in cmake
    assert "add_library(cuda_fixture STATIC kernels_0.cu kernels_1.cu kernels_2.cu)" in cmake
    assert "set(CMAKE_CUDA_ARCHITECTURES 90)" in cmake  # only when none is given


def test_units_differ_so_nothing_is_shared_between_them(tmp_path: Path) -> None:
    write_project(tmp_path, units=2, depth=3)
    first, second = ((tmp_path / f"kernels_{n}.cu").read_text() for n in (0, 1))
    assert first != second.replace("unit_ns_1", "unit_ns_0").replace("unit_1", "unit_0")


def test_bad_sizes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_project(tmp_path, units=0)
    with pytest.raises(ValueError):
        write_project(tmp_path, depth=0)


@pytest.mark.parametrize("architectures", ["90", "90;120", "80;86;89;90;100;120"])
def test_configure_names_the_architectures(tmp_path: Path, architectures: str) -> None:
    argv = configure_argv(tmp_path / "src", tmp_path / "build", architectures, "/cuda/bin/nvcc")
    assert f"-DCMAKE_CUDA_ARCHITECTURES={architectures}" in argv
    assert "-DCMAKE_CUDA_COMPILER=/cuda/bin/nvcc" in argv
    assert argv[argv.index("-G") + 1] == "Ninja"


needs_cuda = pytest.mark.skipif(
    bool(cuda_sample_project.missing_tools()),
    reason=f"needs {', '.join(cuda_sample_project.missing_tools())}",
)


@needs_cuda
@pytest.mark.slow
def test_workbench_run_classifies_and_names_the_nvcc_jobs(tmp_path: Path) -> None:
    source, build, state = tmp_path / "src", tmp_path / "build", tmp_path / "state"
    write_project(source, units=2, depth=8)
    configured = cuda_sample_project.configure(source, build, "90;120")
    assert configured.returncode == 0, configured.stderr
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "--state-dir",
            str(state),
            "run",
            "--name",
            "cuda-fixture",
            "--",
            "ninja",
            "-C",
            str(build),
            "-j",
            "2",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    history = subprocess.run(
        [sys.executable, "-m", "workbench", "--state-dir", str(state), "history", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    measurements = json.loads(history.stdout)["builds"][0]["measurements"]
    census = {(g["kind"], g["tool"]): g for g in measurements["processes_seen"]}
    assert ("cuda", "nvcc") in census and ("cuda", "cicc") in census
    for (kind, _tool), group in census.items():
        if kind == "cuda":
            assert all(f.endswith(".cu") for f in group["files"]), group
    from workbench.history.store import History

    with History(state) as store:
        jobs = [job for job in store.jobs(1) if job.kind == "cuda"]
    named = {Path(job.file).name for job in jobs if job.file}
    assert {"kernels_0.cu", "kernels_1.cu"} <= named
    assert all(job.tool == "nvcc" for job in jobs)
    assert measurements["peak_job_rss"]["cuda"] > 0
    # Without a GPU the fixture's own check fails loudly rather than passing.
    if shutil.which("nvidia-smi") is None:
        run = subprocess.run(
            [str(build / "cuda_fixture_main")], capture_output=True, text=True, check=False
        )
        assert run.returncode == 1 and "CUDA error" in run.stdout

"""The doctor on the real H100 host, replayed without a GPU (issue 7).

benchmarks/gpu_host.py ran `workbench doctor --json` on the lent H100 host and recorded what
nvidia-smi, /proc/driver/nvidia/version and /proc/cpuinfo said there. Here the nvidia-smi
stand-in answers with that recorded output (tests/standins/nvidia-smi-fixtures/
h100-x1-driver-580.toml) and the doctor must come to the same answer as it did on the host.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from needed_tools import needs

from workbench.configs.matrix import Matrix
from workbench.configs.settings import load_settings
from workbench.host.hardware import (
    CpuInfo,
    Hardware,
    MemoryInfo,
    detect_gpus,
    kernel_driver_version,
    read_cpuinfo,
    supported_isas,
)
from workbench.reading.doctor import (
    PtraceStatus,
    ToolStatus,
    build_report,
    report_to_json,
    tool_status,
    version_line,
)

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
FIXTURES = REPO / "tests" / "standins" / "nvidia-smi-fixtures"
SMI_FIXTURE = "h100-x1-driver-580.toml"
PROC_VERSION = FIXTURES / "h100-x1-proc-driver-version.txt"
# Run 1 had the doctor as it was; run 2 the doctor with this fix (cuda-gdb's version).
BEFORE_FIX, AFTER_FIX = "h100-x1.json", "h100-x1-run2.json"


def recorded(name: str = AFTER_FIX) -> dict[str, Any]:
    return json.loads((RESULTS / name).read_text())


def recorded_host(matrix: Matrix, standin: str, tmp_path: Path) -> Hardware:
    """The H100 host as recorded: its nvidia-smi and kernel module, CPU, cores and memory."""
    machine = recorded()["machine"]
    gpus = detect_gpus(matrix, standin, proc_driver_version=PROC_VERSION)
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(machine["cpuinfo_first_processor"])
    model, flags = read_cpuinfo(cpuinfo)
    cpu = CpuInfo(
        "x86_64",
        "x86_64-linux",
        model,
        flags,
        supported_isas(flags, "x86_64-linux", matrix),
        machine["cpus_usable"],
    )
    memory = MemoryInfo(**recorded()["doctor"]["json"]["memory"])
    return Hardware(gpus, cpu, memory)


def test_recorded_nvidia_smi_is_the_real_h100(nvidia_smi, matrix: Matrix) -> None:
    machine = recorded()["machine"]
    assert machine["nvidia_smi_query"]["stdout"] == "NVIDIA H100 80GB HBM3, 9.0, 580.159.04\n"
    report = detect_gpus(matrix, nvidia_smi(SMI_FIXTURE), proc_driver_version=PROC_VERSION)
    assert report.status == "found"
    assert [(g.name, g.compute_capability, g.capability_source) for g in report.gpus] == [
        ("NVIDIA H100 80GB HBM3", "9.0", "nvidia-smi")
    ]
    # The kernel module (the open one, as that host loads it) agrees with nvidia-smi: no warning.
    assert kernel_driver_version(PROC_VERSION) == "580.159.04"
    assert report.driver_version == "580.159.04"
    assert report.warnings == ()


def test_doctor_without_a_gpu_gives_the_answer_it_gave_on_the_host(
    nvidia_smi, matrix: Matrix, tmp_path: Path
) -> None:
    on_host = recorded()["doctor"]["json"]
    hardware = recorded_host(matrix, nvidia_smi(SMI_FIXTURE), tmp_path)
    tools = tuple(ToolStatus(**tool) for tool in on_host["tools"].values())
    ptrace = PtraceStatus(**on_host["ptrace"])
    settings = load_settings(REPO / "configs", matrix)
    here = report_to_json(build_report(tools, hardware, ptrace, matrix, settings))

    # Fields added since the recording (JSON only ever gains fields) are compared by value.
    assert {key: here["gpus"][key] for key in on_host["gpus"]} == on_host["gpus"]
    assert here["gpus"]["unparsed"] == [] and here["mixed_gpus"] is None
    assert here["cuda_toolkits"] == on_host["cuda_toolkits"]
    assert all(toolkit["usable"] for toolkit in here["cuda_toolkits"])  # 13.0 included
    assert (
        here["cpu"]["isas"]
        == on_host["cpu"]["isas"]
        == [
            "avx2",
            "avx512",
            "avx512bf16",
            "avx512vnni",
        ]
    )
    assert (
        [r["variant"] for r in here["recommended"]]
        == [r["variant"] for r in on_host["recommended"]]
        == ["onnxruntime-python313-cuda12_9-sm90-avx512"]
    )
    assert [r["variant"] for r in here["alternatives"]] == [
        r["variant"] for r in on_host["alternatives"]
    ]
    assert here["notes"] == on_host["notes"] == []
    for key in ("ninja_jobs", "nvcc_threads", "limited_by"):
        assert here["parallelism"][key] == on_host["parallelism"][key]
    assert (here["parallelism"]["ninja_jobs"], here["parallelism"]["limited_by"]) == (16, "cores")


def test_cli_doctor_on_the_recorded_h100(nvidia_smi) -> None:
    standin = nvidia_smi(SMI_FIXTURE)
    result = subprocess.run(
        [sys.executable, "-m", "workbench", "doctor", "--json", "--nvidia-smi", standin],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=dict(os.environ),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    here = json.loads(result.stdout)
    on_host = recorded()["doctor"]["json"]
    assert here["gpus"]["devices"] == on_host["gpus"]["devices"]
    assert here["gpus"]["devices"][0]["sm"] == "sm90"
    assert here["cuda_toolkits"] == on_host["cuda_toolkits"]
    assert here["recommended"][0]["variant"].startswith("onnxruntime-python313-cuda12_9-sm90-")


def test_cuda_gdb_version_is_read_past_nvidias_wrapper_line() -> None:
    output = recorded()["machine"]["cuda_gdb_version_output"]["stdout"]
    assert output[0] == "exec: /usr/local/cuda/bin/cuda-gdb-python3.12-tui --version"
    assert version_line("\n".join(output)) == "NVIDIA (R) cuda-gdb 13.0"
    # What the host's doctor said before and after the fix.
    assert recorded(BEFORE_FIX)["doctor"]["json"]["tools"]["gdb"]["version"] == output[0]
    gdb = recorded(AFTER_FIX)["doctor"]["json"]["tools"]["gdb"]
    assert (gdb["path"], gdb["version"], gdb["note"]) == (
        "/usr/local/cuda/bin/cuda-gdb",
        "NVIDIA (R) cuda-gdb 13.0",
        "using cuda-gdb",
    )


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("cmake version 4.4.3\n\nCMake suite maintained", "cmake version 4.4.3"),
        ("1.13.2.git.kitware.jobserver-pipe-1\n", "1.13.2.git.kitware.jobserver-pipe-1"),
        (
            "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
            "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\n"
            "Cuda compilation tools, release 13.0, V13.0.88\n",
            "Cuda compilation tools, release 13.0, V13.0.88",
        ),
        ("GNU gdb (Debian 13.1-3) 13.1\n", "GNU gdb (Debian 13.1-3) 13.1"),
        ("/opt/python3.12/bin/tool: no version here\n", None),
    ],
)
def test_version_line_of_the_tools_seen_on_the_host(text: str, line: str | None) -> None:
    assert version_line(text) == line


def nvidia_style_cuda_gdb(directory: Path) -> Path:
    """A `cuda-gdb` made the way NVIDIA's is: a shell wrapper that says which binary it execs
    (the line recorded on the H100 host) and execs it; here the binary is the real gdb."""
    gdb = shutil.which("gdb")
    assert gdb is not None
    wrapper = directory / "cuda-gdb"
    wrapper.write_text(f'#!/bin/sh\necho "exec: {gdb} $*"\nexec {gdb} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


@needs("gdb")
def test_doctor_finds_a_wrapped_cuda_gdb_when_there_is_no_gdb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.debugging.gdb.gdb_session import find_gdb

    real = subprocess.run(
        [str(shutil.which("gdb")), "--version"], capture_output=True, text=True, check=True
    )
    wrapper = nvidia_style_cuda_gdb(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no plain gdb, as on the H100 host
    status = tool_status("gdb")
    assert (status.found, status.path, status.note) == (True, str(wrapper), "using cuda-gdb")
    assert status.version == version_line(real.stdout)
    assert not status.version.startswith("exec:")
    assert find_gdb() == str(wrapper)

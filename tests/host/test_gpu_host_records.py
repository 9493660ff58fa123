"""What the workbench recorded on the real H100 host, checked again without a GPU (issue 7).

benchmarks/gpu_host.py built the CUDA fixture with `workbench run` on the lent H100 host while
a 10 Hz recorder kept the argv of the nvcc / cicc / ptxas / cudafe++ / fatbinary / host
compiler processes it saw, with the classification the workbench gave them there. These tests
classify those argvs again, read the host's own census and per-job records, re-diagnose the
cuda-gdb capture taken there, and place the jobs recommendation on the recorded jobs curve.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from workbench.debugging.diagnosis.verdict import diagnose
from workbench.debugging.model import capture_from_json
from workbench.host.parallelism import JobMemory, recommend
from workbench.monitor.classification import ProcessKind, classify

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
RUNS = ("h100-x1.json", "h100-x1-run2.json")
CUDA_TOOLS = ("nvcc", "cicc", "ptxas", "cudafe++", "fatbinary")
UNIT = re.compile(r"(?:^|/)(?:kernels_\d+|main)\.cu$")
ALL_ARCHITECTURES = "80;86;89;90;100;120"


def document(name: str) -> dict[str, Any]:
    return json.loads((RESULTS / name).read_text())


def records(tool: str | None = None) -> list[tuple[str, str, dict[str, Any]]]:
    """(run, architectures, recorded process) for every process recorded on the host."""
    found = []
    for name in RUNS:
        for build in document(name)["cuda"]["runs"]:
            for process in build["recorded_processes"]:
                if tool is None or process["comm"] == tool:
                    found.append((name, build["architectures"], process))
    return found


def _id(item: tuple[str, str, dict[str, Any]]) -> str:
    return f"{item[0]}:{item[1]}:{item[2]['comm']}"


@pytest.mark.parametrize("tool", CUDA_TOOLS)
def test_the_cuda_toolchain_recorded_on_the_host_is_classified_and_named(tool: str) -> None:
    seen = records(tool)
    assert len(seen) >= 6, f"too few {tool} processes recorded"
    for run, archs, process in seen:
        found = classify(process["comm"], process["argv"])
        assert found.kind is ProcessKind.CUDA, (run, archs, process["argv"][:3])
        assert found.tool == tool
        assert found.file is not None and UNIT.search(found.file), (run, archs, found.file)
        # The same answer the workbench gave on the host.
        assert (found.kind.value, found.tool, found.file) == (
            process["kind"],
            process["tool"],
            process["file"],
        )


@pytest.mark.parametrize("tool", ["cicc", "ptxas"])
def test_every_architecture_has_its_own_named_pass(tool: str) -> None:
    """nvcc runs cicc and ptxas once per architecture; each pass names the unit it compiles."""
    for run in RUNS:
        build = next(
            b for b in document(run)["cuda"]["runs"] if b["architectures"] == ALL_ARCHITECTURES
        )
        targets = set()
        for process in build["recorded_processes"]:
            if process["comm"] != tool:
                continue
            argv = " ".join(process["argv"])
            targets.add(re.search(r"(?:sm|compute)_(\d+)", argv).group(1))
            assert UNIT.search(classify(tool, process["argv"]).file or "")
        assert targets == {"80", "86", "89", "90", "100", "120"}, (run, targets)


def test_nvccs_preprocessing_passes_are_named_after_the_unit() -> None:
    preprocessing = [item for item in records("cc1plus") if "-E" in item[2]["argv"]]
    assert preprocessing
    for _, _, process in preprocessing:
        found = classify("cc1plus", process["argv"])
        assert found.kind is ProcessKind.COMPILER
        assert found.file and UNIT.search(found.file)


def test_nvccs_host_compile_is_named_after_the_unit() -> None:
    """Also with several architectures, where nvcc's temporary is kernels_N.compute_120..."""
    host_compiles = [
        item for item in records("cc1plus") if "cudafe1.cpp" in " ".join(item[2]["argv"])
    ]
    assert host_compiles
    for _, _, process in host_compiles:
        found = classify("cc1plus", process["argv"])
        assert found.file and UNIT.search(found.file), found.file


def test_the_hosts_wrapped_gcc_driver_is_a_compiler() -> None:
    drivers = records("g++-real")
    assert drivers  # recorded by run 2
    for _, _, process in drivers:
        assert process["argv"][0] == "/opt/gcc/bin/g++-real"
        assert classify("g++-real", process["argv"]).kind is ProcessKind.COMPILER


@pytest.mark.parametrize("run", RUNS)
def test_the_hosts_own_census_and_jobs_name_every_unit(run: str) -> None:
    for build in document(run)["cuda"]["runs"]:
        measured = build["measured"]
        census = {(g["kind"], g["tool"]): g for g in measured["processes_seen"]}
        for tool in ("nvcc", "cicc", "ptxas"):
            group = census[("cuda", tool)]
            assert group["count"] >= 32
            assert group["files"] and all(UNIT.search(f) for f in group["files"])
        jobs = measured["compile_jobs"]["cuda"]
        # One job per nvcc (32 units and main.cu), each named, none mistaken for another kind.
        assert jobs["count"] == jobs["named"] == 33
        assert jobs["tools"] == ["nvcc"]
        assert set(measured["compile_jobs"]) <= {"cuda", "linker"}
        assert build["gpu_check"]["returncode"] == 0
        assert build["gpu_check"]["stdout_tail"] == "cuda fixture: 32 units, 0 failed"
        expected = {f"sm_{a}" for a in build["architectures"].split(";")}
        assert set(build["cubin_architectures"]) == expected


@pytest.mark.parametrize("run", RUNS)
def test_cuda_gdb_capture_from_the_host_is_diagnosed_again(run: str) -> None:
    recorded = document(run)["cuda_gdb"]
    assert recorded["returncode"] == 0
    assert recorded["find_gdb"] == "/usr/local/cuda/bin/cuda-gdb"  # the host has no plain gdb
    capture_document = recorded["json"]
    assert capture_document["gdb"].endswith("/cuda-gdb")
    assert capture_document["complete"] and not capture_document["symbols_only"]
    diagnosis = diagnose(capture_from_json(capture_document))
    assert diagnosis.kind == "call-cycle" and diagnosis.hung
    assert diagnosis.primary.pattern == "tail-calls"
    assert diagnosis.primary.bridge is not None
    assert diagnosis.primary.bridge.host_method == "ProviderHostImpl::DataTypeImpl__GetType_float"
    assert diagnosis.proposed_patch is not None
    # The same verdict as on the host.
    assert diagnosis.to_json()["summary"] == capture_document["diagnosis"]["summary"]


@pytest.mark.parametrize("run", RUNS)
def test_smoke_on_the_host_ran_the_model_on_every_provider(run: str) -> None:
    smoke = document(run)["smoke"]["json"]
    assert smoke["schema"] == "workbench-smoke/1"
    assert smoke["status"] == "passed" and smoke["exit_code"] == 0
    check = smoke["check"]
    assert check["onnxruntime"] == "1.30.0"
    assert [r["provider"] for r in check["runs"]] == check["available_providers"]
    assert all(r["ok"] and r["output"] == r["expected"] for r in check["runs"])


@pytest.mark.parametrize("run", RUNS)
def test_the_recommendation_lands_on_the_flat_end_of_the_recorded_curve(run: str) -> None:
    """The jobs the workbench recommends for that host, from its cores, its memory and the
    C++ fixture's measured per-job peak, are within 10% of the fastest build measured."""
    recorded = document(run)
    machine = recorded["machine"]
    curve = {point["jobs"]: point for point in recorded["cxx"]["curve"]}
    peak = max(point["peak_compile_job_rss"] for point in curve.values())
    advice = recommend(
        machine["cpus_usable"],
        machine["memory_available"],
        JobMemory(peak / 1024**3, "measured on the H100 host"),
        cuda=False,
    )
    assert (advice.jobs, advice.limited_by) == (16, "cores")
    fastest = min(point["wall_s"] for point in curve.values())
    assert curve[advice.jobs]["wall_s"] <= 1.1 * fastest
    # The jobs curve keeps rising up to the recommendation: each doubling still pays.
    assert curve[1]["wall_s"] > curve[2]["wall_s"] > curve[4]["wall_s"] > curve[8]["wall_s"]
    assert curve[8]["wall_s"] > curve[16]["wall_s"]


def test_results_say_which_command_and_machine_made_them() -> None:
    for run in RUNS:
        recorded = document(run)
        assert recorded["command"].startswith("python benchmarks/gpu_host.py --name h100-x1")
        assert recorded["machine"]["cpus_usable"] == 16
        assert recorded["machine"]["nvidia_smi_query"]["stdout"].startswith(
            "NVIDIA H100 80GB HBM3, 9.0,"
        )
        assert os.path.exists(RESULTS / recorded["machine"]["nvidia_smi_q_file"])

"""`workbench doctor`: the tools, hardware, permissions and the variant this host should build."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.configs.matrix import Matrix
from workbench.configs.settings import BuildSettings
from workbench.host.hardware import Hardware, detect
from workbench.host.parallelism import JobMemory, ParallelismAdvice, recommend
from workbench.host.selection import Selection, select

if TYPE_CHECKING:
    from workbench.host.nix_daemon import DaemonReality

# Tools the workbench drives, with the argv that prints each one's version. gdb may be cuda-gdb
# on GPU hosts that ship no plain gdb: it debugs host programs too.
TOOLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "nix": (("nix",), ("--version",)),
    "flox": (("flox",), ("--version",)),
    "gdb": (("gdb", "cuda-gdb"), ("--version",)),
    "ninja": (("ninja",), ("--version",)),
    "cmake": (("cmake",), ("--version",)),
    "nvcc": (("nvcc",), ("--version",)),
}
VERSION_TIMEOUT_S = 10
CAP_SYS_PTRACE = 19


@dataclass(frozen=True)
class ToolStatus:
    """A tool: whether it is on PATH, where, and its version line."""

    name: str
    found: bool
    path: str | None
    version: str | None
    note: str | None = None


@dataclass(frozen=True)
class PtraceStatus:
    """Whether this user may attach gdb to its own processes, and why not if not."""

    allowed: bool
    scope: int | None
    has_cap_sys_ptrace: bool
    reason: str


@dataclass(frozen=True)
class DoctorReport:
    """Everything `workbench doctor` says."""

    tools: tuple[ToolStatus, ...]
    hardware: Hardware
    ptrace: PtraceStatus
    selection: Selection
    parallelism: ParallelismAdvice
    nix_store: DaemonReality | None = None
    """The store that serves this user and its daemon's trust (`host.nix_daemon`); None where
    it was not asked (a recorded host without it)."""


# A version number standing on its own: not part of a word or path ("python3.12", "gcc-12.2").
_VERSION = re.compile(r"(?<![\w./-])\d+\.\d+(?:\.\d+)?")


def version_line(text: str) -> str | None:
    """The first line of `--version` output that carries a version number of its own.

    NVIDIA's cuda-gdb is a shell wrapper whose first line is
    "exec: /usr/local/cuda/bin/cuda-gdb-python3.12-tui --version" (seen on the H100 host):
    the "3.12" in that path is not cuda-gdb's version.
    """
    for line in text.splitlines():
        if line.startswith("exec: "):
            continue
        if _VERSION.search(line):
            return line.strip()
    return None


def tool_status(name: str) -> ToolStatus:
    """Find a tool on PATH and ask its version."""
    candidates, version_args = TOOLS[name]
    for candidate in candidates:
        path = shutil.which(candidate)
        if path is None:
            continue
        note = f"using {candidate}" if candidate != name else None
        try:
            result = subprocess.run(
                [path, *version_args],
                capture_output=True,
                text=True,
                timeout=VERSION_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return ToolStatus(name, True, path, None, f"{candidate} --version failed: {exc}")
        return ToolStatus(name, True, path, version_line(result.stdout + result.stderr), note)
    return ToolStatus(name, False, None, None)


def ptrace_status(
    scope_file: Path = Path("/proc/sys/kernel/yama/ptrace_scope"),
    status_file: Path = Path("/proc/self/status"),
    uid: int | None = None,
) -> PtraceStatus:
    """Whether gdb may attach to this user's processes (Yama scope and CAP_SYS_PTRACE)."""
    try:
        scope: int | None = int(scope_file.read_text().strip())
    except (OSError, ValueError):
        scope = None  # no Yama: classic ptrace rules
    cap = False
    try:
        for line in status_file.read_text().splitlines():
            if line.startswith("CapEff:"):
                cap = bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1)
    except (OSError, ValueError, IndexError):
        pass
    uid = os.geteuid() if uid is None else uid
    if scope == 3:
        return PtraceStatus(
            False,
            scope,
            cap,
            (
                "kernel.yama.ptrace_scope is 3: ptrace is disabled until reboot; "
                "no one can attach gdb on this host"
            ),
        )
    if scope == 2 and not cap:
        return PtraceStatus(
            False,
            scope,
            cap,
            (
                "kernel.yama.ptrace_scope is 2: only processes with CAP_SYS_PTRACE may attach; "
                "run as root, or `sudo sysctl kernel.yama.ptrace_scope=1`"
            ),
        )
    if scope == 1 and not cap:
        return PtraceStatus(
            True,
            scope,
            cap,
            (
                "kernel.yama.ptrace_scope is 1: gdb can attach only to its own children; "
                "`workbench debug-bt -- CMD` works, attaching to a running PID needs "
                "`sudo sysctl kernel.yama.ptrace_scope=0`"
            ),
        )
    if uid == 0 and not cap:
        return PtraceStatus(
            False,
            scope,
            cap,
            ("root without CAP_SYS_PTRACE (a container?): start it with --cap-add=SYS_PTRACE"),
        )
    return PtraceStatus(True, scope, cap, "gdb may attach to this user's processes")


def diagnose(
    matrix: Matrix,
    settings: BuildSettings,
    nvidia_smi: str = "nvidia-smi",
    state_directory: Path | None = None,
) -> DoctorReport:
    """Detect tools and hardware in parallel and work out the recommendation.

    With a state directory that holds a build history, the per-job memory of the recommended
    variant's earlier builds replaces the settings' default figure.
    """
    from workbench.host.nix_daemon import check_daemon

    with ThreadPoolExecutor(max_workers=len(TOOLS) + 2) as pool:
        hardware_future = pool.submit(detect, matrix, nvidia_smi)
        daemon_future = pool.submit(check_daemon)
        tools = tuple(pool.map(tool_status, TOOLS))
        hardware = hardware_future.result()
        nix_store = daemon_future.result()
    selection = select(hardware, matrix)
    measured = None
    if state_directory is not None and selection.primary is not None:
        measured = measured_memory(state_directory, selection.primary.variant)
    report = build_report(tools, hardware, ptrace_status(), matrix, settings, measured, selection)
    return replace(report, nix_store=nix_store)


def measured_memory(state_directory: Path, variant: Any) -> JobMemory | None:
    """Peak per-job memory of earlier builds of `variant`, if the history has any."""
    from workbench.history.store import History, database_path
    from workbench.planning.tuning import measured_job_memory

    if not database_path(state_directory).exists():  # never create state just to look
        return None
    with History(state_directory) as history:
        return measured_job_memory(history, variant.name, variant.is_gpu)


def build_report(
    tools: tuple[ToolStatus, ...],
    hardware: Hardware,
    ptrace: PtraceStatus,
    matrix: Matrix,
    settings: BuildSettings,
    measured: JobMemory | None = None,
    selection: Selection | None = None,
) -> DoctorReport:
    """The recommendation for what was detected (pure: no probing)."""
    selection = selection or select(hardware, matrix)
    if selection.mixed is not None:  # its advice depends on the setting as it is now
        mixed = replace(selection.mixed, configured=tuple(settings.cuda_architectures))
        selection = replace(selection, mixed=mixed)
    primary = selection.primary
    cuda = bool(primary and primary.variant.is_gpu)
    from workbench.planning.tuning import job_memory_for

    job_memory = job_memory_for(measured, settings, cuda)  # the planner's per-job figure
    architectures = len(settings.cuda_architectures) or 1
    parallelism = recommend(
        hardware.cpu.cores, hardware.memory.available, job_memory, cuda, architectures
    )
    return DoctorReport(tools, hardware, ptrace, selection, parallelism)


def report_to_json(report: DoctorReport) -> dict[str, Any]:
    """The stable `doctor --json` document (schema in README.md)."""
    hardware = report.hardware

    def recommendation(item: Any) -> dict[str, Any]:
        return {
            "variant": item.variant.name,
            "reasons": list(item.reasons),
            "caveat": item.variant.caveat,
        }

    return {
        "schema": "workbench-doctor/1",
        "tools": {tool.name: asdict(tool) for tool in report.tools},
        "gpus": {
            "status": hardware.gpu.status,
            "message": hardware.gpu.message,
            "driver_version": hardware.gpu.driver_version,
            "warnings": list(hardware.gpu.warnings),
            "unparsed": list(hardware.gpu.unparsed),
            "devices": [
                {
                    "index": gpu.index,
                    "name": gpu.name,
                    "compute_capability": gpu.compute_capability,
                    "capability_source": gpu.capability_source,
                    "sm": (
                        "sm" + gpu.compute_capability.replace(".", "")
                        if gpu.compute_capability
                        else None
                    ),
                }
                for gpu in hardware.gpu.gpus
            ],
        },
        "cuda_toolkits": [asdict(t) for t in report.selection.toolkits],
        "cpu": {
            "machine": hardware.cpu.machine,
            "platform": hardware.cpu.platform,
            "model": hardware.cpu.model,
            "isas": list(hardware.cpu.isas),
            "cores": hardware.cpu.cores,
        },
        "memory": asdict(hardware.memory),
        "ptrace": asdict(report.ptrace),
        "recommended": [recommendation(r) for r in report.selection.recommended],
        "alternatives": [recommendation(r) for r in report.selection.alternatives],
        "notes": list(report.selection.notes),
        "mixed_gpus": _mixed_json(report.selection.mixed),
        "parallelism": {
            "ninja_jobs": report.parallelism.jobs,
            "nvcc_threads": report.parallelism.nvcc_threads,
            "peak_memory_gb": round(report.parallelism.peak_memory_gb, 2),
            "memory_budget_gb": round(report.parallelism.memory_budget_gb, 2),
            "limited_by": report.parallelism.limited_by,
            "reasons": list(report.parallelism.reasons),
        },
    }


def _mixed_json(mixed: Any) -> dict[str, Any] | None:
    """GPUs of several architectures: the one build for all, and the per-GPU variants."""
    if mixed is None:
        return None
    return {
        "cuda_architectures": list(mixed.architectures),
        "variant": mixed.variant.name,
        "command": mixed.command,
        "configured": list(mixed.configured),
        "headline": mixed.headline(),
        "one_build_commands": list(mixed.one_build_commands()),
        "per_gpu": [{"gpu": gpu, "variant": variant} for gpu, variant in mixed.per_gpu],
        "gpu_sms": [{"gpu": gpu, "sm": sm} for gpu, sm in mixed.gpu_sms],
        # What the text says, in its order: the headline, the one build, the per-GPU variants.
        "guidance": list(mixed.lines()),
    }

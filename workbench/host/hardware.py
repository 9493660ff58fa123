"""What this host has: NVIDIA GPUs (via nvidia-smi), the CPU's ISA level, cores and memory."""

from __future__ import annotations

import csv
import math
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workbench.configs.matrix import Matrix
from workbench.host.bounded_command import run_bounded

QUERY_FULL = "name,compute_cap,driver_version"
QUERY_OLD_DRIVER = "name,driver_version"  # R470 and older have no compute_cap field
NVIDIA_SMI_TIMEOUT_S = 15

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


@dataclass(frozen=True)
class Gpu:
    """One NVIDIA GPU as nvidia-smi reports it."""

    index: int
    name: str
    compute_capability: str | None  # "9.0"; None when neither nvidia-smi nor the name tells
    capability_source: str  # "nvidia-smi", "GPU name table" or "unknown"


@dataclass(frozen=True)
class GpuReport:
    """The GPUs found, or why none were; the driver version when known.

    unparsed holds nvidia-smi's lines that did not validate, raw: they are reported, never
    turned into GPUs.
    """

    gpus: tuple[Gpu, ...]
    driver_version: str | None
    status: str  # "found", "no-nvidia-smi", "driver-unavailable", "no-gpu", "error"
    message: str
    warnings: tuple[str, ...] = ()
    unparsed: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return bool(self.gpus)


@dataclass(frozen=True)
class CpuInfo:
    """The CPU: architecture, model, the matrix ISAs it can run, usable cores."""

    machine: str  # "x86_64", "aarch64"
    platform: str  # "x86_64-linux", "aarch64-linux"
    model: str
    flags: frozenset[str] = field(repr=False)
    isas: tuple[str, ...]  # matrix ISA names this CPU runs, most portable first
    cores: int  # logical cores this process may use (affinity and cgroup quota)


@dataclass(frozen=True)
class MemoryInfo:
    """Memory in bytes; `available` already honours a cgroup limit when one is lower."""

    total: int
    available: int
    cgroup_limit: int | None


@dataclass(frozen=True)
class Hardware:
    """Everything detected about the host."""

    gpu: GpuReport
    cpu: CpuInfo
    memory: MemoryInfo


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run nvidia-smi bounded in time (its whole process group killed past the timeout)."""
    return run_bounded(argv, NVIDIA_SMI_TIMEOUT_S)


def capability_from_name(name: str, matrix: Matrix) -> str | None:
    """A GPU's compute capability from its marketing name, using the matrix's GPU lists.

    Longest names are tried first and matched as whole words, so "A10" never matches "A100"
    and "L40" never matches "L40S".
    """
    candidates = [(gpu, sm.capability) for sm in matrix.sms for gpu in sm.gpus]
    for gpu, capability in sorted(candidates, key=lambda item: -len(item[0])):
        if re.search(rf"(?<![\w]){re.escape(gpu)}(?![\w])", name, re.IGNORECASE):
            return capability
    return None


# What each field of a real answer looks like. A name is a product name (letters, digits and
# a little punctuation), never an error message; capabilities are "9.0"; drivers "580.95.05".
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9 ._()/+-]{0,95}$")
_NOT_A_NAME = re.compile(r"(?i)error|fault|fail|not found|unknown|unable|\?")
_CAPABILITY = re.compile(r"^\d{1,2}\.\d{1,2}$")
_DRIVER = re.compile(r"^\d{2,4}\.\d{1,3}(\.\d{1,3})?$")
_ABSENT = ("N/A", "[N/A]", "[Not Supported]", "[Unknown Error]")
NO_DEVICES = "No devices were found"


def _field_problem(field_name: str, value: str) -> str | None:
    if field_name == "name":
        if not _NAME.match(value) or _NOT_A_NAME.search(value):
            return f"name {value!r} is not a GPU name"
    elif field_name == "compute_cap":
        if value not in _ABSENT and not _CAPABILITY.match(value):
            return f"compute capability {value!r} is not MAJOR.MINOR"
    elif field_name == "driver_version" and not _DRIVER.match(value):
        return f"driver version {value!r} is not a version number"
    return None


def parse_nvidia_smi_csv(
    text: str, with_capability: bool, matrix: Matrix
) -> tuple[list[Gpu], list[str], list[str]]:
    """GPUs from `nvidia-smi --query-gpu=... --format=csv,noheader` output, field by field.

    Returns the GPUs, the drivers they report, and every line that did not validate as
    "why: raw line" (garbage, a crash message, a capability like "9.x"): those never
    become GPUs.
    """
    fields = (
        ["name", "compute_cap", "driver_version"]
        if with_capability
        else [
            "name",
            "driver_version",
        ]
    )
    gpus: list[Gpu] = []
    drivers: list[str] = []
    unparsed: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        row = next(csv.reader([line], skipinitialspace=True), [])
        values = [value.strip() for value in row]
        if len(values) != len(fields):
            unparsed.append(f"{len(values)} field(s) where {len(fields)} were asked: {line!r}")
            continue
        problems = [
            problem
            for name, value in zip(fields, values, strict=True)
            if (problem := _field_problem(name, value))
        ]
        if problems:
            unparsed.append(f"{'; '.join(problems)}: {line!r}")
            continue
        record = dict(zip(fields, values, strict=True))
        capability = record.get("compute_cap")
        capability = None if capability in _ABSENT else capability
        source = "nvidia-smi" if capability else "unknown"
        if capability is None:
            capability = capability_from_name(record["name"], matrix)
            source = "GPU name table" if capability else "unknown"
        gpus.append(Gpu(len(gpus), record["name"], capability, source))
        drivers.append(record["driver_version"])
    return gpus, drivers, unparsed


def kernel_driver_version(path: Path = Path("/proc/driver/nvidia/version")) -> str | None:
    """The loaded kernel module's version: the truth when a container ships a stale nvidia-smi."""
    try:
        text = path.read_text()
    except OSError:
        return None
    found = re.search(r"Kernel Module(?: for [\w-]+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return found.group(1) if found else None


def detect_gpus(
    matrix: Matrix,
    nvidia_smi: str = "nvidia-smi",
    run: Runner = _run,
    proc_driver_version: Path = Path("/proc/driver/nvidia/version"),
) -> GpuReport:
    """Ask nvidia-smi for the GPUs; fall back to the name table when compute_cap is missing."""
    executable = shutil.which(nvidia_smi)
    if executable is None:
        if os.sep in nvidia_smi:  # a path the user gave (--nvidia-smi): say what is wrong
            why = "is not executable" if os.path.exists(nvidia_smi) else "does not exist"
            return GpuReport((), None, "error", f"nvidia-smi {nvidia_smi} {why}")
        return GpuReport((), None, "no-nvidia-smi", "no NVIDIA GPU: nvidia-smi not found on PATH")
    base = [executable, "--format=csv,noheader"]
    try:
        result = run([*base, f"--query-gpu={QUERY_FULL}"])
        with_capability = True
        output = result.stdout + result.stderr
        if result.returncode != 0 and "compute_cap" in output:
            result = run([*base, f"--query-gpu={QUERY_OLD_DRIVER}"])
            with_capability = False
    except subprocess.TimeoutExpired:
        return GpuReport(
            (),
            None,
            "error",
            f"nvidia-smi did not answer within {NVIDIA_SMI_TIMEOUT_S} s (a hung driver?); it "
            "and everything it started were killed",
        )
    except OSError as exc:
        return GpuReport((), None, "error", f"nvidia-smi could not run: {exc.strerror}")
    output = (result.stdout + result.stderr).strip()
    if NO_DEVICES in output:
        # What nvidia-smi says (exit 6) with the driver loaded and no GPU visible: no GPU.
        return GpuReport((), None, "no-gpu", f"no NVIDIA GPU: nvidia-smi says {NO_DEVICES!r}")
    if result.returncode != 0:
        first_line = output.splitlines()[0] if output else f"exit status {result.returncode}"
        if "couldn't communicate with the NVIDIA driver" in output or "driver" in output.lower():
            return GpuReport(
                (), None, "driver-unavailable", f"no usable NVIDIA GPU: nvidia-smi: {first_line}"
            )
        return GpuReport((), None, "error", f"nvidia-smi failed: {first_line}")
    gpus, drivers, unparsed = parse_nvidia_smi_csv(result.stdout, with_capability, matrix)
    unreadable = tuple(
        f"nvidia-smi printed a line that does not parse ({item})" for item in unparsed
    )
    if not gpus:
        if unparsed:
            return GpuReport(
                (),
                None,
                "error",
                f"nvidia-smi's answer does not parse, so no GPU is assumed: {unparsed[0]}",
                unreadable,
                tuple(unparsed),
            )
        return GpuReport((), None, "no-gpu", "no NVIDIA GPU: nvidia-smi lists none")
    warnings = list(unreadable)
    smi_driver = drivers[0] if drivers else None
    driver = smi_driver
    kernel = kernel_driver_version(proc_driver_version)
    if kernel and smi_driver and kernel != smi_driver:
        warnings.append(
            f"nvidia-smi reports driver {smi_driver} but the loaded kernel module is {kernel} "
            "(a stale nvidia-smi in a container?); using the kernel module's version"
        )
        driver = kernel
    if not with_capability:
        warnings.append(
            "this driver's nvidia-smi cannot report compute_cap (R470 or older); "
            "compute capability taken from the GPU name"
        )
    for gpu in gpus:
        if gpu.compute_capability is None:
            warnings.append(f"compute capability of {gpu.name!r} is unknown")
    names = ", ".join(gpu.name for gpu in gpus)
    return GpuReport(
        tuple(gpus),
        driver,
        "found",
        f"{len(gpus)} NVIDIA GPU(s): {names}",
        tuple(warnings),
        tuple(unparsed),
    )


def read_cpuinfo(path: Path = Path("/proc/cpuinfo")) -> tuple[str, frozenset[str]]:
    """The CPU model name and its feature flags ("flags" on x86, "Features" on ARM)."""
    try:
        text = path.read_text()
    except OSError:
        return "unknown", frozenset()
    model = "unknown"
    flags: frozenset[str] = frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model", "CPU part") and model == "unknown":
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = frozenset(value.split())
    return model, flags


def platform_of(machine: str) -> str:
    """Nix system name for a machine architecture."""
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine.lower())
    return f"{machine}-linux"


def supported_isas(flags: frozenset[str], host_platform: str, matrix: Matrix) -> tuple[str, ...]:
    """Matrix ISAs whose required cpuinfo flags this CPU has, most portable first."""
    runnable = [
        isa
        for isa in matrix.isas
        if isa.platform == host_platform and set(isa.cpuinfo_flags) <= flags
    ]
    return tuple(isa.name for isa in sorted(runnable, key=lambda isa: isa.rank))


def cgroup_cpu_limit(path: Path = Path("/sys/fs/cgroup/cpu.max")) -> int | None:
    """Whole cores allowed by a cgroup v2 CPU quota, if one is set."""
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return max(1, math.ceil(int(quota) / int(period)))


def usable_cores() -> int:
    """Cores this process may use: CPU affinity, capped by a cgroup quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    return min(cores, limit) if limit else cores


def detect_memory(pid: int | None = None) -> MemoryInfo:
    """Total and available memory, honouring the tightest cgroup limit (v1 or v2) above us, or
    above `pid` (a nix-daemon, whose builders inherit its cgroups).

    The sampler's probe (workbench.monitor.memory) does the cgroup reading for both.
    """
    from workbench.monitor.memory import MemoryProbe

    state = MemoryProbe(pid).read()
    return MemoryInfo(total=state.total, available=state.available, cgroup_limit=state.cgroup_limit)


def detect_cpu(matrix: Matrix, cpuinfo: Path = Path("/proc/cpuinfo")) -> CpuInfo:
    """The CPU's architecture, model, runnable ISAs and usable cores."""
    machine = platform.machine()
    host_platform = platform_of(machine)
    model, flags = read_cpuinfo(cpuinfo)
    return CpuInfo(
        machine=machine,
        platform=host_platform,
        model=model,
        flags=flags,
        isas=supported_isas(flags, host_platform, matrix),
        cores=usable_cores(),
    )


def detect(matrix: Matrix, nvidia_smi: str = "nvidia-smi") -> Hardware:
    """Detect everything."""
    return Hardware(
        gpu=detect_gpus(matrix, nvidia_smi), cpu=detect_cpu(matrix), memory=detect_memory()
    )

"""A recorded build host for TUI tests and screenshots: an H100 server, without probing this one.

The GPU answer comes from the nvidia-smi stand-in (no GPU exists on the test machines); the CPU
from a recorded /proc/cpuinfo; tools and memory are fixed so screens look the same everywhere.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from workbench.configs.matrix import Matrix
from workbench.configs.settings import BuildSettings
from workbench.host.hardware import (
    CpuInfo,
    Hardware,
    MemoryInfo,
    detect_gpus,
    read_cpuinfo,
    supported_isas,
)
from workbench.host.nix_daemon import DEFAULT_SOCKET, DaemonReality, NixConf, StorePing
from workbench.reading.doctor import DoctorReport, PtraceStatus, ToolStatus, build_report

TESTS = Path(__file__).resolve().parent
STANDIN_NVIDIA_SMI = TESTS / "standins" / "standin-nvidia-smi"
GIB = 1024**3

TOOLS = (
    ToolStatus("nix", True, "/usr/bin/nix", "nix (Nix) 2.8.0"),
    ToolStatus("flox", False, None, None),
    ToolStatus("gdb", True, "/usr/bin/gdb", "GNU gdb (Debian 13.1-3) 13.1"),
    ToolStatus("ninja", True, "/usr/bin/ninja", "1.11.1"),
    ToolStatus("cmake", True, "/usr/bin/cmake", "cmake version 3.25.1"),
    ToolStatus("nvcc", True, "/usr/local/cuda/bin/nvcc", "release 12.9, V12.9.86"),
)


def recorded_daemon(user: str = "alice") -> DaemonReality:
    """The Nix store of a shared build host's multi-user install, as `check_daemon` reads it
    for a user the root nix-daemon does not trust, with no builders of its own: the answer the
    real daemon of tests/nix_daemon_testing.py gives its untrusted second user (Debian's Nix
    2.8: trust learnt from the restricted setting it drops; tests/remote/test_daemon_reality.py),
    at the default socket and /etc/nix."""
    return DaemonReality(
        user=user,
        ping=StorePing(
            True,
            "daemon",
            "2.8.0",
            False,
            "the daemon dropped a restricted setting (builders) from this user",
        ),
        socket=DEFAULT_SOCKET,
        conf=NixConf("/etc/nix/nix.conf", True),
        trusted_users=("root",),
        trusted_by_conf=False,
        builders=(),
        builders_source="/etc/nix/machines (the default)",
        substituters=("https://cache.nixos.org/",),
        trusted_substituters=(),
    )


def recorded_doctor(
    gpu_fixture: str = "h100-new-driver.toml",
    cpu_fixture: str = "sapphire-rapids.txt",
    nix_store: DaemonReality | None = None,
):
    """A doctor function for `make_app(doctor=...)` that reports the recorded host (with
    `nix_store`, the store that serves its user: `recorded_daemon`; else none said)."""

    def doctor(matrix: Matrix, settings: BuildSettings) -> DoctorReport:
        os.environ["STANDIN_NVIDIA_SMI_FIXTURE"] = str(
            TESTS / "standins" / "nvidia-smi-fixtures" / gpu_fixture
        )
        gpus = detect_gpus(
            matrix, str(STANDIN_NVIDIA_SMI), proc_driver_version=TESTS / "no-such-file"
        )
        model, flags = read_cpuinfo(TESTS / "fixtures" / "cpuinfo" / cpu_fixture)
        cpu = CpuInfo(
            "x86_64",
            "x86_64-linux",
            model,
            flags,
            supported_isas(flags, "x86_64-linux", matrix),
            32,
        )
        hardware = Hardware(gpus, cpu, MemoryInfo(256 * GIB, 240 * GIB, None))
        ptrace = PtraceStatus(True, 1, True, "gdb may attach to this user's processes")
        report = build_report(TOOLS, hardware, ptrace, matrix, settings)
        return replace(report, nix_store=nix_store)

    return doctor

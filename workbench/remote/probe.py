"""What each build host is now: reachable, its Nix, cores, memory and load, read over SSH.

One ssh command per host prints everything (over the host's multiplexed connection); hosts are
probed at once, each bounded in time. A failure is one line saying what to do.
"""

from __future__ import annotations

import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from workbench.remote.config import BuildHost
from workbench.remote.ssh import SshSetup, run_on_host

PROBE_TIMEOUT_S = 15.0

# Nix's own connection runs `nix-daemon --stdio` (ssh-ng) or `nix-store --serve` (ssh) in the
# remote user's non-interactive shell, so that PATH is what matters: no login profile here.
_PROBE_SCRIPT = (
    "printf 'nix=%s\\n' \"$(nix-store --version 2>/dev/null)\"; "
    "printf 'daemon=%s\\n' \"$(command -v nix-daemon 2>/dev/null)\"; "
    "printf 'cores=%s\\n' \"$(nproc 2>/dev/null)\"; "
    "grep -E '^(MemTotal|MemAvailable):' /proc/meminfo 2>/dev/null; "
    "printf 'load=%s\\n' \"$(cat /proc/loadavg 2>/dev/null)\""
)


@dataclass(frozen=True)
class HostStatus:
    """One probe of one host."""

    name: str
    reachable: bool
    problem: str  # "" when the host can build; else one line: what failed and what to do
    nix_version: str
    cores: int | None
    memory_total_bytes: int | None
    memory_available_bytes: int | None
    load: tuple[float, float, float] | None
    probe_seconds: float

    @property
    def ready(self) -> bool:
        return self.reachable and not self.problem


def _ssh_problem(host: BuildHost, stderr: str) -> str:
    """One line for an ssh failure (exit 255), from what ssh said."""
    said = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
    lowered = stderr.lower()
    if "permission denied" in lowered:
        key = host.ssh_key or "ssh's default key"
        return f"refused the key ({key}): add its public key to the host's authorized_keys"
    if "host key verification failed" in lowered or "host identification has changed" in lowered:
        return "its host key is unknown or changed: check host_key in hosts.toml (ssh-keyscan)"
    if "connection refused" in lowered:
        return f"nothing listens on {host.address}:{host.port}: is sshd running there?"
    if "timed out" in lowered or "no route" in lowered or "could not resolve" in lowered:
        return f"cannot reach {host.address}:{host.port} ({said})"
    return f"ssh failed: {said}"


def _parse(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=" if "=" in line.split(":")[0] else ":")
        if sep:
            values[key.strip()] = value.strip()
    return values


def _kilobytes(text: str | None) -> int | None:
    if not text:
        return None
    number = text.split()[0]
    return int(number) * 1024 if number.isdigit() else None


def status_from_output(host: BuildHost, stdout: str, seconds: float) -> HostStatus:
    """A reachable host's status from the probe script's output."""
    values = _parse(stdout)
    nix = values.get("nix", "")
    version = nix.rsplit(" ", 1)[-1] if nix else ""
    problem = ""
    if not nix:
        problem = "no Nix there (nix-store is not on the PATH of a non-interactive ssh shell)"
    elif host.scheme == "ssh-ng" and not values.get("daemon"):
        problem = "no nix-daemon there (ssh-ng:// needs it; use ssh:// or install Nix >= 2.4)"
    cores = values.get("cores", "")
    load_fields = values.get("load", "").split()
    load = None
    if len(load_fields) >= 3:
        try:
            load = (float(load_fields[0]), float(load_fields[1]), float(load_fields[2]))
        except ValueError:
            load = None
    return HostStatus(
        name=host.name,
        reachable=True,
        problem=problem,
        nix_version=version,
        cores=int(cores) if cores.isdigit() else None,
        memory_total_bytes=_kilobytes(values.get("MemTotal")),
        memory_available_bytes=_kilobytes(values.get("MemAvailable")),
        load=load,
        probe_seconds=seconds,
    )


def probe_host(setup: SshSetup, host: BuildHost, timeout_s: float = PROBE_TIMEOUT_S) -> HostStatus:
    """Probe one host over its multiplexed connection."""
    started = time.monotonic()
    try:
        done = run_on_host(setup, host, _PROBE_SCRIPT, timeout_s)
    except subprocess.TimeoutExpired:
        return _unreachable(host, f"no answer within {timeout_s:g} s", started)
    except FileNotFoundError:
        return _unreachable(host, "ssh is not installed here (Debian: openssh-client)", started)
    if done.returncode == 255:
        return _unreachable(host, _ssh_problem(host, done.stderr), started)
    return status_from_output(host, done.stdout, time.monotonic() - started)


def _unreachable(host: BuildHost, problem: str, started: float) -> HostStatus:
    return HostStatus(
        name=host.name,
        reachable=False,
        problem=problem,
        nix_version="",
        cores=None,
        memory_total_bytes=None,
        memory_available_bytes=None,
        load=None,
        probe_seconds=time.monotonic() - started,
    )


def probe_hosts(
    setup: SshSetup, hosts: tuple[BuildHost, ...], timeout_s: float = PROBE_TIMEOUT_S
) -> list[HostStatus]:
    """Probe every host at once; results in the order of `hosts`."""
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        return list(pool.map(lambda host: probe_host(setup, host, timeout_s), hosts))


def local_status(local_builds: bool) -> HostStatus:
    """This machine, read locally (no SSH), for the same table."""
    import psutil

    memory = psutil.virtual_memory()
    load = os.getloadavg()
    return HostStatus(
        name="local",
        reachable=True,
        problem="" if local_builds else "builds nothing (local_builds = false)",
        nix_version=_local_nix_version(),
        cores=psutil.cpu_count(),
        memory_total_bytes=memory.total,
        memory_available_bytes=memory.available,
        load=(round(load[0], 2), round(load[1], 2), round(load[2], 2)),
        probe_seconds=0.0,
    )


def _local_nix_version() -> str:
    try:
        done = subprocess.run(
            ["nix-store", "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip().rsplit(" ", 1)[-1] if done.returncode == 0 else ""

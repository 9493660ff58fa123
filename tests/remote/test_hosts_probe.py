"""`workbench hosts` against a real sshd on 127.0.0.1: Nix, cores, memory and load read over one
multiplexed connection; a refused key and a host without Nix each reported in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from loopback_sshd import LoopbackHost

pytestmark = pytest.mark.slow


def _hosts(config: Path, state: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "--config",
            str(config),
            "--state-dir",
            str(state),
            "hosts",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _ssh_sessions(host: LoopbackHost) -> int:
    """How many connections sshd serves now (one sshd child per connection)."""
    children = subprocess.run(
        ["pgrep", "-P", str(host.sshd_pid)], capture_output=True, text=True, check=False
    )
    return len(children.stdout.split())


def test_a_reachable_host_reports_nix_cores_memory_and_load(
    hosts_config: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    done = _hosts(hosts_config, state, "--json")
    assert done.returncode == 0, done.stderr
    remote = next(h for h in json.loads(done.stdout)["hosts"] if h["name"] == "remote")
    local_nix = subprocess.run(["nix-store", "--version"], capture_output=True, text=True)
    assert remote["ready"] and remote["problem"] == ""
    assert remote["nix_version"] == local_nix.stdout.split()[-1]
    assert (
        remote["cores"] >= 1
        and 0 < remote["memory_available_bytes"] <= remote["memory_total_bytes"]
    )
    assert len(remote["load"]) == 3
    # The probe left its master connection for the next one: a second run opens no new one.
    assert _ssh_sessions(loopback_host) == 1
    again = _hosts(hosts_config, state, "--json")
    assert again.returncode == 0 and _ssh_sessions(loopback_host) == 1
    # State stays private.
    for path in (state / "hosts", state / "hosts" / "ssh_config", state / "hosts" / "known_hosts"):
        assert path.stat().st_mode & 0o077 == 0


def test_a_refused_key_and_a_host_without_nix_are_one_line_each(
    config_copy: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    path = config_copy / "hosts.toml"
    path.write_text(
        path.read_text()
        + loopback_host.hosts_entry("wrongkey", key=loopback_host.directory / "host_key")
        + loopback_host.hosts_entry("nonix", key=loopback_host.directory / "no_nix_key")
    )
    done = _hosts(config_copy, tmp_path / "state")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    refused = [line for line in lines if line.startswith("  wrongkey: ")]
    no_nix = [line for line in lines if line.startswith("  nonix: ")]
    assert len(refused) == 1 and "refused the key" in refused[0], done.stdout
    assert len(no_nix) == 1 and "no Nix there" in no_nix[0], done.stdout
    assert "Traceback" not in done.stderr


def test_a_host_that_is_down_is_unreachable_within_bounds(
    hosts_config: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    loopback_host.kill()
    done = _hosts(hosts_config, tmp_path / "state")
    assert done.returncode == 1
    assert "unreachable" in done.stdout and "nothing listens on 127.0.0.1" in done.stdout

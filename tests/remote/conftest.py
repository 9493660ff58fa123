"""Fixtures of a second build host on this machine (tests/loopback_sshd.py says what it is)."""

from __future__ import annotations

from pathlib import Path

import pytest
from loopback_sshd import LoopbackHost, start_sshd, stop_sshd


@pytest.fixture
def loopback_host(tmp_path: Path):
    """A running loopback build host, stopped at the end."""
    # A short path: ssh's control sockets live below the state dir (at most 108 bytes).
    host = start_sshd(tmp_path / "sshd")
    yield host
    stop_sshd(host)


@pytest.fixture
def hosts_config(config_copy: Path, loopback_host: LoopbackHost) -> Path:
    """configs/ with a hosts.toml naming the loopback host."""
    path = config_copy / "hosts.toml"
    path.write_text(path.read_text() + loopback_host.hosts_entry())
    return config_copy

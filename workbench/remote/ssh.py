"""How the workbench and Nix reach the build hosts: one generated ssh config, one connection.

The workbench writes an ssh config (state directory, 0600) with a `Host workbench-NAME` block
per host (address, port, key, the host's public key) and hands it to Nix as
`NIX_SSHOPTS=-F FILE`, so Nix's own builder connections and the workbench's probes reach the
same host the same way. The workbench's own commands share ONE multiplexed connection per
host (ControlMaster/ControlPersist): a sample costs a channel, not a handshake.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workbench.atomic_file import replace_file
from workbench.history.private_state import (
    ensure_state_directory,
    private_directory,
)
from workbench.remote.config import BuildHost

CONNECT_TIMEOUT_S = 5
CONTROL_PERSIST_S = 120
# A unix socket path is at most 108 bytes; a host name at most 40 characters (+ ssh's suffix).
_SOCKET_ROOM = 100 - 62


@dataclass(frozen=True)
class SshSetup:
    """The generated files: ssh config, known_hosts and the folder of control sockets."""

    config_file: Path
    known_hosts: Path
    control_directory: Path

    def nix_sshopts(self) -> str:
        """NIX_SSHOPTS for Nix (split on spaces by Nix: the path has none, checked)."""
        return f"-F {self.config_file}"

    def base_argv(self, host: BuildHost) -> list[str]:
        """ssh with the workbench's config and its multiplexed connection to `host`."""
        return [
            "ssh",
            "-F",
            str(self.config_file),
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            "-o",
            "ControlMaster=auto",
            "-o",
            # Per host name, not ssh's %C: two hosts.toml entries for one address (another
            # key, another user) must not share a connection.
            f"ControlPath={self.control_directory}/{host.name}",
            "-o",
            f"ControlPersist={CONTROL_PERSIST_S}",
            host.alias,
        ]


def _config_text(hosts: tuple[BuildHost, ...], known_hosts: Path) -> str:
    lines = ["# Written by the workbench from configs/hosts.toml; rewritten on every use."]
    for host in hosts:
        lines += [
            f"Host {host.alias}",
            f"  HostName {host.address}",
            f"  Port {host.port}",
            # Known under the alias, whatever address or port it has (one entry per host).
            f"  HostKeyAlias {host.alias}",
            "  BatchMode yes",
            "  ServerAliveInterval 5",
            "  ServerAliveCountMax 2",
        ]
        if host.user:
            lines.append(f"  User {host.user}")
        if host.ssh_key:
            lines += [f"  IdentityFile {Path(host.ssh_key).expanduser()}", "  IdentitiesOnly yes"]
        if host.host_key:
            lines += [f"  UserKnownHostsFile {known_hosts}", "  StrictHostKeyChecking yes"]
    user_config = Path("~/.ssh/config").expanduser()
    if user_config.is_file():
        # What the hosts.toml does not say (proxies, agents) still comes from the user's own.
        lines += ["Match all", f"  Include {user_config}"]
    return "\n".join(lines) + "\n"


def _write_private(path: Path, text: str) -> None:
    replace_file(path, text, mode=0o600)


def prepare_ssh(hosts: tuple[BuildHost, ...], state_directory: Path) -> SshSetup:
    """Write the ssh config and known_hosts for `hosts` under the state directory."""
    directory = private_directory(ensure_state_directory(state_directory) / "hosts")
    control = directory / "control"
    if len(str(control)) > _SOCKET_ROOM or " " in str(directory):
        # A long state path cannot hold sockets, nor one with spaces reach NIX_SSHOPTS (Nix
        # splits it on spaces): a private folder in /tmp, one per state directory, instead.
        digest = hashlib.sha1(str(directory).encode()).hexdigest()[:12]
        base = private_directory(Path("/tmp") / f"workbench-ssh-{os.getuid()}")
        control = base / digest
        if " " in str(directory):
            directory = control
    control = private_directory(control)
    known_hosts = directory / "known_hosts"
    config_file = directory / "ssh_config"
    _write_private(known_hosts, "".join(f"{h.alias} {h.host_key}\n" for h in hosts if h.host_key))
    _write_private(config_file, _config_text(hosts, known_hosts))
    return SshSetup(config_file=config_file, known_hosts=known_hosts, control_directory=control)


def run_on_host(
    setup: SshSetup, host: BuildHost, script: str, timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """Run a fixed shell script on `host` over its multiplexed connection.

    `script` is the workbench's own text (never a value from a config or a build): ssh hands a
    remote command to the remote user's shell whatever argv it is given.
    """
    return subprocess.run(
        [*setup.base_argv(host), script],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def close_connection(setup: SshSetup, host: BuildHost) -> None:
    """End the shared connection to `host`, if one is open."""
    argv = setup.base_argv(host)
    subprocess.run(
        [*argv[:-1], "-O", "exit", argv[-1]],
        capture_output=True,
        timeout=10,
        stdin=subprocess.DEVNULL,
        check=False,
    )

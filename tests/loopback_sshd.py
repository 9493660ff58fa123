"""A second build host on this machine: Debian's sshd on 127.0.0.1 and a second Nix store.

The "remote" host is real OpenSSH (`/usr/sbin/sshd` from openssh-server) listening on a free
loopback port with its own host key and one authorised test key, everything in the test's temp
directory (no system configuration is read or changed: `-f` names our sshd_config). Behind it,
Nix's `ssh-ng://` runs `nix-daemon --stdio` as sshd's child; the host's store URI carries
`?remote-store=local?root=DIR`, so that daemon builds into a second store (DIR/nix/store), and
what comes back is copied into this machine's store as from any remote builder.

Found with Debian's Nix 2.8: a store whose real directory differs from /nix/store ("chroot
store") always builds in Nix's sandbox, whatever `sandbox =` says, so the remote side's
nix.conf (reached through sshd's `SetEnv NIX_CONF_DIR=...`) bind-mounts /bin, /lib, /lib64 and
/usr into the sandbox: the stand-in derivations' builder is /bin/sh. Everything stays on
127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from nix_testing import NIX_CONFIG

SSHD = Path("/usr/sbin/sshd")
SSHD_START_TIMEOUT_S = 10.0


@dataclass
class LoopbackHost:
    """A running sshd on 127.0.0.1 and what a hosts.toml entry needs to reach it."""

    port: int
    client_key: Path
    host_public_key: str  # "ssh-ed25519 AAAA..."
    remote_store_root: Path
    sshd_pid: int
    directory: Path

    def hosts_entry(
        self,
        name: str = "remote",
        max_jobs: int = 1,
        speed_factor: int = 1,
        key: Path | None = None,
    ) -> str:
        """A [[hosts]] table for this host (`key`: another client key than the authorised)."""
        return (
            "\n[[hosts]]\n"
            f'name = "{name}"\n'
            f'store = "ssh-ng://root@127.0.0.1?remote-store=local?root={self.remote_store_root}"\n'
            f"port = {self.port}\n"
            f'ssh_key = "{key or self.client_key}"\n'
            f'host_key = "{self.host_public_key}"\n'
            f"max_jobs = {max_jobs}\n"
            f"speed_factor = {speed_factor}\n"
            'features = ["big-parallel"]\n'
        )

    def kill(self) -> None:
        """The host drops: sshd and every session under it (nix-daemon --stdio) are killed."""
        for pid in [self.sshd_pid, *_sessions_of(self.sshd_pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _sessions_of(pid: int) -> list[int]:
    """Every process below sshd (its sessions and what they run), deepest last."""
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        children = subprocess.run(
            ["pgrep", "-P", str(parent)], capture_output=True, text=True, check=False
        ).stdout.split()
        for child in map(int, children):
            found.append(child)
            pending.append(child)
    return found


def start_sshd(directory: Path) -> LoopbackHost:
    """Start sshd for the test in `directory`; pytest.skip with the reason if it cannot run."""
    if not SSHD.exists():
        pytest.skip("sshd is not installed (Debian: apt-get install openssh-server)")
    if shutil.which("ssh") is None or shutil.which("nix-daemon") is None:
        pytest.skip("ssh or nix-daemon is missing (Debian: openssh-client, nix-bin)")
    if os.geteuid() != 0:
        # sshd as an unprivileged user can only log that same user in; the remote store's
        # sandbox (see above) needs root.
        pytest.skip("the loopback build host needs root (its Nix store builds in a sandbox)")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name in ("host_key", "client_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / name)],
            check=True,
        )
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / "no_nix_key")],
        check=True,
    )
    authorized = directory / "authorized_keys"
    # The second key logs in to a shell whose PATH has no Nix (a host without Nix installed).
    no_nix = 'command="PATH=/nonexistent exec /bin/sh -c \\"$SSH_ORIGINAL_COMMAND\\"" '
    authorized.write_text(
        (directory / "client_key.pub").read_text()
        + no_nix
        + (directory / "no_nix_key.pub").read_text()
    )
    authorized.chmod(0o600)
    remote_etc = directory / "remote-nix"
    remote_etc.mkdir()
    (remote_etc / "nix.conf").write_text(
        "build-users-group =\nsubstituters =\nsandbox-paths = /bin /lib /lib64 /usr\n"
    )
    port = _free_port()
    config = directory / "sshd_config"
    config.write_text(
        "\n".join(
            [
                "ListenAddress 127.0.0.1",
                f"Port {port}",
                f"HostKey {directory / 'host_key'}",
                f"AuthorizedKeysFile {authorized}",
                f"PidFile {directory / 'sshd.pid'}",
                # The temp directory's parents are not root-only as StrictModes wants.
                "StrictModes no",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "UsePAM no",
                f"SetEnv NIX_CONF_DIR={remote_etc}",
                "",
            ]
        )
    )
    # sshd's privilege-separation directory; Debian's service unit creates it the same way.
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = directory / "sshd.log"
    # -D: stays in the foreground as our child, so the test owns and ends exactly it.
    process = subprocess.Popen(
        [str(SSHD), "-D", "-f", str(config), "-E", str(log)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + SSHD_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.skip(f"sshd cannot run here: {log.read_text()[-300:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.05)
    else:
        process.kill()
        process.wait()
        pytest.skip("sshd did not listen within 10 s")
    host_public_key = " ".join((directory / "host_key.pub").read_text().split()[:2])
    return LoopbackHost(
        port=port,
        client_key=directory / "client_key",
        host_public_key=host_public_key,
        remote_store_root=directory / "remote-store",
        sshd_pid=process.pid,
        directory=directory,
    )


def stop_sshd(host: LoopbackHost) -> None:
    """End sshd and its sessions (the test's own processes, by id)."""
    host.kill()
    with contextlib.suppress(ChildProcessError):
        os.waitpid(host.sshd_pid, 0)


def nix_env_for_hosts(tmp_path: Path) -> dict[str, str]:
    """The local side's Nix environment (tests/nix_testing.py) for these tests."""
    env = dict(os.environ)
    env["NIX_CONFIG"] = NIX_CONFIG
    env["XDG_CACHE_HOME"] = str(tmp_path / "nix-cache")
    return env

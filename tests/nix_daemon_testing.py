"""A real nix-daemon of the test's own: its nix.conf, its socket, build users `nixbld*`.

Nothing system-wide: the daemon reads `NIX_CONF_DIR` (the test's folder) and listens on
`NIX_DAEMON_SOCKET_PATH` (also there); clients reach it with the environment `client_env()`
gives. Other tests run their own daemons at the same time; each has its own socket. The store
is the machine's /nix/store (a daemon serves the store it runs on).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from nix_testing import ensure_build_users

DAEMON_START_S = 30.0


@dataclass
class RunningDaemon:
    """A nix-daemon this test started."""

    process: subprocess.Popen[bytes]
    socket: Path
    conf_dir: Path
    log: Path

    def client_env(self, cache: Path) -> dict[str, str]:
        """What a client (any user) needs to talk to this daemon, with its own cache folder."""
        return {
            "NIX_REMOTE": "daemon",
            "NIX_DAEMON_SOCKET_PATH": str(self.socket),
            "NIX_CONF_DIR": str(self.conf_dir),
            "NIX_CONFIG": "",
            "XDG_CACHE_HOME": str(cache),
        }

    def stop(self) -> None:
        """End the daemon and what it forked (its workers call setsid: by pid, not group)."""
        with contextlib.suppress(psutil.Error):
            below = psutil.Process(self.process.pid).children(recursive=True)
            self.process.kill()
            for process in below:
                with contextlib.suppress(psutil.Error):
                    process.kill()
        self.process.wait(timeout=30)


def start_daemon(
    directory: Path,
    trusted_users: str = "root",
    extra_conf: str = "",
    machines: str = "",
    **env: str,
) -> RunningDaemon:
    """Start a nix-daemon whose nix.conf lives in `directory` (readable by every user, as
    /etc/nix is); `machines`: its machines file (beside that nix.conf, where the daemon's
    default `builders = @$NIX_CONF_DIR/machines` reads it, as /etc/nix/machines); `env`: more
    of the daemon's environment (NIX_SSHOPTS, ...)."""
    ensure_build_users()
    conf = directory / "nix-conf"
    conf.mkdir(parents=True)
    conf.chmod(0o755)
    (conf / "nix.conf").write_text(
        "build-users-group = nixbld\nsandbox = false\nsubstituters =\n"
        "experimental-features = nix-command flakes\n"
        f"trusted-users = {trusted_users}\n{extra_conf}"
    )
    (conf / "nix.conf").chmod(0o644)
    if machines:
        (conf / "machines").write_text(machines)
        (conf / "machines").chmod(0o644)
    socket = directory / "daemon.socket"
    environment = {k: v for k, v in os.environ.items() if k not in ("NIX_CONFIG", "NIX_REMOTE")}
    environment.update({"NIX_CONF_DIR": str(conf), "NIX_DAEMON_SOCKET_PATH": str(socket), **env})
    log = directory / "daemon.log"
    with open(log, "w") as handle:
        process = subprocess.Popen(
            ["nix-daemon"],
            env=environment,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + DAEMON_START_S
    while not socket.exists():
        if process.poll() is not None:
            raise AssertionError(f"nix-daemon ended: {log.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"nix-daemon opened no socket within {DAEMON_START_S} s")
        time.sleep(0.05)
    return RunningDaemon(process, socket, conf, log)


@pytest.fixture(name="daemon")
def untrusting_daemon(shared_tmp: Path) -> Iterator[RunningDaemon]:
    """`daemon`: a nix-daemon of the test's own that trusts root only, so the second user (tests/
    second_user.py, whose `shared_tmp` it lives in) is served as an untrusted user."""
    running = start_daemon(shared_tmp / "daemon", trusted_users="root")
    yield running
    running.stop()

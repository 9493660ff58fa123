"""`doctor` and `hosts` through a real nix-daemon: as a user it does not trust, one it trusts,
and (as root) whether the daemon reaches the loopback host with its own ssh setup.

Each test starts its own daemon (tests/nix_daemon_testing.py: its nix.conf and socket in the
test's folder, build users nixbld*) and a real sshd on 127.0.0.1 (tests/loopback_sshd.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback_sshd import LoopbackHost
from needed_tools import needs
from nix_daemon_testing import RunningDaemon, start_daemon
from second_user import OtherUser, other_user, shared_tmp  # noqa: F401 - the fixtures

from workbench.planning.launch import host_platform

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.nix,
    needs("nix-daemon", debian="nix-bin"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a nix-daemon with build users needs root"),
]


@pytest.fixture
def daemons() -> Iterator[list[RunningDaemon]]:
    started: list[RunningDaemon] = []
    yield started
    for daemon in started:
        daemon.stop()


def _user_setup(
    folder: Path, user: OtherUser, host: LoopbackHost
) -> tuple[Path, Path, dict[str, str]]:
    """configs/ naming the loopback host (its key a copy the user owns), a state folder and a
    cache the user owns: (configs, state, environment)."""
    configs = folder / "configs"
    shutil.copytree(REPO / "configs", configs)
    (folder / "patches").mkdir()
    key = folder / "client_key"
    shutil.copy(host.client_key, key)
    hosts = configs / "hosts.toml"
    hosts.write_text(hosts.read_text() + host.hosts_entry(key=key))
    for name in ("state", "cache"):
        (folder / name).mkdir()
    for path in [key, folder / "state", folder / "cache"]:
        os.chown(path, user.uid, user.gid)
    for path in [configs, *configs.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return configs, folder / "state", {"XDG_CACHE_HOME": str(folder / "cache")}


TWO_TARGETS = """{{
  outputs = {{ self }}: let
    mk = name: derivation {{
      inherit name; system = "{system}"; builder = "/bin/sh";
      args = [ "-c" "echo {nonce} > $out" ];
    }};
  in {{
    packages.{system}.onnxruntime-cpu = mk "standin-matrix-cpu";
    packages.{system}.onnxruntime-cuda-dyn = mk "standin-matrix-cuda-dyn";
  }};
}}
"""


def _two_target_flake(flake: Path, user: OtherUser) -> Path:
    """A flake offering the cpu and cuda-dyn flavours' attributes (trivial derivations)."""
    flake.mkdir()
    text = TWO_TARGETS.format(system=host_platform(), nonce=uuid.uuid4().hex)
    (flake / "flake.nix").write_text(text)
    for path in (flake, flake / "flake.nix"):
        os.chown(path, user.uid, user.gid)
    return flake


def _as_user(
    user: OtherUser, daemon: RunningDaemon, folder: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    configs, state = folder / "configs", folder / "state"
    env = daemon.client_env(folder / "cache")
    return user.workbench("--config", str(configs), "--state-dir", str(state), *args, env=env)


def test_an_untrusted_user_is_told_the_daemon_ignores_builders_and_what_to_add(
    other_user: OtherUser,  # noqa: F811
    shared_tmp: Path,  # noqa: F811
    loopback_host: LoopbackHost,
    daemons: list[RunningDaemon],
) -> None:
    daemon = start_daemon(shared_tmp / "daemon", trusted_users="root")
    daemons.append(daemon)
    _user_setup(shared_tmp, other_user, loopback_host)
    conf = daemon.conf_dir / "nix.conf"

    doctor = _as_user(other_user, daemon, shared_tmp, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stderr
    store = json.loads(doctor.stdout)["nix_store"]
    assert store["user"] == other_user.name
    assert store["via_daemon"] and store["socket"] == str(daemon.socket)
    assert store["trusted"] is False, store
    assert "dropped a restricted setting" in store["trust_evidence"]
    assert store["trusted_users"] == ["root"] and not store["trusted_by_conf"]
    assert store["trust_line"] == f"trusted-users = root {other_user.name}"
    assert any(line.startswith("--builders: ignored") for line in store["meaning"])
    # The TUI's first screen shows this line (the recorded host's snapshot: recorded_daemon).
    assert store["status_line"].startswith(
        f"Nix  daemon: {other_user.name} NOT trusted → --builders ignored, all builds here "
        "(the daemon has no builders) · `workbench doctor` says how to trust · socket "
        f"{daemon.socket}"
    ), store["status_line"]
    # The daemon's log agrees: it served this user, untrusted (root would read "(trusted)").
    assert f"user {other_user.name}" in daemon.log.read_text()
    assert f"user {other_user.name} (trusted)" not in daemon.log.read_text()

    text = _as_user(other_user, daemon, shared_tmp, "doctor")
    assert f"{other_user.name}: not trusted" in text.stdout, text.stdout
    assert f"add to {conf}: trusted-users = root {other_user.name}" in text.stdout

    hosts = _as_user(other_user, daemon, shared_tmp, "hosts", "--json")
    document = json.loads(hosts.stdout)
    (row,) = document["hosts_under_daemon"]
    assert row["name"] == "remote" and row["daemon_builds_there"] is False
    assert "is not trusted: the daemon ignores --builders" in row["why"]
    fixes = {fix["where"].split(" ")[0]: fix["lines"] for fix in row["fixes"]}
    assert fixes[str(conf)] == [f"trusted-users = root {other_user.name}"]
    machines = fixes[str(daemon.conf_dir / "machines")]
    assert machines[0].startswith("ssh-ng://root@workbench-remote?remote-store=")
    assert fixes["/root/.ssh/config"][:3] == [
        "Host workbench-remote",
        "  HostName 127.0.0.1",
        f"  Port {loopback_host.port}",
    ]
    assert row["daemon_reaches_it"] == "not checked"  # only root can ask as root
    assert "this matrix build would build everything on this machine" in document["daemon_warning"]
    listed = _as_user(other_user, daemon, shared_tmp, "hosts")
    assert "remote: the daemon will NOT build there" in listed.stdout, listed.stdout
    assert "Host workbench-remote" in listed.stdout
    # A matrix build says it before it starts, with the same lines, and Nix's plan.
    flake = _two_target_flake(shared_tmp / "flake", other_user)
    matrix = _as_user(other_user, daemon, shared_tmp, "build", "cpu", "cuda-dyn", "-C",
                      str(flake), "--dry-run")  # fmt: skip
    assert matrix.returncode == 0, matrix.stderr
    assert "workbench: warning: the nix-daemon builds this, not `nix build`:" in matrix.stderr
    assert "this matrix build would build everything on this machine" in matrix.stderr
    assert f"      trusted-users = root {other_user.name}" in matrix.stderr
    assert "# Nix's plan: 2 to build (none built here before: no time known), 0 to fetch" in (
        matrix.stderr
    )


def test_a_trusted_user_is_told_the_daemon_takes_builders_but_reaches_them_as_root(
    other_user: OtherUser,  # noqa: F811
    shared_tmp: Path,  # noqa: F811
    loopback_host: LoopbackHost,
    daemons: list[RunningDaemon],
) -> None:
    daemon = start_daemon(shared_tmp / "daemon", trusted_users=f"root {other_user.name}")
    daemons.append(daemon)
    _user_setup(shared_tmp, other_user, loopback_host)

    doctor = _as_user(other_user, daemon, shared_tmp, "doctor", "--json")
    store = json.loads(doctor.stdout)["nix_store"]
    assert store["trusted"] is True and store["trusted_by_conf"], store
    assert store["trust_line"] is None
    assert f"user {other_user.name} (trusted)" in daemon.log.read_text()
    assert any("as root, with root's ~/.ssh" in line for line in store["meaning"])
    assert store["status_line"].startswith(
        f"Nix  daemon: {other_user.name} trusted → --builders used, reached by the daemon as root"
    ), store["status_line"]

    hosts = _as_user(other_user, daemon, shared_tmp, "hosts", "--json")
    document = json.loads(hosts.stdout)
    (row,) = document["hosts_under_daemon"]
    assert row["daemon_builds_there"] is None  # depends on root reaching it, not asked here
    assert row["daemon_reaches_it"] == "not checked"
    assert "as root: nix store ping --store 'ssh-ng://root@workbench-remote" in row["reach_detail"]
    assert [fix["lines"][0] for fix in row["fixes"]] == [
        "Host workbench-remote",
        f"workbench-remote {loopback_host.host_public_key}",
    ]
    assert document["daemon_warning"] is None


def _hosts_as_root(configs: Path, state: Path, daemon: RunningDaemon, cache: Path) -> dict:
    env = {**os.environ, **daemon.client_env(cache)}
    env.pop("NIX_SSHOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "workbench", "--config", str(configs), "--state-dir", str(state),
         "hosts", "--json"],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    return json.loads(done.stdout)


def test_root_learns_whether_the_daemon_reaches_the_host_and_the_lines_that_make_it(
    hosts_config: Path,
    loopback_host: LoopbackHost,
    tmp_path: Path,
    daemons: list[RunningDaemon],
) -> None:
    # The daemon as systems start it: no ssh config of the workbench's. Root is trusted.
    bare = start_daemon(tmp_path / "bare")
    daemons.append(bare)
    document = _hosts_as_root(hosts_config, tmp_path / "state", bare, tmp_path / "cache")
    (row,) = document["hosts_under_daemon"]
    assert row["daemon_reaches_it"] == "no", row
    assert "workbench-remote" in row["reach_detail"], row  # ssh cannot resolve the alias
    assert row["daemon_builds_there"] is False
    assert document["daemon_warning"] is not None
    block = next(fix["lines"] for fix in row["fixes"] if fix["lines"][0].startswith("Host "))
    known = next(fix["lines"] for fix in row["fixes"] if fix["where"].startswith("/root/.ssh/kn"))
    # Give a daemon exactly those lines (in a file its NIX_SSHOPTS names, not root's ~/.ssh).
    (tmp_path / "known_hosts").write_text("\n".join(known) + "\n")
    ssh_config = tmp_path / "daemon_ssh_config"
    ssh_config.write_text(
        "\n".join([*block, f"  UserKnownHostsFile {tmp_path / 'known_hosts'}"]) + "\n"
    )
    configured = start_daemon(tmp_path / "configured", NIX_SSHOPTS=f"-F {ssh_config}")
    daemons.append(configured)
    document = _hosts_as_root(hosts_config, tmp_path / "state", configured, tmp_path / "cache")
    (row,) = document["hosts_under_daemon"]
    assert row["daemon_reaches_it"] == "yes", row
    assert row["daemon_builds_there"] is True and row["fixes"] == []
    assert document["daemon_warning"] is None

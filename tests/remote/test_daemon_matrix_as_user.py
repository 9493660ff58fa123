"""A matrix build through a real nix-daemon by a user it does not trust, end to end.

The daemon (tests/nix_daemon_testing.py: its own nix.conf, machines file and socket, build users
nixbld*) builds with ITS builders: its machines file names the loopback host
(tests/loopback_sshd.py: real sshd on 127.0.0.1, a second store behind it), reached as root with
the daemon's own ssh config (NIX_SSHOPTS=-F, the stand-in for root's ~/.ssh/config: no system
file is read or written). The user's hosts.toml names the same host; the user's `--builders`
is dropped by the daemon (untrusted), so what reaches the host is the daemon's doing.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from loopback_sshd import LoopbackHost
from nix_daemon_testing import RunningDaemon, start_daemon
from second_user import OtherUser, other_user, shared_tmp  # noqa: F401 - the fixtures
from test_matrix_build import BUILDING, FAILING, TARGETS, held_builds, standin_variant_flake

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.nix,
    pytest.mark.skipif(shutil.which("nix-daemon") is None, reason="needs Debian's nix-bin"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a nix-daemon with build users needs root"),
]


def _daemon_with_the_host_as_its_builder(folder: Path, host: LoopbackHost) -> RunningDaemon:
    """A daemon trusting root only whose machines file names the loopback host, reached as
    root with the daemon's ssh config (alias, port, root's key, the host's key)."""
    known = folder / "root_known_hosts"
    known.write_text(f"workbench-remote {host.host_public_key}\n")
    ssh_config = folder / "root_ssh_config"
    ssh_config.write_text(
        "Host workbench-remote\n"
        "  HostName 127.0.0.1\n"
        f"  Port {host.port}\n"
        f"  IdentityFile {host.client_key}\n"
        "  IdentitiesOnly yes\n"
        "  HostKeyAlias workbench-remote\n"
        f"  UserKnownHostsFile {known}\n"
    )
    machine = (
        f"ssh-ng://root@workbench-remote?remote-store=local?root={host.remote_store_root} "
        f"x86_64-linux {host.client_key} 1 1 big-parallel - -\n"
    )
    return start_daemon(
        folder / "daemon", trusted_users="root", machines=machine, NIX_SSHOPTS=f"-F {ssh_config}"
    )


def _user_configs(folder: Path, user: OtherUser, host: LoopbackHost, *names: str) -> Path:
    """configs/ whose hosts.toml names the loopback host under each of `names`, with a key the
    user owns (the user's hosts all work: what decides is the daemon)."""
    configs = folder / "configs"
    shutil.copytree(REPO / "configs", configs)
    key = folder / "user_key"
    shutil.copy(host.client_key, key)
    os.chown(key, user.uid, user.gid)
    hosts = configs / "hosts.toml"
    hosts.write_text(hosts.read_text() + "".join(host.hosts_entry(name, key=key) for name in names))
    for path in [configs, *configs.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return configs


def _matrix_as_user(
    folder: Path,
    user: OtherUser,
    host: LoopbackHost,
    daemon: RunningDaemon,
    names: tuple[str, ...],
    *more: str,
    hold: Path | None = None,
) -> tuple[subprocess.CompletedProcess[str], Callable[..., subprocess.CompletedProcess[str]]]:
    """`workbench build --match "cpu avx" MORE` of the stand-in variants (held on `hold`), as
    the user, through the daemon: (the command, a runner of further commands as the user)."""
    configs = _user_configs(folder, user, host, *names)
    flake = standin_variant_flake(folder / "flake", seconds=2, hold=hold)
    state, cache = folder / "state", folder / "xdg"
    state.mkdir()
    cache.mkdir()
    for path in [flake, *flake.rglob("*"), state, cache]:
        os.chown(path, user.uid, user.gid)

    def as_user(*args: str) -> subprocess.CompletedProcess[str]:
        return user.workbench("--config", str(configs), "--state-dir", str(state), *args,
                              env=daemon.client_env(cache))  # fmt: skip

    return as_user("build", "--match", "cpu avx", "-C", str(flake), *more), as_user


def _last_build(state: Path) -> tuple[dict[str, tuple], str]:
    """The latest build's per-target rows (name -> (host, outcome)) and its argv."""
    with sqlite3.connect(state / "history.sqlite3") as db:
        build_id, argv = db.execute("SELECT id, argv FROM builds ORDER BY id DESC").fetchone()
        found = db.execute(
            "SELECT name, host, outcome FROM build_targets WHERE build_id = ?", (build_id,)
        ).fetchall()
    return {row[0]: row[1:] for row in found}, argv


def _views(stderr: str) -> list[str]:
    """Each per-host view the follower said, in order."""
    return [view.split("\nworkbench: ")[0] for view in stderr.split("workbench: per host:\n")[1:]]


def test_an_untrusted_users_matrix_build_goes_to_the_daemons_builders(
    other_user: OtherUser,  # noqa: F811
    shared_tmp: Path,  # noqa: F811
    loopback_host: LoopbackHost,
) -> None:
    daemon = _daemon_with_the_host_as_its_builder(shared_tmp, loopback_host)
    hold = held_builds(loopback_host, shared_tmp / "hold")
    try:
        # hosts.toml names two hosts; the daemon's machines file the first only.
        started, as_user = _matrix_as_user(shared_tmp, other_user, loopback_host, daemon,
                                           ("remote", "elsewhere"), "-d", hold=hold)  # fmt: skip
        assert started.returncode == 0, started.stderr
        build_id = int(re.findall(r"build #(\d+)", started.stderr)[0])
        polls = _watch_until_the_remote_builds(as_user, shared_tmp / "state", build_id)
    finally:
        (hold / "release").touch()
    try:
        followed = as_user("attach", str(build_id))  # to its end: the rows, the out-links
    finally:
        daemon.stop()
    assert followed.returncode == 1, followed.stderr  # the bf16 target failed, the rest built
    name = other_user.name
    before = started.stderr
    assert (
        f"workbench: --builders not passed: the nix-daemon does not trust {name} and would "
        f"drop it; it builds with its own builders ({daemon.conf_dir / 'machines'} (the "
        "default)): remote\n"
    ) in before, before
    assert "remote: the daemon builds there if root reaches it: the daemon's own builders" in before
    assert "elsewhere: the daemon will NOT build there" in before
    assert "build everything on this machine" not in before
    state = shared_tmp / "state"
    rows, argv = _last_build(state)
    assert "--builders" not in argv and "user_key" not in argv, argv
    assert rows[FAILING][1] == "failed"
    built = {n: row for n, row in rows.items() if n != FAILING}
    assert {row[1] for row in built.values()} == {"built"}, rows
    assert {row[0] for row in built.values()} == {"local", "remote"}, rows
    # What the remote built it built in its own store, reached by the daemon as root.
    store = loopback_host.remote_store_root / "nix" / "store"
    remote_built = [n.rsplit("-", 1)[1] for n, row in built.items() if row[0] == "remote"]
    assert all(any(p.name.endswith(f"-{d}") for p in store.iterdir()) for d in remote_built)
    log = daemon.log.read_text()
    assert f"user {name}" in log and f"user {name} (trusted)" not in log
    # The host the daemon does not use is never one of the build's hosts.
    views = [*polls, *_views(followed.stderr)]
    assert not [view for view in views if "elsewhere" in view], views


def _watch_until_the_remote_builds(
    as_user: Callable[..., subprocess.CompletedProcess[str]], state: Path, build_id: int
) -> list[str]:
    """`hosts watch ID --once` as the user until the daemon's builder builds one of the held
    derivations. Each time it names the builder, the build's log (read after the watch: it
    only grows) already says Nix started one of this build's derivations there; it is never
    named before. The views seen."""
    log = state / "builds" / str(build_id) / "build.log"
    started_there = '","ssh-ng://root@workbench-remote?'
    views: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        view = as_user("hosts", "watch", str(build_id), "--once").stdout
        views.append(view)
        if re.search(r"^remote ", view, re.MULTILINE):
            assert started_there in log.read_text(), view
        found = re.search(r"^remote +1 building: (\S+)$", view, re.MULTILINE)
        if found and found.group(1) in BUILDING:
            return views
        time.sleep(0.2)
    raise AssertionError(f"the daemon's builder never built a held derivation: {views[-1:]}")


def test_an_untrusted_users_matrix_build_is_said_to_stay_here_before_it_does(
    other_user: OtherUser,  # noqa: F811
    shared_tmp: Path,  # noqa: F811
    loopback_host: LoopbackHost,
) -> None:
    """A daemon with no builders: the user's hosts are dropped, and the build says so before
    it starts; then everything builds on this machine, as it said."""
    daemon = start_daemon(shared_tmp / "daemon", trusted_users="root")
    try:
        done, _ = _matrix_as_user(shared_tmp, other_user, loopback_host, daemon, ("remote",))
    finally:
        daemon.stop()
    state = shared_tmp / "state"
    assert done.returncode == 1, done.stderr
    before = done.stderr.split("workbench: per host:")[0]
    assert (
        "  warning: the nix-daemon will build on none of the 1 hosts of hosts.toml: this "
        "matrix build would build everything on this machine\n"
    ) in before, before
    assert f"      trusted-users = root {other_user.name}\n" in before
    assert "it builds with its own builders" in before and "none, so everything builds" in before
    rows, _ = _last_build(state)
    assert set(rows) == set(TARGETS)
    assert {row[0] for row in rows.values()} == {"local"}, rows
    assert not [view for view in _views(done.stderr) if "remote" in view]

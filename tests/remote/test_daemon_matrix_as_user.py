"""A matrix build through a real nix-daemon by a user it does not trust, end to end.

The daemon (tests/nix_daemon_testing.py: its own nix.conf, machines file and socket, build users
nixbld*) builds with ITS builders: its machines file names the loopback host
(tests/loopback_sshd.py: real sshd on 127.0.0.1, a second store behind it), reached as root with
the daemon's own ssh config (NIX_SSHOPTS=-F, the stand-in for root's ~/.ssh/config: no system
file is read or written). The user's hosts.toml names the same host; the user's `--builders`
is dropped by the daemon (untrusted), so what reaches the host is the daemon's doing.

The targets are stand-ins named like variants no other test builds (a Nix target's lock is the
host's, whichever user or state directory builds it): three per test, the bf16 one failing as
a compile error would, the others held on a file where the test must catch them building.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from loopback_sshd import LoopbackHost
from needed_tools import needs
from nix_daemon_testing import RunningDaemon, start_daemon
from second_user import OtherUser, other_user, shared_tmp  # noqa: F401 - the fixtures
from test_matrix_build import held_builds

REPO = Path(__file__).resolve().parents[2]
HOLD_AT_MOST_S = 120  # a held build waits this long at most for its release


def _variant_flake(directory: Path, words: str, hold: Path | None = None) -> Path:
    """Stand-in packages for the variants `onnxruntime-python313-cuda12_9-WORDS-{avx512,
    avx512vnni,avx512bf16}` (a fresh stamp: nothing of an earlier run is in the store); the
    bf16 one fails, the others wait for `hold`/release (or 2 s) and write their output. Each
    derivation is named by its variant's last two words ("sm75-avx512")."""
    stamp = uuid.uuid4().hex
    directory.mkdir()
    wait = "/bin/sleep 2"
    if hold is not None:
        wait = (
            f"i=0; while [ ! -e {hold}/release ] && [ $i -lt {HOLD_AT_MOST_S * 5} ]; "
            "do /bin/sleep 0.2; i=$((i+1)); done"
        )
    attrs = {f"onnxruntime-python313-cuda12_9-{words}-{isa}": f"{words}-{isa}"
             for isa in ("avx512", "avx512vnni", "avx512bf16")}  # fmt: skip
    packages = "\n".join(
        f'      {attr} = mk "{name}" "echo compiling {name}; {wait}; echo {name} > $out";'
        if not name.endswith("bf16")
        else f'      {attr} = mk "{name}" "echo compiling {name}; '
        f"echo 'error: bf16_kernels.cc:12: no such intrinsic' >&2; exit 1\";"
        for attr, name in attrs.items()
    )
    (directory / "flake.nix").write_text(
        f"""{{{{
  outputs = {{{{ self }}}}: let
    mk = name: script: derivation {{{{
      inherit name; system = "x86_64-linux"; builder = "/bin/sh"; args = [ "-c" script ];
      stamp = "{stamp}";
    }}}};
  in {{{{
    packages.x86_64-linux = {{{{
{packages}
    }}}};
  }}}};
}}}}
""".replace("{{", "{").replace("}}", "}")
    )
    return directory


pytestmark = [
    pytest.mark.slow,
    pytest.mark.nix,
    needs("nix-daemon", debian="nix-bin"),
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
    words: str,
    *more: str,
    hold: Path | None = None,
) -> tuple[subprocess.CompletedProcess[str], Callable[..., subprocess.CompletedProcess[str]]]:
    """`workbench build --match "WORDS avx512" MORE` of the stand-in variants (held on `hold`),
    as the user, through the daemon: (the command, a runner of further commands as the user)."""
    configs = _user_configs(folder, user, host, *names)
    flake = _variant_flake(folder / "flake", words, hold=hold)
    state, cache = folder / "state", folder / "xdg"
    state.mkdir()
    cache.mkdir()
    for path in [flake, *flake.rglob("*"), state, cache]:
        os.chown(path, user.uid, user.gid)

    def as_user(*args: str) -> subprocess.CompletedProcess[str]:
        return user.workbench("--config", str(configs), "--state-dir", str(state), *args,
                              env=daemon.client_env(cache))  # fmt: skip

    match = f"{words} avx512"  # the three variants of the flake, not WORDS-avx2
    return as_user("build", "--match", match, "-C", str(flake), *more), as_user


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
        hosts = ("remote", "elsewhere")
        started, as_user = _matrix_as_user(
            shared_tmp, other_user, loopback_host, daemon, hosts, "sm75", "-d", hold=hold
        )
        assert started.returncode == 0, started.stderr
        build_id = int(re.findall(r"build #(\d+)", started.stderr)[0])
        try:
            polls = _watch_until_the_remote_builds(as_user, shared_tmp / "state", build_id)
        finally:
            (hold / "release").touch()
        # Watched to its end (the watch then works out and stores the per-target rows).
        followed = as_user("hosts", "watch", str(build_id))
    finally:
        # A build a failed test left running ends with its daemon (and its targets' locks go).
        daemon.stop()
    # It exits as attach of the failed build does (bf16 failed; the rest built).
    assert followed.returncode == 1, followed.stderr
    assert f"build #{build_id} (matrix-3): failed\n" in followed.stdout
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
    failing = "onnxruntime-python313-cuda12_9-sm75-avx512bf16"
    assert set(rows) == {failing, failing.replace("bf16", ""), failing.replace("bf16", "vnni")}
    assert rows[failing][1] == "failed"
    built = {n: row for n, row in rows.items() if n != failing}
    assert {row[1] for row in built.values()} == {"built"}, rows
    assert {row[0] for row in built.values()} == {"local", "remote"}, rows
    # What the remote built it built in its own store, reached by the daemon as root.
    store = loopback_host.remote_store_root / "nix" / "store"
    remote_built = [n.split("cuda12_9-")[1] for n, row in built.items() if row[0] == "remote"]
    assert all(any(p.name.endswith(f"-{d}") for p in store.iterdir()) for d in remote_built)
    log = daemon.log.read_text()
    assert f"user {name}" in log and f"user {name} (trusted)" not in log
    # The host the daemon does not use is never one of the build's hosts.
    views = [*polls, followed.stdout]
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
        if found and found.group(1) in ("sm75-avx512", "sm75-avx512vnni"):
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
        done, _ = _matrix_as_user(shared_tmp, other_user, loopback_host, daemon, ("remote",),
                                  "sm100")  # fmt: skip
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
    assert len(rows) == 3 and all("-cuda12_9-sm100-" in name for name in rows), rows
    assert {row[0] for row in rows.values()} == {"local"}, rows
    assert not [view for view in _views(done.stderr) if "remote" in view]

"""A build through a real nix-daemon by a user who is not root, while another user's build runs
through the same daemon: the live view and the census count this build's `nixbld*` builders
only, and `stop` ends this build's builders and leaves the other user's running.

As a user other than root the workbench cannot read a `nixbld*` process's environment or
working directory (both need ptrace access), only its arguments: a compiler's absolute source
path names its derivation's build directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from monitor.cxx_project import needs_cxx_tools, write_project
from needed_tools import needs
from nix_daemon_testing import (
    RunningDaemon,
    untrusting_daemon,  # noqa: F401 - the fixture `daemon`
)
from second_user import OtherUser, other_user, shared_tmp  # noqa: F401 - the fixtures
from supervised import REPO, build_id_from
from test_supervision_nix import BUILDER, DERIVATION, FLAKE, _cpu_layout_lines, renew

from workbench.planning.launch import host_platform

OTHER = "other-users-compile"
OTHER_FLAKE = """{{
  outputs = {{ self }}: {{
    packages.{system}.default = derivation {{
      name = "{name}"; system = "{system}"; builder = "/bin/sh"; args = [ ./other.sh ];
      nonce = builtins.readFile ./nonce; PATH = "/usr/bin:/bin";
    }};
  }};
}}
"""
# Compiles one file again and again, by its absolute path in the build directory, as a long
# build of another user's does; it never succeeds, so it runs until its client is ended.
OTHER_BUILDER = """mkdir src
echo 'int f() { return 1; }' > src/x.cc
i=0
while [ $i -lt 2000 ]; do /usr/bin/g++ -O2 -c "$PWD/src/x.cc" -o x.o; i=$((i+1)); done
exit 1
"""

pytestmark = [
    needs_cxx_tools,
    pytest.mark.nix,
    pytest.mark.slow,
    needs("nix-daemon", debian="nix-bin"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a nix-daemon with build users needs root"),
]


def _wait(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what} never came within {timeout} s"
        time.sleep(0.2)


def _builders_of(name: str) -> list[psutil.Process]:
    """Processes whose arguments name `name`'s build directory (as any user may read them)."""
    found = []
    for process in psutil.process_iter(["cmdline", "username"]):
        cmdline = process.info["cmdline"] or []
        if any(f"/nix-build-{name}.drv-" in arg for arg in cmdline[1:]):
            found.append(process)
    return found


def _other_shell() -> list[psutil.Process]:
    """The other user's builder itself (`/bin/sh /nix/store/HASH-other.sh`): it lives as long
    as that build, between its compiles. Not a child it has just forked for a compile and that
    has not exec'd g++ yet: for that moment the child's arguments are its shell's (the fresh-
    clone run beside two CPU hogs found two)."""
    shells = [
        process
        for process in psutil.process_iter(["cmdline", "ppid"])
        if any(arg.endswith("-other.sh") for arg in (process.info["cmdline"] or [])[1:])
    ]
    pids = {process.pid for process in shells}
    return [process for process in shells if process.info["ppid"] not in pids]


@pytest.fixture
def other_build(shared_tmp: Path, daemon: RunningDaemon) -> Iterator[subprocess.Popen[str]]:  # noqa: F811
    """Root's build of OTHER through the same daemon, compiling by the time it is yielded."""
    flake = shared_tmp / "other"
    flake.mkdir()
    (flake / "flake.nix").write_text(OTHER_FLAKE.format(system=host_platform(), name=OTHER))
    (flake / "other.sh").write_text(OTHER_BUILDER)
    renew(flake)
    env = {**os.environ, **daemon.client_env(shared_tmp / "root-cache")}
    client = subprocess.Popen(
        ["nix", "--extra-experimental-features", "nix-command flakes", "build", "--no-link",
         "--no-write-lock-file", ".#default"],
        cwd=flake, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        _wait("the other user's compiler", lambda: _builders_of(OTHER), 120)
        yield client
    finally:
        client.kill()
        client.wait(timeout=30)


def _our_flake(folder: Path, user: OtherUser) -> Path:
    flake = folder / "flake"
    write_project(flake / "project")
    (flake / "builder.sh").write_text(BUILDER + _cpu_layout_lines())
    (flake / "flake.nix").write_text(FLAKE.format(system=host_platform(), name=DERIVATION))
    shutil.copytree(REPO / "configs", flake / "configs")
    renew(flake)
    for path in [flake, *flake.rglob("*")]:
        os.chown(path, user.uid, user.gid)
    return flake


def _as_user(user: OtherUser, folder: Path, daemon: RunningDaemon, *args: str) -> Any:
    (folder / "state").mkdir(exist_ok=True)
    (folder / "cache").mkdir(exist_ok=True)
    for name in ("state", "cache"):
        os.chown(folder / name, user.uid, user.gid)
    return user.workbench(
        "--config", str(folder / "flake" / "configs"), "--state-dir", str(folder / "state"),
        *args, env=daemon.client_env(folder / "cache"),
    )  # fmt: skip


def _live_jobs(user: OtherUser, folder: Path, daemon: RunningDaemon, build_id: int) -> list:
    status = _as_user(user, folder, daemon, "status", "--json")
    for record in json.loads(status.stdout)["running"]:
        if record["id"] == build_id:
            return (record.get("live") or {}).get("jobs", [])
    return []


def test_a_users_daemon_build_counts_and_stops_only_its_own_builders(
    other_user: OtherUser,  # noqa: F811
    shared_tmp: Path,  # noqa: F811
    daemon: RunningDaemon,
    other_build: subprocess.Popen[str],
) -> None:
    flake = _our_flake(shared_tmp, other_user)
    (other_shell,) = _other_shell()
    assert other_shell.username().startswith("nixbld")
    started = _as_user(other_user, shared_tmp, daemon, "build", "cpu", "-C", str(flake),
                       "--jobs", "2", "--detach")  # fmt: skip
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    seen: list[dict] = []

    def ours_compiling() -> list[dict]:
        jobs = _live_jobs(other_user, shared_tmp, daemon, build_id)
        seen.extend(jobs)
        return [j for j in jobs if j["kind"] == "compiler" and j["derivation"] == DERIVATION]

    ours = _wait("this build's nixbld compiler in its live view", ours_compiling, 240)
    assert all((job["user"] or "").startswith("nixbld") for job in ours), ours
    # Another user's compiler, through the same daemon, at the same time: never this build's.
    assert other_shell.is_running(), "the other user's build ended"
    assert not [j for j in seen if j["derivation"] != DERIVATION or "x.cc" in (j["file"] or "")]
    # Stopped by its user: this build's builders end, the other user's go on.
    stopped = _as_user(other_user, shared_tmp, daemon, "stop", str(build_id), "--grace", "5")
    assert stopped.returncode == 0, stopped.stderr
    _wait("this build's builders to end", lambda: not _builders_of(DERIVATION), 60)
    assert other_build.poll() is None and other_shell.is_running()
    _wait("the other user's next compile", lambda: _builders_of(OTHER), 60)
    history = json.loads(_as_user(other_user, shared_tmp, daemon, "history", "--json").stdout)
    record = next(b for b in history["builds"] if b["id"] == build_id)
    assert record["state"] == "stopped", record
    census = (record.get("measurements") or {}).get("processes_seen", [])
    assert not [g for g in census if OTHER in (g.get("derivations") or [])], census
    assert [g for g in census if g["kind"] == "compiler" and g["derivations"] == [DERIVATION]]

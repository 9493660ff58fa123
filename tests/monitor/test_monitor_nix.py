"""Finding a Nix build's compilers: single-user Nix (builders descend from nix-build) and a
nix-daemon that this test starts with its own socket (builders are the daemon's, as nixbld*)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from cxx_project import started
from nix_testing import NIX_CONFIG_BUILD_USERS, ensure_build_users

from workbench.monitor import ProcessSample, Sampler
from workbench.monitor.discovery import (
    HostBuildProcess,
    find_host_build_processes,
    is_nixbld_user,
)
from workbench.monitor.procfs import uid_of, user_name
from workbench.samples.sample_project import HEAVY

pytestmark = [
    pytest.mark.nix,
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("nix-build") is None or shutil.which("nix-daemon") is None,
        reason="needs Debian's nix-bin",
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="single-user Nix and nix-daemon need root here"),
]


# The builder compiles a template-heavy unit with the machine's g++ (no nixpkgs here), so the
# compiler runs a second or two: long enough to be sampled.
EXPRESSION = """{ salt, name, source }:
derivation {
  inherit name salt source;
  system = builtins.currentSystem;
  builder = "/bin/sh";
  args = [ "-c" ''
    printf '%s' "$source" > unit.cc
    echo "[1/2] Building CXX object unit.cc.o"
    /usr/bin/g++ -O2 -c unit.cc -o unit.o
    echo "[2/2] Linking"
    /bin/sleep 0.5
    echo ok > $out
  '' ];
}
"""
IDLE_EXPRESSION = """{ salt, name }:
derivation {
  inherit name salt;
  system = builtins.currentSystem;
  builder = "/bin/sh";
  args = [ "-c" "/bin/sleep 4; echo ok > $out" ];
}
"""


def _env(socket: Path | None) -> dict[str, str]:
    ensure_build_users()  # these tests are about builders running as nixbld*
    env = dict(os.environ)
    env["NIX_CONFIG"] = NIX_CONFIG_BUILD_USERS
    env.pop("NIX_REMOTE", None)
    if socket is not None:
        env["NIX_REMOTE"] = "daemon"
        env["NIX_DAEMON_SOCKET_PATH"] = str(socket)
    return env


def _nix_build(expression: Path, name: str, socket: Path | None, **extra: str) -> list[str]:
    argv = ["nix-build", str(expression), "--no-out-link", "--log-format", "internal-json"]
    for key, value in {"salt": uuid.uuid4().hex, "name": name, **extra}.items():
        argv += ["--argstr", key, value]
    return argv


def _sample_until_exit(
    sampler: Sampler, client: subprocess.Popen[str], each: Callable[[], None] = lambda: None
) -> list[ProcessSample]:
    seen: list[ProcessSample] = []
    deadline = time.monotonic() + 120
    while client.poll() is None:
        each()
        for process in sampler.sample().processes:
            seen.append(process)
            if process.tool in ("g++", "cc1plus") and process.pid not in _USERS:
                uid = uid_of(process.pid)
                if uid is not None:
                    _USERS[process.pid] = user_name(uid)
        assert time.monotonic() < deadline, "nix build did not finish"
        time.sleep(0.2)
    return seen


_USERS: dict[int, str] = {}


@pytest.fixture
def expressions(tmp_path: Path) -> tuple[Path, Path]:
    compile_expression = tmp_path / "compile.nix"
    compile_expression.write_text(EXPRESSION)
    idle_expression = tmp_path / "idle.nix"
    idle_expression.write_text(IDLE_EXPRESSION)
    return compile_expression, idle_expression


def _source() -> str:
    return HEAVY.format(n=1, depth=6)


def _kill_tree(root: int) -> None:
    """Kill a process we started and everything under it, each by its PID."""
    with contextlib.suppress(psutil.NoSuchProcess):
        tree = psutil.Process(root).children(recursive=True)
        os.kill(root, signal.SIGKILL)
        for child in tree:
            with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
                child.kill()


@pytest.fixture
def nix_daemon(tmp_path: Path) -> Iterator[Path]:
    """A nix-daemon of our own, listening on a socket in tmp_path; killed with its workers."""
    socket = tmp_path / "daemon.socket"
    env = _env(None)
    env["NIX_DAEMON_SOCKET_PATH"] = str(socket)
    log = (tmp_path / "daemon.log").open("w")
    daemon = subprocess.Popen(
        ["nix-daemon"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 20
        while not socket.exists():
            assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()
            assert time.monotonic() < deadline, "nix-daemon did not open its socket"
            time.sleep(0.05)
        yield socket
    finally:
        _kill_tree(daemon.pid)  # workers call setsid(): a group kill would miss them
        daemon.wait(timeout=10)
        log.close()


def test_single_user_nix_builder_is_found(expressions: tuple[Path, Path]) -> None:
    """Single-user Nix as root: the builder descends from nix-build (it runs as nixbld1)."""
    argv = _nix_build(expressions[0], "wb-monitor-single", None, source=_source())
    with started(
        argv, env=_env(None), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as client:
        with Sampler(client.pid) as sampler:
            seen = _sample_until_exit(sampler, client)
        stderr = client.stderr.read() if client.stderr else ""
        assert client.returncode == 0, stderr[-2000:]
    compilers = [p for p in seen if p.tool in ("g++", "cc1plus")]
    assert {p.tool for p in compilers} == {"g++", "cc1plus"}
    assert {p.file for p in compilers} == {"unit.cc"}
    assert all(p.kind == "compiler" and p.job_kind == "compiler" for p in compilers)
    assert any(p.tool == "nix-build" and p.kind == "nix" for p in seen)
    assert any(is_nixbld_user(_USERS[p.pid]) for p in compilers if p.pid in _USERS)


def test_daemon_builders_are_found_and_attributed(
    nix_daemon: Path, expressions: tuple[Path, Path]
) -> None:
    """Two clients build at once through one daemon; only our derivation's builder counts."""
    compile_expression, idle_expression = expressions
    ours = _nix_build(compile_expression, "wb-monitor-ours", nix_daemon, source=_source())
    theirs = _nix_build(idle_expression, "wb-monitor-theirs", nix_daemon)
    env = _env(nix_daemon)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "text": True, "env": env}
    with started(theirs, **quiet) as other, started(ours, **quiet) as client:
        during: list[HostBuildProcess] = []

        def scan_host() -> None:
            if not any(is_nixbld_user(process.user) for process in during):
                during[:] = find_host_build_processes(exclude={os.getpid()})

        with Sampler(client.pid, daemon=True, derivations=["wb-monitor-ours"]) as sampler:
            seen = _sample_until_exit(sampler, client, scan_host)
        assert client.returncode == 0, (client.stderr.read() if client.stderr else "")[-2000:]
        other.wait(timeout=60)
    compilers = [p for p in seen if p.tool in ("g++", "cc1plus")]
    assert {p.tool for p in compilers} == {"g++", "cc1plus"}
    assert {p.file for p in compilers} == {"unit.cc"}
    assert {p.derivation for p in compilers} == {"wb-monitor-ours"}
    users = {_USERS[p.pid] for p in compilers if p.pid in _USERS}
    assert users and all(is_nixbld_user(user) for user in users), users
    # The builder is not a descendant of our client: the daemon forked it.
    client_pids = {client.pid}
    assert all(p.ppid not in client_pids for p in compilers)
    # Nothing of the other client's build: its builder only sleeps, as another nixbld user.
    assert all(p.derivation in (None, "wb-monitor-ours") for p in seen)
    assert not any(p.tool == "sleep" and p.derivation != "wb-monitor-ours" for p in seen)
    # The host-wide scan (the preflight warning) sees both builds' builders.
    assert any(is_nixbld_user(process.user) for process in during)


def test_a_builder_sampled_before_its_derivation_is_known_is_named_from_its_environment(
    nix_daemon: Path, expressions: tuple[Path, Path]
) -> None:
    """The supervisor learns a build's derivations from the Nix log; a sample can come first
    (the builder starts as Nix logs its start). The builder is then named from its own
    environment, not shown as working for no derivation (CI saw `derivation: None`)."""
    compile_expression, _ = expressions
    name = f"wb-monitor-early-{uuid.uuid4().hex[:8]}"
    ours = _nix_build(compile_expression, name, nix_daemon, source=_source())
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE, "text": True}
    with started(ours, env=_env(nix_daemon), **quiet) as client:
        with Sampler(client.pid, daemon=True) as sampler:  # no derivation known yet
            seen = _sample_until_exit(sampler, client)
        assert client.returncode == 0, (client.stderr.read() if client.stderr else "")[-2000:]
    compilers = [p for p in seen if p.tool in ("g++", "cc1plus")]
    named = {p.derivation for p in compilers}
    # Ours, named; none for no derivation. Knowing no names yet, the sampler counts every
    # build on the host, so another test's compile running meanwhile (pytest -n 2: the remote
    # sampler's stand-in, "avx2") is there too, under its own name.
    assert name in named and None not in named, [(p.tool, p.derivation) for p in compilers]

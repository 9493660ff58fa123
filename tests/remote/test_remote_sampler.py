"""The sampler run on a build host over its one SSH connection (real sshd on 127.0.0.1).

The "remote" is this machine reached through the loopback sshd (tests/loopback_sshd.py); its
Nix build is stood in for by a real g++ of a slow unit running as a Nix build user (`nixbld*`,
held as Nix holds its builders' so that no other test's Nix build kills it), as a nix-daemon's
builder runs there (Debian's nix-bin creates those users). The workbench's
sampler is shipped over the session (no workbench on the remote's PATH), streams samples of
that compile, uses one SSH connection for all of them, and when it is killed on the remote
its host says "sampler gone" while the compile goes on.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from loopback_sshd import LoopbackHost, nix_env_for_hosts
from nix_testing import (
    NIX_CONFIG_BUILD_USERS,
    ensure_build_users,
    held_build_user,
    needs_nix,
    nix_env,
)

from workbench.remote.config import load_hosts
from workbench.remote.matrix_view import HostNow, host_lines
from workbench.remote.remote_sampler import FleetSampling, RemoteSampler, derivation_names
from workbench.remote.ssh import close_connection, prepare_ssh

pytestmark = [pytest.mark.slow, *needs_nix]

# A unit g++ takes minutes on: a constant evaluated by a long loop at compile time.
SLOW_UNIT = """
constexpr long spin() {
    long total = 0;
    for (long i = 0; i < 4000000000L; ++i) total += i % 7;
    return total;
}
constexpr long answer = spin();
long use() { return answer; }
"""


def _connections(host: LoopbackHost) -> int:
    """SSH connections sshd accepted so far (one line each in its log)."""
    return (host.directory / "sshd.log").read_text().count("Accepted publickey")


@pytest.fixture
def slow_compile() -> Iterator[subprocess.Popen[bytes]]:
    """A real g++ of the slow unit running as a Nix build user, the user held as Nix holds its
    builders' (any Nix build meanwhile, another test's, would kill it otherwise); killed at the
    end."""
    if shutil.which("g++") is None or shutil.which("runuser") is None:
        pytest.skip("g++ or runuser is missing (Debian: g++, util-linux)")
    if os.geteuid() != 0:
        pytest.skip("running a process as a Nix build user needs root")
    folder = Path(tempfile.mkdtemp(prefix="wb-remote-compile-"))
    folder.chmod(0o755)
    (folder / "slow_unit.cc").write_text(SLOW_UNIT)
    (folder / "slow_unit.cc").chmod(0o644)
    with held_build_user() as user:
        process = subprocess.Popen(
            [
                "runuser",
                "-u",
                user,
                "--",
                # The name a Nix builder's environment carries: what the sampler matches by.
                "env",
                f"name={SLOW_DERIVATION}",
                "g++",
                "-std=c++17",
                "-fconstexpr-loop-limit=2147483647",
                "-fconstexpr-ops-limit=4294967295",
                "-c",
                str(folder / "slow_unit.cc"),
                "-o",
                "/dev/null",
            ],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        yield process
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    shutil.rmtree(folder)


# The derivation the slow compile works for: the one the recorded matrix build (tests/tui/
# fixed_matrix.py) builds on its remote, so that its matrix screen counts the compile as its own.
SLOW_DERIVATION = "avx2"


def _wait(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def _compile_now(compile: subprocess.Popen[bytes]) -> str:
    """Whether the stand-in compile still runs, for a failure's message: a sampler that shows
    nothing compiling because the compile was ended is not the sampler's fault."""
    code = compile.poll()
    return "the compile still runs" if code is None else f"the compile ENDED (exit {code})"


def test_the_stand_in_compile_outlives_a_nix_build_with_build_users_meanwhile(
    slow_compile: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    """What the tests below stand on: Nix kills every process of the build user it takes, before
    and after its build, so a stand-in builder run as nixbld1 died whenever another test's Nix
    built meanwhile (pytest -n 2: a sampler then showed "nothing compiling" for good). Its
    user held as Nix holds its own, a real Nix build with build users takes another."""
    expression = tmp_path / "who.nix"
    expression.write_text(
        f'derivation {{ name = "wb-who-{uuid.uuid4().hex[:12]}"; system = "x86_64-linux"; '
        'builder = "/bin/sh"; args = [ "-c" "/usr/bin/id -un > $out" ]; }\n'
    )
    env = nix_env(tmp_path)
    env["NIX_CONFIG"] = NIX_CONFIG_BUILD_USERS
    built = subprocess.run(
        ["nix-build", "--no-out-link", str(expression)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    builder_user = Path(built.stdout.strip()).read_text().strip()
    assert builder_user.startswith("nixbld"), builder_user
    assert slow_compile.poll() is None, _compile_now(slow_compile)
    compile_users = {
        child.username() for child in psutil.Process(slow_compile.pid).children(recursive=True)
    }
    assert builder_user not in compile_users, (builder_user, compile_users)


def test_samples_of_a_remote_compile_stream_over_one_connection_and_a_killed_sampler_is_gone(
    hosts_config: Path,
    loopback_host: LoopbackHost,
    slow_compile: subprocess.Popen[bytes],
    tmp_path: Path,
) -> None:
    config = load_hosts(hosts_config)
    setup = prepare_ssh(config.hosts, tmp_path / "state")
    host = config.by_name("remote")
    assert host is not None
    sampler = RemoteSampler(setup, host)
    sampler.start()
    try:
        assert sampler.wait_started(30), sampler.line()
        assert sampler.via == "shipped"  # no workbench on the remote's PATH: the zip was piped
        assert sampler.psutil_imported is False  # the remote's python3 needs no psutil

        def compiling() -> bool:
            latest = sampler.latest
            return latest is not None and any(
                job.file is not None
                and job.file.endswith("slow_unit.cc")
                # Busy, but how busy depends on the machine's load (at load 10 on 2 cores a
                # process gets ~20 %): only that it runs is the sampler's to show.
                and job.cpu_percent > 0
                and job.rss > 1 << 20
                for job in latest.jobs
            )

        assert _wait(compiling, 60), f"{sampler.line()}; {_compile_now(slow_compile)}"
        first = sampler.samples
        assert _wait(lambda: sampler.samples >= first + 4, 60), "4 more samples never came"
        # The host line as a user reads it. (A CI run at load ~15 once caught a sample here
        # without the job, "nothing compiling", while g++ still ran; not reproduced beside 14
        # busy loops: the line is awaited, not taken from one moment.)
        assert _wait(lambda: sampler.line().startswith("compiling slow_unit.cc ("), 60), (
            f"{sampler.line()}; {_compile_now(slow_compile)}"
        )
        line = sampler.line()
        assert "% CPU, " in line, line
        assert "free [sampled via shipped]" in line
        # Many samples, one connection: the probe-less session shares the master's.
        assert sampler.samples >= 5 and _connections(loopback_host) == 1
        # The shipped code was removed from the remote once imported.
        assert not list(Path(tempfile.gettempdir()).glob("workbench-sampler-*"))

        # The sampler is killed on the remote: its host says so; the compile goes on.
        assert sampler.remote_pid is not None
        os.kill(sampler.remote_pid, signal.SIGKILL)
        assert _wait(lambda: bool(sampler.gone), 15), sampler.line()
        assert sampler.line().startswith("sampler gone: the session ended")
        assert slow_compile.poll() is None
        shown = host_lines(
            (HostNow("local", ()), HostNow("remote", ("avx2",))), {"remote": sampler.line()}
        )
        assert shown[1].startswith("remote         1 building: avx2; sampler gone: ")
    finally:
        sampler.stop()
        close_connection(setup, host)


def test_a_host_without_python_says_so_in_one_line(
    config_copy: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    path = config_copy / "hosts.toml"
    path.write_text(
        path.read_text()
        + loopback_host.hosts_entry("nonix", key=loopback_host.directory / "no_nix_key")
    )
    config = load_hosts(config_copy)
    setup = prepare_ssh(config.hosts, tmp_path / "state")
    fleet = FleetSampling.for_hosts(setup, list(config.hosts))
    try:
        sampler = fleet.samplers["nonix"]
        assert _wait(lambda: bool(sampler.error), 30), sampler.line()
        assert fleet.lines() == {
            "nonix": "not sampled: no workbench and no python3 on the PATH there; "
            "no Nix there to copy the workbench to"
        }
    finally:
        fleet.stop()
        for host in config.hosts:
            close_connection(setup, host)


# A system feature only the loopback remote has, and that it takes only derivations asking
# for (mandatory): the avx2 stand-in must build there, the avx512 one cannot.
REMOTE_ONLY = "wb-loopback-remote"


def _compile_flake(directory: Path, seconds: int) -> Path:
    """Two stand-in variants whose builders run the real g++ of SLOW_UNIT for `seconds`; the
    avx2 one asks for REMOTE_ONLY (only the remote builds it, and nothing else goes there)."""
    stamp = uuid.uuid4().hex
    directory.mkdir()
    unit = SLOW_UNIT.replace("\\n", " ")
    (directory / "flake.nix").write_text(
        f"""{{
  outputs = {{ self }}: let
    mk = name: features: derivation {{
      inherit name; system = "x86_64-linux"; builder = "/bin/sh"; stamp = "{stamp}";
      unit = "{unit}"; requiredSystemFeatures = features;
      args = [ "-c" ''
        echo "$unit" > slow_unit.cc
        echo compiling slow_unit.cc
        /usr/bin/timeout {seconds} /usr/bin/g++ -std=c++17 \\
          -fconstexpr-loop-limit=2147483647 -fconstexpr-ops-limit=4294967295 \\
          -c slow_unit.cc -o slow_unit.o
        echo ${{name}} > $out
      '' ];
    }};
  in {{
    packages.x86_64-linux = {{
      onnxruntime-python313-cpu-avx2 = mk "avx2" [ "{REMOTE_ONLY}" ];
      onnxruntime-python313-cpu-avx512 = mk "avx512" [ ];
    }};
  }};
}}
"""
    )
    return directory


def test_attach_of_a_matrix_build_shows_what_the_remote_compiles(
    hosts_config: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    """Real Nix sends a variant to the loopback remote, whose builder (a Nix build user, as
    on a real multi-user host) runs g++; `attach` says what the remote compiles, sampled there."""
    ensure_build_users()
    remote_conf = loopback_host.directory / "remote-nix" / "nix.conf"
    remote_conf.write_text(
        remote_conf.read_text().replace("build-users-group =", "build-users-group = nixbld")
        + f"system-features = {REMOTE_ONLY}\n"
    )
    # Exactly one build goes to the remote: avx2, which only it can build (the connections
    # counted below are Nix's one for it and the workbench's one).
    hosts_toml = hosts_config / "hosts.toml"
    hosts_toml.write_text(
        hosts_toml.read_text().replace(
            'features = ["big-parallel"]\n',
            f'features = ["big-parallel", "{REMOTE_ONLY}"]\n'
            f'mandatory_features = ["{REMOTE_ONLY}"]\n',
        )
    )
    flake = _compile_flake(tmp_path / "flake", seconds=12)
    state = tmp_path / "state"

    def workbench(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "workbench",
                "--config",
                str(hosts_config),
                "--state-dir",
                str(state),
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            env=nix_env_for_hosts(tmp_path),
        )

    done = workbench(
        "build",
        "onnxruntime-python313-cpu-avx2",
        "onnxruntime-python313-cpu-avx512",
        "-C",
        str(flake),
    )
    assert done.returncode == 0, done.stderr
    views = done.stderr.split("workbench: per host:\n")[1:]
    # A moment when Nix had sent a variant to the remote and its g++ was sampled there.
    compiling = [
        view
        for view in views
        if "  remote         1 building: avx2; compiling slow_unit.cc (" in view
        and "[sampled via shipped]" in view
    ]
    assert compiling, done.stderr
    remote_store = [path.name for path in (loopback_host.remote_store_root / "nix/store").iterdir()]
    assert any(name.endswith("-avx2") for name in remote_store)
    assert not any(name.endswith("-avx512") for name in remote_store)
    # Nix's own builder connection and the workbench's one (probe and sampler share it),
    # however many samples: no connection per sample.
    assert _connections(loopback_host) <= 2
    assert "Traceback" not in done.stderr


async def test_the_matrix_screen_shows_what_the_remote_compiles(
    hosts_config: Path,
    loopback_host: LoopbackHost,
    slow_compile: subprocess.Popen[bytes],
    tmp_path: Path,
) -> None:
    """The TUI's matrix screen over a running matrix build (recorded from real Nix, its
    "remote" now the loopback sshd of hosts.toml): under the remote's line, what it compiles."""
    from recorded_host import recorded_doctor
    from textual.widgets import Static
    from tui.driving import wait_until
    from tui.fixed_history import frozen_clock
    from tui.fixed_matrix import write_matrix_build

    from workbench.tui.app import make_app
    from workbench.tui.screens.matrix.matrix_screen import MatrixScreen

    state = tmp_path / "state"
    write_matrix_build(state, running=True)
    app = make_app(str(hosts_config), str(state), doctor=recorded_doctor(), clock=frozen_clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, "the recorded host", lambda: app.report is not None, 30)
        await pilot.press("m")
        await wait_until(pilot, "the matrix", lambda: isinstance(app.screen, MatrixScreen), 20)
        screen = app.screen
        assert isinstance(screen, MatrixScreen)

        def hosts() -> str:
            return str(screen.query_one("#matrix-hosts", Static).render())

        await wait_until(pilot, "the remote's compile", lambda: "slow_unit.cc" in hosts(), 40)
        lines = hosts().splitlines()
        remote = lines.index(next(line for line in lines if line.startswith("remote ")))
        assert lines[remote + 1].lstrip().startswith("compiling slow_unit.cc ("), lines
        assert "[sampled via shipped]" in lines[remote + 1]
        # badkey is in the recorded build but not in this hosts.toml: not sampled, no line.
        assert not any("badkey" in line and "sampl" in line for line in lines)
        sampler = screen.sampling.samplers["remote"] if screen.sampling else None
        assert sampler is not None and _connections(loopback_host) == 1
        await pilot.press("escape")
    assert _wait(lambda: sampler._process is not None and sampler._process.poll() is not None, 10)


def test_an_installed_workbench_on_the_remote_is_used(
    config_copy: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    """A key whose sessions have this checkout's virtual environment on their PATH (its
    `workbench` entry point, as pip installs it): the sampler runs from there, nothing shipped."""
    venv_bin = Path(sys.executable).parent
    if not (venv_bin / "workbench").exists():
        pytest.skip("no installed `workbench` entry point beside this Python")
    key = loopback_host.directory / "installed_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    with open(loopback_host.directory / "authorized_keys", "a") as authorized:
        authorized.write(
            f'command="PATH={venv_bin}:/usr/bin:/bin exec /bin/sh -c \\"$SSH_ORIGINAL_COMMAND\\"" '
            + (key.with_suffix(".pub")).read_text()
        )
    path = config_copy / "hosts.toml"
    path.write_text(path.read_text() + loopback_host.hosts_entry("installed", key=key))
    config = load_hosts(config_copy)
    setup = prepare_ssh(config.hosts, tmp_path / "state")
    host = config.by_name("installed")
    assert host is not None
    sampler = RemoteSampler(setup, host)
    sampler.start()
    try:
        assert sampler.wait_started(30), sampler.line()
        assert sampler.via == "installed"
        assert sampler.line().endswith("free [sampled via installed]")
    finally:
        sampler.stop()
        close_connection(setup, host)


def test_a_remote_sampler_told_this_builds_derivations_leaves_other_builds_out(
    hosts_config: Path,
    loopback_host: LoopbackHost,
    slow_compile: subprocess.Popen[bytes],
    tmp_path: Path,
) -> None:
    """A shared builder also builds for others: a matrix build's sampler is given its targets'
    derivation names, and a compile of another derivation is not shown as this build's."""
    config = load_hosts(hosts_config)
    setup = prepare_ssh(config.hosts, tmp_path / "state")
    host = config.by_name("remote")
    assert host is not None
    assert derivation_names([f"/nix/store/{'a' * 32}-{SLOW_DERIVATION}.drv"]) == (SLOW_DERIVATION,)
    ours = RemoteSampler(setup, host, derivations=(SLOW_DERIVATION,))
    others = RemoteSampler(setup, host, derivations=("another-build-2.0",))
    try:
        # One after the other: the second session finds the first's shared connection.
        ours.start()
        assert ours.wait_started(60), ours.line()
        others.start()
        assert others.wait_started(60), others.line()

        def compiling(sampler: RemoteSampler) -> bool:
            latest = sampler.latest
            return latest is not None and any(
                (job.file or "").endswith("slow_unit.cc") for job in latest.jobs
            )

        # Once ours shows the compile, each later sample of the other's has judged it too.
        assert _wait(lambda: compiling(ours), 60), f"{ours.line()}; {_compile_now(slow_compile)}"
        first = others.samples
        assert _wait(lambda: others.samples >= first + 3, 60), "3 more samples never came"
        assert slow_compile.poll() is None, _compile_now(slow_compile)
        assert not compiling(others), others.line()
        assert others.line().startswith("nothing compiling"), others.line()
        assert _connections(loopback_host) == 1  # both sessions over the one connection
    finally:
        for sampler in (ours, others):
            sampler.stop()
        close_connection(setup, host)


def _two_layer_flake(directory: Path, seconds: int) -> Path:
    """Two stand-in variants in two layers, as the real flake builds them: the compile runs in
    a dependency derivation (nix/overrides.nix: `pname = "${spec.name}-cpp"`, the C++ library)
    and the target (the Python layer) only depends on it. The dependency's builder runs the
    real g++ of SLOW_UNIT for `seconds`."""
    stamp = uuid.uuid4().hex
    directory.mkdir()
    (directory / "flake.nix").write_text(
        f"""{{
  outputs = {{ self }}: let
    cpp = name: derivation {{
      name = "${{name}}-cpp"; system = "x86_64-linux"; builder = "/bin/sh"; stamp = "{stamp}";
      unit = "{SLOW_UNIT}";
      args = [ "-c" ''
        echo "$unit" > slow_unit.cc
        echo compiling slow_unit.cc
        /usr/bin/timeout {seconds} /usr/bin/g++ -std=c++17 \\
          -fconstexpr-loop-limit=2147483647 -fconstexpr-ops-limit=4294967295 \\
          -c slow_unit.cc -o slow_unit.o
        echo ${{name}} > $out
      '' ];
    }};
    python = name: derivation {{
      inherit name; system = "x86_64-linux"; builder = "/bin/sh"; stamp = "{stamp}";
      library = cpp name;
      args = [ "-c" "/bin/cat $library > $out; exit $?" ];
    }};
  in {{
    packages.x86_64-linux = {{
      onnxruntime-python313-cpu-avx2 = python "avx2";
      onnxruntime-python313-cpu-avx512 = python "avx512";
    }};
  }};
}}
"""
    )
    return directory


def test_a_remote_compiling_in_a_dependency_derivation_is_shown_while_it_builds(
    hosts_config: Path, loopback_host: LoopbackHost, tmp_path: Path
) -> None:
    """The compile of a variant runs in its C++ dependency, not in the target's own derivation:
    the remote's sampler learns every derivation Nix starts there from the build's log, so the
    per-host view shows the remote's g++ while the dependency builds (it said "nothing
    compiling" when told the targets' names only)."""
    ensure_build_users()
    remote_conf = loopback_host.directory / "remote-nix" / "nix.conf"
    remote_conf.write_text(
        remote_conf.read_text().replace("build-users-group =", "build-users-group = nixbld")
    )
    # Everything goes to the remote (nix build --max-jobs 0 here), one derivation at a time.
    hosts_toml = hosts_config / "hosts.toml"
    hosts_toml.write_text(
        hosts_toml.read_text().replace("local_builds = true", "local_builds = false")
    )
    flake = _two_layer_flake(tmp_path / "flake", seconds=8)
    state = tmp_path / "state"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "--config",
            str(hosts_config),
            "--state-dir",
            str(state),
            "build",
            "onnxruntime-python313-cpu-avx2",
            "onnxruntime-python313-cpu-avx512",
            "-C",
            str(flake),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env=nix_env_for_hosts(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    lines = [
        line
        for view in done.stderr.split("workbench: per host:\n")[1:]
        for line in view.splitlines()
        if line.startswith("  remote ")
    ]
    # While a C++ layer built there, its g++ was sampled and shown on the remote's line.
    compiling = [
        line
        for line in lines
        if re.match(r"  remote +1 building: avx(2|512)-cpp; compiling slow_unit\.cc \(", line)
    ]
    assert compiling, done.stderr
    assert all("[sampled via shipped]" in line for line in compiling)
    assert "Traceback" not in done.stderr

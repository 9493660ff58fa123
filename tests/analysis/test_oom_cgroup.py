"""A memory-bound build, proven in a real memory cgroup (issue 16, item 6).

Four units each take a known ~0.35 GB in cc1plus (a 1.2M-element initialiser of distinct
numbers; measured with GNU time: ~0.3 KB per element). Inside a cgroup limited to 1.0 GB,
`-j4` (4 x 0.35 GB > 1.0 GB) is killed by the kernel's OOM killer: the supervisor names it with
the numbers read from the build's own cgroup. `ninja_jobs = "auto"` then sizes the jobs from the
largest unit that run measured and the cgroup's limit, and that build completes in the same
cgroup.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from monitor.cxx_project import needs_cxx_tools
from supervision.supervised import Bench

from workbench.analysis import oom

V1_MEMORY = Path("/sys/fs/cgroup/memory")
LIMIT = 1_000_000_000
UNITS = 4
ELEMENTS = 1_200_000
DAEMON_LIMIT = 600_000_000


def _cgroup_or_skip() -> Path:
    if os.geteuid() != 0:
        pytest.skip("making a memory cgroup needs root (the suite runs as root in CI)")
    if not (V1_MEMORY / "memory.limit_in_bytes").exists():
        pytest.skip("no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory to make a limit in")
    group = V1_MEMORY / f"workbench-test-{uuid.uuid4().hex[:12]}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(LIMIT))
    except OSError as exc:
        pytest.skip(f"cannot make a memory cgroup here ({exc.strerror})")
    return group


@pytest.fixture
def cgroup() -> Iterator[Path]:
    group = _cgroup_or_skip()
    try:
        yield group
    finally:
        for _ in range(50):  # the group can go once its last process has exited
            try:
                group.rmdir()
                break
            except OSError:
                import time

                time.sleep(0.2)


@pytest.fixture
def memory_project(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    source.mkdir()
    names = []
    for unit in range(UNITS):
        numbers = ",".join(str((i * 7919 + unit) % 1000003) for i in range(ELEMENTS))
        (source / f"table_{unit}.cc").write_text(
            f"long table_{unit}[] = {{{numbers}}};\nlong get_{unit}(int i) "
            f"{{ return table_{unit}[i]; }}\n"
        )
        names.append(f"table_{unit}.cc")
    (source / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(memory CXX)\n"
        f"add_library(tables STATIC {' '.join(names)})\n"
    )
    build = tmp_path / "build"
    result = subprocess.run(
        ["cmake", "-S", str(source), "-B", str(build), "-G", "Ninja"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return build


def _in(group: Path):
    def enter() -> None:
        (group / "cgroup.procs").write_text(str(os.getpid()))

    return enter


def _run_in(bench: Bench, group: Path, *args: str) -> subprocess.CompletedProcess[str]:
    process = bench.start(*args, preexec_fn=_in(group))
    out, err = process.communicate(timeout=600)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.mark.slow
@needs_cxx_tools
def test_oom_is_named_and_auto_jobs_fit_and_complete(
    bench: Bench, tmp_path: Path, cgroup: Path, memory_project: Path
) -> None:
    killed = _run_in(
        bench,
        cgroup,
        "run",
        "--name",
        "memfixture",
        "--",
        "ninja",
        "-C",
        str(memory_project),
        f"-j{UNITS}",
    )
    assert killed.returncode != 0, killed.stderr
    first = bench.record(bench.latest_id())
    assert first.state in ("failed", "killed")
    note = first.note or ""
    assert "killed (OOM) while compiling table_" in note, note
    assert f"{LIMIT / 1024**3:.2f} GiB limit of memory cgroup {cgroup}" in note, note
    assert " jobs x " in note and "GiB peak" in note
    assert "killed (OOM?)" not in note  # the cgroup's counted kill, said once
    assert int((cgroup / "memory.failcnt").read_text()) > 0

    # "auto" with what that run measured and the limit of the cgroup the build runs in.
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path\n"
            "from workbench.configs.matrix import load_matrix\n"
            "from workbench.configs.settings import load_settings\n"
            "from workbench.history.store import History\n"
            "from workbench.planning.tuning import choose_jobs_for\n"
            "configs = Path(sys.argv[1])\n"
            "settings = load_settings(configs, load_matrix(configs))\n"
            "assert settings.ninja_jobs == 'auto'\n"
            "choice = choose_jobs_for(History(Path(sys.argv[2])), settings, 'memfixture',"
            " False, None)\n"
            "print(choice.jobs, choice.job_memory.gb, choice.job_memory.source)",
            str(Path(__file__).resolve().parents[2] / "configs"),
            str(bench.state),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_in(cgroup),
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    jobs_text, per_job_gb, source = probe.stdout.strip().split(" ", 2)
    jobs = int(jobs_text)
    assert source.startswith("measured: build #")
    assert 0.2 <= float(per_job_gb) <= 0.6  # the largest unit, ~0.35 GB
    assert 1 <= jobs < UNITS
    assert jobs * float(per_job_gb) * 1024**3 <= LIMIT

    done = _run_in(
        bench,
        cgroup,
        "run",
        "--name",
        "memfixture",
        "--",
        "ninja",
        "-C",
        str(memory_project),
        f"-j{jobs}",
    )
    assert done.returncode == 0, done.stderr
    second = bench.record(bench.latest_id())
    assert second.state == "succeeded"
    limiting = oom.limiting_cgroup()
    assert limiting is None or str(cgroup) not in limiting.directory  # the test is outside
    print(f"OOM run: {note}")
    print(f"auto: {jobs} jobs x {float(per_job_gb):.2f} GiB ({source}); completed")


# A stand-in for a nix-daemon build's compiles (no nixpkgs here): the builder writes the same
# memory-hungry units as `memory_project` (awk prints the initialiser) and compiles all four at
# once with the machine's g++, as `ninja -j4` would.
DAEMON_EXPRESSION = f"""{{ salt }}:
derivation {{
  name = "wb-memory-daemon";
  inherit salt;
  system = builtins.currentSystem;
  PATH = "/usr/bin:/bin";
  builder = "/bin/sh";
  args = [ "-c" ''
    for u in {" ".join(str(unit) for unit in range(UNITS))}; do
      awk -v u=$u 'BEGIN {{ printf "long table_%d[] = {{", u;
        for (i = 0; i < {ELEMENTS}; i++) printf "%d,", (i * 7919 + u) % 1000003;
        print "0}};" }}' > table_$u.cc
    done
    for u in {" ".join(str(unit) for unit in range(UNITS))}; do
      g++ -c table_$u.cc -o table_$u.o &
      pids="$pids $!"
    done
    failed=0
    for pid in $pids; do wait $pid || failed=1; done
    test $failed = 0 && echo ok > $out
  '' ];
}}
"""


@pytest.fixture
def daemon_in_cgroup(tmp_path: Path, cgroup: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """A nix-daemon of our own started inside the limited cgroup: (its pid, a client's env)."""
    import time

    import psutil
    from nix_testing import ensure_build_users

    if shutil.which("nix-daemon") is None or shutil.which("nix-build") is None:
        pytest.skip("needs Debian's nix-bin (nix-daemon, nix-build)")
    ensure_build_users()
    # Tighter than LIMIT: four units at once exceed it even when their peaks do not coincide.
    (cgroup / "memory.limit_in_bytes").write_text(str(DAEMON_LIMIT))
    conf = tmp_path / "nix-conf"
    conf.mkdir()
    (conf / "nix.conf").write_text(
        "build-users-group = nixbld\nsandbox = false\nsubstituters =\n"
        "experimental-features = nix-command flakes\n"
    )
    socket = tmp_path / "daemon.socket"
    env = {k: v for k, v in os.environ.items() if k not in ("NIX_CONFIG", "NIX_REMOTE")}
    env.update({"NIX_CONF_DIR": str(conf), "NIX_DAEMON_SOCKET_PATH": str(socket)})
    with open(tmp_path / "daemon.log", "w") as log:
        daemon = subprocess.Popen(
            ["nix-daemon"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_in(cgroup),
        )
    try:
        deadline = time.monotonic() + 20
        while not socket.exists():
            assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()
            assert time.monotonic() < deadline, "nix-daemon did not open its socket"
            time.sleep(0.05)
        client = {
            "NIX_REMOTE": "daemon",
            "NIX_DAEMON_SOCKET_PATH": str(socket),
            "NIX_CONF_DIR": str(conf),
            "NIX_CONFIG": "",
        }
        yield daemon.pid, client
    finally:
        below = []
        with contextlib.suppress(psutil.Error):
            below = psutil.Process(daemon.pid).children(recursive=True)
        daemon.kill()
        for process in below:  # workers and builders call setsid(): each by its PID
            with contextlib.suppress(psutil.Error):
                process.kill()
        daemon.wait(timeout=10)


def test_the_daemon_of_a_nix_client_is_found_and_its_cgroup_limits_the_build(
    tmp_path: Path,
    daemon_in_cgroup: tuple[int, dict[str, str]],
    cgroup: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from workbench.configs.matrix import load_matrix
    from workbench.configs.settings import load_settings
    from workbench.history.store import History
    from workbench.host.hardware import detect_memory
    from workbench.planning.tuning import choose_jobs_for

    daemon_pid, client = daemon_in_cgroup
    assert oom.nix_daemon_pid(client) == daemon_pid  # by its socket, among any other daemons
    limiting = oom.build_cgroup(True, client)
    assert limiting is not None and limiting.directory == str(cgroup)
    assert limiting.version == 1  # the limit as the kernel keeps it (page-aligned)
    assert limiting.limit == int((cgroup / "memory.limit_in_bytes").read_text()) <= DAEMON_LIMIT
    own = oom.build_cgroup(False, client)  # not through the daemon: this process's cgroups
    assert own is None or own.directory != str(cgroup)
    # A single-user client (root, NIX_REMOTE unset) builds in-process: no daemon's cgroup.
    single_user = {k: v for k, v in client.items() if k != "NIX_REMOTE"}
    single_user["NIX_DAEMON_SOCKET_PATH"] = client["NIX_DAEMON_SOCKET_PATH"]
    assert oom.nix_daemon_socket(single_user) is None
    assert oom.nix_daemon_pid(single_user) is None
    # Nix asks whether the state directory is writable, not its database: on a fresh install
    # no command has made `db/` yet, and root still builds in-process.
    fresh_state = tmp_path / "fresh-state"
    fresh_state.mkdir()
    assert oom.nix_daemon_socket({**single_user, "NIX_STATE_DIR": str(fresh_state)}) is None
    # A state directory it cannot write (here: none at all) leaves the daemon, its socket there.
    missing = {**single_user, "NIX_STATE_DIR": str(tmp_path / "no-state")}
    assert oom.nix_daemon_socket(missing) == client["NIX_DAEMON_SOCKET_PATH"]
    # The jobs recommendation of a Nix build sizes the jobs for the room in the daemon's cgroup.
    assert detect_memory(daemon_pid).cgroup_limit == limiting.limit
    for name, value in client.items():
        monkeypatch.setenv(name, value)
    configs = Path(__file__).resolve().parents[2] / "configs"
    settings = load_settings(configs, load_matrix(configs))
    assert settings.ninja_jobs == "auto"
    with History(tmp_path / "state") as history:
        through_daemon = choose_jobs_for(history, settings, "daemon-fixture", False, None, nix=True)
        local = choose_jobs_for(history, settings, "daemon-fixture", False, None)

    def to_spend(choice: Any) -> float:  # "0.5 GiB of memory to spend (85% of ...)"
        said = next(reason for reason in choice.reasons if "of memory to spend" in reason)
        return float(said.split(" GiB")[0])

    room = limiting.limit / 1024**3
    assert (through_daemon.jobs, through_daemon.source) == (1, "auto (limited by memory)")
    assert 0 < to_spend(through_daemon) <= room, through_daemon.reasons
    assert to_spend(local) > room, local.reasons  # this process's memory: the host's


@pytest.mark.slow
def test_a_daemon_builds_oom_is_named_with_the_daemons_cgroup(
    bench: Bench, tmp_path: Path, daemon_in_cgroup: tuple[int, dict[str, str]], cgroup: Path
) -> None:
    """The supervisor is outside the limited cgroup; the daemon, and so its builders, inside:
    the OOM kill is counted there and named with that cgroup's limit."""
    _, client = daemon_in_cgroup
    expression = tmp_path / "memory.nix"
    expression.write_text(DAEMON_EXPRESSION)
    bench.extra_env.update(client)
    argv = ["nix-build", str(expression), "--no-out-link", "--argstr", "salt"]
    killed = bench.run("run", "--", *argv, uuid.uuid4().hex, cwd=tmp_path, timeout=600)
    assert killed.returncode != 0, killed.stderr
    record = bench.record(bench.latest_id())
    note = record.note or ""
    assert "killed (OOM)" in note, (note, killed.stderr[-2000:])
    limit = int((cgroup / "memory.limit_in_bytes").read_text())
    assert f"{limit / 1024**3:.2f} GiB limit of memory cgroup {cgroup} (v1)" in note, note
    limiting = oom.limiting_cgroup()
    assert limiting is None or limiting.directory != str(cgroup)  # the supervisor's is not
    print(f"daemon OOM run: {note}")

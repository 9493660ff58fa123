"""`workbench build` through real Nix: a local stand-in flake builds the C++ fixture project.

The stand-in flake has no nixpkgs input (it cannot be fetched here): its `onnxruntime-cpu`
package, named `standin-onnxruntime-cpu-fixture`, is a plain `derivation` whose builder calls
the machine's cmake, ninja and g++ by absolute path (`sandbox = false`). It is built twice:

- single-user Nix (root, no daemon): Nix builds in-process, builders descend from `nix build`;
- through a nix-daemon this test starts with its own nix.conf and socket (empty substituters,
  `build-users-group = nixbld`): the builders are the daemon's children, running as `nixbld*`
  users, and the supervisor must still find them and what they compile.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from monitor.cxx_project import needs_cxx_tools, write_project
from nix_testing import NIX_CONFIG, ensure_build_users
from supervised import REPO, Bench, build_id_from, ninja_steps

from workbench.configs.matrix import load_matrix
from workbench.history.records import STOPPED, SUCCEEDED
from workbench.planning.launch import host_platform

DERIVATION = "standin-onnxruntime-cpu-fixture"
_NIXBLD = re.compile(r"^nixbld\d*$")

pytestmark = [
    needs_cxx_tools,
    pytest.mark.nix,
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("nix") is None or shutil.which("nix-daemon") is None,
        reason="needs Debian's nix-bin (nix and nix-daemon); scripts/test.sh installs it",
    ),
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="single-user Nix writes /nix/store, and a nix-daemon with build users needs root",
    ),
]

# The fixture project's derivation: its builder runs cmake and ninja (`BUILDER`).
FIXTURE_DERIVATION = """derivation {{
      name = "{name}";
      system = "{system}";
      builder = "/bin/sh";
      args = [ ./builder.sh ];
      src = ./project;
      nonce = builtins.readFile ./nonce;
      PATH = "/usr/bin:/bin";
    }}"""

FLAKE = (
    """{{
  description = "Stand-in for the builder flake: builds the workbench's C++ fixture project";
  outputs = {{ self }}: {{
    packages.{system}.onnxruntime-cpu = """
    + FIXTURE_DERIVATION
    + """;
  }};
}}
"""
)

# A variant as the builder flake makes one (nix/overrides.nix `variant`): its C++ package, whose
# builder runs ninja, then the package built on top of it (the Python one), which copies it.
TWO_DERIVATIONS = (
    """{{
  description = "Stand-in for a variant: a C++ package, then the package built on top of it";
  outputs = {{ self }}: let
    cpp = """
    + FIXTURE_DERIVATION.replace('"{name}"', '"{name}-cpp"')
    + """;
  in {{
    packages.{system}.onnxruntime-cpu = derivation {{
      name = "{name}";
      system = "{system}";
      builder = "/bin/sh";
      args = [ "-c" "cp -r $cpp $out" ];
      inherit cpp;
      PATH = "/usr/bin:/bin";
    }};
  }};
}}
"""
)

BUILDER = """set -e
cp -r "$src" project
chmod -R u+w project
/usr/bin/cmake -S project -B build -G Ninja -DCMAKE_MAKE_PROGRAM=/usr/bin/ninja \\
  -DCMAKE_CXX_COMPILER=/usr/bin/g++
# As nixpkgs' ninja setup hook does: Nix gives the builder a pseudo-terminal, where ninja
# would rewrite one status line in place instead of printing a line per step.
TERM=dumb /usr/bin/ninja -C build -j "$NIX_BUILD_CORES"
mkdir -p "$out/lib"
cp build/libfixture.a "$out/lib/"
"""


def _cpu_layout_lines(leave_out: str | None = None) -> str:
    """Builder lines that lay out what the cpu flavour promises (configs/flavours.toml
    `produces`), the fixture's archive standing in for each archive, so `workbench build`'s
    layout check after the build sees a whole flavour (all but `leave_out`, for a broken one)."""
    flavour = load_matrix(REPO / "configs").flavour("cpu")
    lines = []
    for pattern in flavour.produces:
        if pattern == leave_out:
            continue
        path = pattern.replace("*", "fixture")
        lines.append(f'mkdir -p "$out/{Path(path).parent}"')
        source = "build/libfixture.a" if path.endswith(".a") else "/dev/null"
        lines.append(f'cp {source} "$out/{path}"')
    # The shell's own exit last, not a coreutil's: see tests/iterate/test_standin_builders.py.
    return "\n".join([*lines, "exit 0"]) + "\n"


@pytest.fixture
def standin_flake(tmp_path: Path) -> Path:
    """The stand-in flake with the fixture project; `renew()` below forces a fresh build."""
    flake = tmp_path / "standin-flake"
    write_project(flake / "project")
    (flake / "builder.sh").write_text(BUILDER + _cpu_layout_lines())
    (flake / "flake.nix").write_text(FLAKE.format(system=host_platform(), name=DERIVATION))
    renew(flake)
    return flake


def renew(flake: Path) -> None:
    """A new nonce: a new derivation, so Nix builds instead of reusing the store path."""
    (flake / "nonce").write_text(uuid.uuid4().hex)


@pytest.fixture
def nix_daemon(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A nix-daemon of our own: its own nix.conf and socket; yields the client's environment."""
    ensure_build_users()
    conf = tmp_path / "nix-conf"
    conf.mkdir()
    (conf / "nix.conf").write_text(
        "build-users-group = nixbld\nsandbox = false\nsubstituters =\n"
        "experimental-features = nix-command flakes\n"
    )
    socket = tmp_path / "daemon.socket"
    env = {k: v for k, v in os.environ.items() if k not in ("NIX_CONFIG", "NIX_REMOTE")}
    env.update({"NIX_CONF_DIR": str(conf), "NIX_DAEMON_SOCKET_PATH": str(socket)})
    log_path = tmp_path / "daemon.log"
    with open(log_path, "w") as log:
        daemon = subprocess.Popen(
            ["nix-daemon"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 20
        while not socket.exists():
            assert daemon.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "nix-daemon did not open its socket"
            time.sleep(0.05)
        yield {
            "NIX_REMOTE": "daemon",
            "NIX_DAEMON_SOCKET_PATH": str(socket),
            "NIX_CONF_DIR": str(conf),
            "NIX_CONFIG": "",
            "_DAEMON_PID": str(daemon.pid),
        }
    finally:
        # Its workers and builders call setsid(): kill the tree by PID, not the group.
        with contextlib.suppress(psutil.Error):
            below = psutil.Process(daemon.pid).children(recursive=True)
            daemon.kill()
            for process in below:
                with contextlib.suppress(psutil.Error):
                    process.kill()
        daemon.wait(timeout=10)


def _daemon_builders(daemon_pid: int) -> list[psutil.Process]:
    try:
        below = psutil.Process(daemon_pid).children(recursive=True)
    except psutil.Error:
        return []
    found = []
    for process in below:
        with contextlib.suppress(psutil.Error):
            if _NIXBLD.match(process.username()) and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def _check_fixture_build(bench: Bench, build_id: int) -> dict:
    record = bench.record(build_id)
    assert record.state == SUCCEEDED, (record.note, Path(record.log_path).read_text()[-3000:])
    assert record.backend == "nix" and record.nix
    assert "--cores" in record.argv and record.argv[record.argv.index("--cores") + 1] == "2"
    # Derivation counts from Nix's own progress; ninja's steps from the builder's log lines.
    progress = record.progress
    assert (progress["planned"], progress["done"], progress["failed"]) == (1, 1, 0)
    readable = bench.run("logs", str(build_id), timeout=60).stdout
    steps = ninja_steps(readable)
    total = steps[-1][1]
    assert steps == [(n, total) for n in range(1, total + 1)]
    assert progress["step"]["done"] == progress["step"]["total"] == total
    assert f"{DERIVATION}> [1/{total}] Building CXX object" in readable
    # Exact edges: the builder's .ninja_log, found through its ninja's working directory.
    with bench.history() as history:
        edges = history.edges(build_id)
    assert len(edges) == total, [edge.outputs for edge in edges]
    assert any(edge.outputs[0].endswith(".o") and edge.deps is not None for edge in edges)
    measured = next(b for b in bench.json("history", "--json")["builds"] if b["id"] == build_id)[
        "measurements"
    ]
    compilers = [g for g in measured["processes_seen"] if g["kind"] == "compiler"]
    files = {os.path.basename(f) for g in compilers for f in g["files"]}
    assert any(name.startswith(("heavy_", "light_")) for name in files), compilers
    return measured


def test_single_user_nix_build(bench: Bench, standin_flake: Path) -> None:
    # No NIX_REMOTE: root builds in-process. Debian's nix.conf names the nixbld group, which a
    # fresh machine may not have (the daemon tests create it): root's in-process build does
    # without build users, so this test must not depend on running after them.
    bench.extra_env["NIX_CONFIG"] = NIX_CONFIG
    result = bench.run("build", "cpu", "-C", str(standin_flake), "--jobs", "2", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # The layout check after the build, on the link this build made.
    link = standin_flake / "result-onnxruntime-cpu"
    assert f"layout: cpu has every promised file ({link} -> {link.resolve()})" in result.stderr
    build_id = build_id_from(result.stderr)
    measured = _check_fixture_build(bench, build_id)
    nix = [g for g in measured["processes_seen"] if g["tool"] == "nix"]
    assert nix, measured["processes_seen"]  # the client itself, the root of the tree
    (bench.state / "single-user-census.json").write_text(
        json.dumps(measured["processes_seen"], indent=2)
    )
    # Point 7: the next "auto" recommendation uses what this build measured.
    dry = bench.run("build", "cpu", "-C", str(standin_flake), "--dry-run", timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert f"measured: build #{build_id} of cpu on " in dry.stderr


def test_a_second_nix_build_has_an_eta_while_its_builder_runs_ninja(
    bench: Bench, standin_flake: Path
) -> None:
    """The variant built again (a new derivation, the same flake): while its builder's ninja
    runs, the ETA is the earlier build's at this progress, every second. Before, it showed one
    in the first second and none from the moment the builder's ninja was found: the edges' work
    key had an earlier run, and the learned ETA waited for a total a Nix build never gives."""
    bench.extra_env["NIX_CONFIG"] = NIX_CONFIG
    result = bench.run("build", "cpu", "-C", str(standin_flake), "--jobs", "2", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    first = build_id_from(result.stderr)
    renew(standin_flake)
    started = bench.start("build", "cpu", "-C", str(standin_flake), "--jobs", "2", "--detach")
    assert started.wait(timeout=120) == 0
    second = bench.latest_id()
    assert second != first
    seen: list[tuple[object, object]] = []
    while True:
        record = bench.record(second)
        live = record.live or {}
        step = (record.progress or {}).get("step")
        if record.active and step:
            seen.append((live.get("eta_s"), live.get("eta_basis")))
        if not record.active:
            break
        time.sleep(0.5)
    assert record.state == SUCCEEDED, record.note
    assert len(seen) >= 3, seen  # ninja ran for seconds: the fixture's heavy units
    for eta_s, basis in seen:
        assert eta_s is not None, seen
        assert str(basis).startswith(f"earlier builds #{first} "), seen


def _etas_while_ninja_runs(
    bench: Bench, build_id: int
) -> list[tuple[object, object, object, object, object]]:
    """(ETA seconds, its basis, whether it says "first build", its range's low and high) of
    `build_id`'s live view every half second while its log shows a ninja step, until it ends;
    it must succeed."""
    seen: list[tuple[object, object, object, object, object]] = []
    while True:
        record = bench.record(build_id)
        live = record.live or {}
        if record.active and (record.progress or {}).get("step"):
            seen.append(
                (
                    live.get("eta_s"),
                    live.get("eta_basis"),
                    live.get("eta_first_build"),
                    live.get("eta_low_s"),
                    live.get("eta_high_s"),
                )
            )
        if not record.active:
            break
        time.sleep(0.5)
    assert record.state == SUCCEEDED, record.note
    return seen


def test_a_first_nix_build_of_a_variant_learns_from_its_builder_s_ninja(
    bench: Bench, standin_flake: Path
) -> None:
    """A variant never built before (a new release, patch or setting): while its C++ package's
    ninja runs, the ETA is that ninja's, learned edge by edge as a plain ninja build's is, and
    its basis says what it leaves out. The first build has only its own edges, and says its
    install and fixup and the package after it are not counted. The next, another derivation of
    the same sources (a new nonce, with other settings so that no earlier run of its variant
    exists), learns each edge's time from the first, and what followed the first's ninja (a
    builder that sleeps 3 s after ninja, as a fixup takes its time, then the package on top).
    Before, both could only extrapolate their progress ("this build's pace"), the method that
    held the truth in about a third of first builds' checkpoints (benchmarks/eta_accuracy.py)."""
    bench.extra_env["NIX_CONFIG"] = NIX_CONFIG
    (standin_flake / "flake.nix").write_text(
        TWO_DERIVATIONS.format(system=host_platform(), name=DERIVATION)
    )
    (standin_flake / "builder.sh").write_text(BUILDER + "sleep 3\n" + _cpu_layout_lines())
    cpp = f"{DERIVATION}-cpp"
    after = "its install and fixup and the 1 derivation after it"
    own = f"{cpp}'s ninja ({after} not counted): "
    started = bench.start("build", "cpu", "-C", str(standin_flake), "--jobs", "2", "--detach")
    assert started.wait(timeout=120) == 0
    first = bench.latest_id()
    seen = _etas_while_ninja_runs(bench, first)
    learned = [point for point in seen if str(point[1]).startswith(own)]
    assert learned, seen
    assert all(isinstance(eta, float | int) and eta >= 0 for eta, *_ in learned), learned
    # Its own edges so far: the wide range that says "first build".
    assert all(flag is True for _, _, flag, _, _ in learned), learned
    assert all("extrapolated from this run's edges so far" in str(b) for _, b, *_ in learned)
    # What follows its ninja is not known: the range has its low and no upper end (it had
    # ninja's own high, which the 3 s fixup and the package after it went past).
    bad = [p for p in learned if not (isinstance(p[3], float | int) and p[4] is None)]
    assert not bad, bad

    renew(standin_flake)
    started = bench.start("build", "cpu", "-C", str(standin_flake), "--jobs", "1", "--detach")
    assert started.wait(timeout=120) == 0
    second = bench.latest_id()
    assert second != first
    seen = _etas_while_ninja_runs(bench, second)
    then = f"{cpp}'s ninja, then {after} as in build #{first} ("
    other = f"each edge at its time in build #{first} (another tree of the same sources"
    learned = [(e, b) for e, b, *_ in seen if str(b).startswith(then) and other in str(b)]
    assert learned, seen
    for eta, basis in learned:
        tail_s = float(str(basis)[len(then) :].split(" s)", 1)[0])
        assert 3.0 <= tail_s < 30.0, basis
        # The tail is in the figure (the host's contention may scale the whole down a little).
        assert isinstance(eta, float | int) and eta >= 0.5 * tail_s, (eta, basis)


def test_a_build_missing_a_promised_file_fails_its_layout_check(
    bench: Bench, standin_flake: Path
) -> None:
    bench.extra_env["NIX_CONFIG"] = NIX_CONFIG
    (standin_flake / "builder.sh").write_text(BUILDER + _cpu_layout_lines("lib/libcpuinfo.a"))
    result = bench.run("build", "cpu", "-C", str(standin_flake), "--jobs", "2", timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    link = standin_flake / "result-onnxruntime-cpu"
    assert "layout: lib/libcpuinfo.a: missing" in result.stderr
    assert f"error: {link} is not a whole cpu build (1 problems)" in result.stderr
    assert "has every promised file" not in result.stderr
    # The build itself succeeded: its record says so; the layout is what failed.
    assert bench.record(build_id_from(result.stderr)).state == SUCCEEDED


def test_daemon_builders_are_found_as_nixbld_users(
    bench: Bench, standin_flake: Path, nix_daemon: dict[str, str]
) -> None:
    daemon_pid = int(nix_daemon.pop("_DAEMON_PID"))
    bench.extra_env.update(nix_daemon)
    started = bench.run(
        "build", "cpu", "-C", str(standin_flake), "--jobs", "2", "--detach", timeout=120
    )
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)

    def compiling_as_nixbld() -> list[dict]:
        live = bench.record(build_id).live or {}
        return [
            job
            for job in live.get("jobs", [])
            if job["kind"] == "compiler" and job["file"] and _NIXBLD.match(job["user"] or "")
        ]

    seen = bench.wait_for("a nixbld compiler in the live view", compiling_as_nixbld, 180, 0.2)
    (bench.state / "daemon-live.json").write_text(json.dumps(seen, indent=2))
    assert all(job["derivation"] == DERIVATION for job in seen), seen
    client = bench.record(build_id).build_pid
    for job in seen:
        with contextlib.suppress(psutil.Error):
            # Not under our `nix build` client: the daemon forked the builder.
            assert client not in [p.pid for p in psutil.Process(job["pid"]).parents()]
    bench.wait_ended(build_id, timeout=300)
    measured = _check_fixture_build(bench, build_id)
    groups = [g for g in measured["processes_seen"] if g["kind"] == "compiler"]
    # Every compiler seen compiling a file ran as a nixbld user. A compiler glimpsed for one
    # sample while it exec'd (no file yet) may have been read before its user was known.
    compiling = [g for g in groups if g["files"]]
    assert compiling and all(_NIXBLD.match(g["user"] or "") for g in compiling), groups
    assert all(g["derivations"] == [DERIVATION] for g in groups), groups
    (bench.state / "daemon-census.json").write_text(
        json.dumps(measured["processes_seen"], indent=2)
    )
    assert _daemon_builders(daemon_pid) == []


def test_stopping_a_daemon_build_leaves_no_builder(
    bench: Bench, standin_flake: Path, nix_daemon: dict[str, str]
) -> None:
    daemon_pid = int(nix_daemon.pop("_DAEMON_PID"))
    bench.extra_env.update(nix_daemon)
    started = bench.run(
        "build", "cpu", "-C", str(standin_flake), "--jobs", "1", "--detach", timeout=120
    )
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)

    def compiling() -> bool:
        for process in _daemon_builders(daemon_pid):
            with contextlib.suppress(psutil.Error):  # it may end between listing and asking
                if process.name() == "cc1plus":
                    return True
        return False

    bench.wait_for("the daemon's builder to compile", compiling, 180, 0.2)
    builders: dict[int, float] = {}
    for process in _daemon_builders(daemon_pid):
        with contextlib.suppress(psutil.Error):
            builders[process.pid] = process.create_time()
    result = bench.run("stop", str(build_id), "--grace", "5", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "ending the `nix build` client is what makes a nix-daemon cancel" in result.stderr
    assert bench.record(build_id).state == STOPPED
    bench.wait_for("the daemon's builders to end", lambda: _daemon_builders(daemon_pid) == [], 30)
    for pid, started_at in builders.items():
        with contextlib.suppress(psutil.NoSuchProcess):
            process = psutil.Process(pid)
            assert abs(process.create_time() - started_at) > 0.05 or process.status() == (
                psutil.STATUS_ZOMBIE
            ), f"builder {pid} still runs"
    os.kill(daemon_pid, 0)  # the daemon itself serves on (raises if it is gone)

"""Shared fixtures: a private copy of the configs, the nvidia-smi stand-in, the repo's paths,
the CLI against a private state directory (`bench`), the C++ fixture project configured for
ninja (`cxx_project`) and a small tmpfs (`small_disk`); and the `slow` marks of the tests
`scripts/test.sh --fast` leaves out."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from monitor.cxx_project import configure, write_project
from supervision.supervised import Bench

from workbench.configs.matrix import Matrix, load_matrix
from workbench.supervision.lock import HOST_LOCK_ENV

REPO = Path(__file__).resolve().parent.parent

# The tests fetch nothing with Nix (local flakes, empty substituters) but where a command asks
# Nix about the pin (a dry run's evaluation, the pin's availability), which fetches nixpkgs: on
# a host without the network, Nix's five download attempts backing off took 9 s of each such
# command to say "not known", which one attempt says at once. Every test's Nix inherits this
# (a test that sets its own NIX_CONFIG fetches nothing).
os.environ["NIX_CONFIG"] = (os.environ.get("NIX_CONFIG", "") + "\ndownload-attempts = 1").lstrip()
# The tests' builds lock their trees and Nix targets in a host-wide folder of this run's own
# (lock.HOST_LOCK_ENV) instead of /run/lock/workbench-trees: two runs on one host (pytest-xdist's
# workers, another checkout's run of the suite) never refuse each other's builds of a same-named
# target, and a user's own builds never refuse the tests'. Within the run it is one host-wide
# folder as the product's: every state directory shares it, the second user's workbench too
# (tests/second_user.py passes it on). Made by the workbench itself on first use (sticky, 1777).
_HOST_LOCKS = Path(tempfile.gettempdir()) / f"workbench-test-trees-{uuid.uuid4().hex[:12]}"
# Each pytest-xdist worker makes its own (it inherits the controller's, which it replaces).
_SET_BY_TESTS = "WORKBENCH_TESTS_SET_HOST_LOCK_DIR"
_OWN_HOST_LOCKS = HOST_LOCK_ENV not in os.environ or _SET_BY_TESTS in os.environ
if _OWN_HOST_LOCKS:
    os.environ[HOST_LOCK_ENV] = str(_HOST_LOCKS)
    os.environ[_SET_BY_TESTS] = "1"


def pytest_unconfigure(config: pytest.Config) -> None:
    if _OWN_HOST_LOCKS:
        shutil.rmtree(_HOST_LOCKS, ignore_errors=True)


STANDIN_NVIDIA_SMI = REPO / "tests" / "standins" / "standin-nvidia-smi"
NVIDIA_SMI_FIXTURES = REPO / "tests" / "standins" / "nvidia-smi-fixtures"


# Fixtures that make a test end-to-end (real builds, real daemons): every test using one is
# marked `slow`, with the reason, and `scripts/test.sh --fast` leaves it out.
SLOW_FIXTURES = {
    "loop": "a real iterate cycle: Nix, cmake, ninja and g++ build the stand-in package",
    "loopback_host": "a real sshd on 127.0.0.1 serving a Nix store over SSH",
    "cxx_project": "cmake configures the C++ fixture project for a real ninja build",
    "nix_daemon": "a nix-daemon of the test's own builds as the nixbld users",
    "standin_flake": "real Nix builds the fixture project with cmake and ninja",
}


# Test files whose every test drives real programs for seconds (measured: --durations on the
# 2-core machine), with the reason; a file with a few such tests marks those tests itself.
_GDB = "attaches real gdb to real running programs"
_CLI = "runs the real CLI in subprocesses, each a Python start-up and more"
SLOW_FILES = {
    "analysis/test_edge_cpu.py": "a real supervised build of the C++ fixture project",
    "analysis/test_supervised_edges.py": "real supervised builds of the C++ fixture project",
    "analysis/test_edges_real_ninja.py": "real ninja builds, read while they run",
    "benchmarks/test_benchmarks_quick.py": "runs every benchmark script in its quick mode",
    "ci/test_ci_run.py": "clones the repository and runs .ci/run in the clone",
    "cli/test_cli.py": _CLI + " (doctor probes this host)",
    "cli/test_cli_first_hour.py": _CLI + ", with real builds",
    "planning/test_pin_availability.py": "asks real Nix about the pin (dry runs, doctor)",
    "configs/test_readme_config_examples.py": "every README config example through the CLI",
    "debugging/capture/test_debug_capture.py": _GDB,
    "debugging/test_debug_cli.py": _GDB,
    "debugging/gdb/test_debug_gdb_start.py": _GDB,
    "debugging/capture/test_debug_library_symbols.py": _GDB,
    "debugging/test_debug_screen.py": _GDB,
    "debugging/test_debug_smoke.py": _GDB,
    "debugging/diagnosis/test_debug_progress.py": _GDB + " (compiled first)",
    "debugging/diagnosis/test_debug_spin_verdict.py": _GDB,
    "debugging/capture/test_debug_symbols.py": _GDB,
    "debugging/capture/test_debug_threads_and_states.py": _GDB,
    "reading/test_doctor_mixed_gpus.py": _CLI + " (doctor)",
    "host/test_memory_units.py": _CLI + " (doctor, settings)",
    "logs/test_logs_readable.py": _CLI + ", with real supervised builds",
    "package/test_install_layout.py": _CLI + ", installed and in checkouts made by git",
    "patches/test_patches_cli.py": _CLI + ", with git",
    "patches/test_patches_releases.py": _CLI + ", with real git apply",
    "progress/test_progress_fuzz.py": "Hypothesis: hundreds of generated logs through the parsers",
    "supervision/test_earlier_runs_no_ops.py": "six real ninja builds through the supervisor",
    "supervision/test_live_eta_learning.py": (
        "real ninja builds through the supervisor, edges sleeping"
    ),
    "supervision/test_not_responding.py": "a real supervisor stopped and continued, by the CLI",
    "supervision/test_trees_and_leftovers.py": "real builds whose supervisors are killed",
    "tui/screens/debug/test_debug_layout.py": (
        "draws the debug screen at two sizes for every recorded capture"
    ),
    "tui/screens/variants/test_launch_from_variants.py": (
        "the sample project built for real from the variants screen"
    ),
    "tui/test_snapshot_markers.py": "collects the whole suite again, as the minimum-versions run",
}


# A TUI test drawn at both sizes (80×24 and 160×48): the fast lane draws it at 80×24 alone, the
# tighter one, where a layout breaks first; its 160×48 run is left to the whole suite (measured:
# 29 CPU-seconds of the fast lane on the 2-core machine for 11 such runs).
LARGE_SIZE = (160, 48)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).resolve().parent
    gone = [name for name in SLOW_FILES if not (tests / name).is_file()]
    assert not gone, f"tests/conftest.py SLOW_FILES names files that are not there: {gone}"
    for item in items:
        # Every test of test_snapshots.py compares a whole screen with its SVG: `snapshot`, so
        # that `-m "not snapshot"` (the fast lane) leaves it out as it leaves out the others.
        if item.path.name == "test_snapshots.py" and not item.get_closest_marker("snapshot"):
            item.add_marker(pytest.mark.snapshot)
        # scripts/test-minimum-versions.sh leaves out test_snapshots.py and `-m snapshot`: a
        # snap_compare test elsewhere must carry the marker (test_snapshot_markers.py checks
        # the script's own selection; this says it at every collection, in no time).
        fixtures = getattr(item, "fixturenames", ())
        if (
            "snap_compare" in fixtures
            and item.path.name != "test_snapshots.py"
            and not item.get_closest_marker("snapshot")
        ):
            raise pytest.UsageError(f"{item.nodeid} uses snap_compare: mark it `snapshot`")
        if item.get_closest_marker("slow"):
            continue
        reason = None
        used = [name for name in SLOW_FIXTURES if name in fixtures]
        if used:
            reason = f"{used[0]}: {SLOW_FIXTURES[used[0]]}"
        elif item.get_closest_marker("nix"):
            reason = "runs real Nix: each evaluation or build takes seconds"
        else:
            with contextlib.suppress(ValueError):
                reason = SLOW_FILES.get(item.path.relative_to(tests).as_posix())
        callspec = getattr(item, "callspec", None)
        if not reason and callspec is not None and callspec.params.get("size") == LARGE_SIZE:
            reason = "the same test at 160×48: the fast lane draws it at 80×24"
        if reason:
            item.add_marker(pytest.mark.slow(reason=reason))


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    """The CLI against a private state directory; every process it started dies at the end."""
    bench = Bench(tmp_path / "state")
    try:
        yield bench
    finally:
        bench.cleanup()


@pytest.fixture
def cxx_project(tmp_path: Path) -> tuple[Path, Path]:
    """The generated C++ project (12 units, 3 heavy), configured for ninja: (checkout, build).

    No CMAKE_BUILD_TYPE (-O0): a heavy unit compiles in about two seconds, a light one in under
    half of one, so a heavy job outlasts any light one by more than the 1 s sampling interval
    (its measured time is a lower bound, up to one interval short) and a -j1 build takes about
    ten seconds on two cores.
    """
    checkout = tmp_path / "checkout"
    source = checkout / "src"
    build = checkout / "build"
    write_project(source)
    (checkout / ".git").mkdir(parents=True)  # a checkout root, as the lock sees it
    configure(source, build, "Ninja", build_type="")
    return checkout, build


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MB tmpfs (mode 0700), for a full disk (needs root, as the suite runs in CI)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (the suite runs as root in CI)")
    if shutil.which("mount") is None:
        pytest.skip("needs mount(8)")
    disk = tmp_path / "disk"
    disk.mkdir(mode=0o700)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m,mode=0700", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.fixture(scope="session")
def matrix() -> Matrix:
    return load_matrix(REPO / "configs")


@pytest.fixture(autouse=True)
def private_user_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Each test's own per-user config directory (workbench.configs.user_settings), empty at first:
    the settings of the user running the suite never reach a test, nor a test's theirs."""
    directory = tmp_path_factory.mktemp("user-config")
    monkeypatch.setenv("WORKBENCH_USER_CONFIG_DIR", str(directory))
    return directory


@pytest.fixture
def config_copy(tmp_path: Path) -> Path:
    """A writable copy of configs/ (with an empty patches/ beside it)."""
    directory = tmp_path / "configs"
    shutil.copytree(REPO / "configs", directory)
    (tmp_path / "patches").mkdir()
    return directory


@pytest.fixture
def nvidia_smi(monkeypatch: pytest.MonkeyPatch):
    """Point the nvidia-smi stand-in at a recorded fixture; returns the stand-in's path."""

    def use(fixture: str) -> str:
        monkeypatch.setenv("STANDIN_NVIDIA_SMI_FIXTURE", str(NVIDIA_SMI_FIXTURES / fixture))
        return str(STANDIN_NVIDIA_SMI)

    return use


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A failed snapshot's report says which rows differ (CI keeps no HTML report)."""
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.failed or "snap_compare" not in item.fixturenames:
        return
    import pickle

    from pytest_textual_snapshot import node_to_report_path
    from snapshot_diff import describe_difference

    try:
        data = pickle.loads(node_to_report_path(item).read_bytes())
        report.sections.append(("snapshot difference", describe_difference(data[1], data[2])))
    except Exception as exc:  # a report must not fail for want of its explanation
        report.sections.append(("snapshot difference", f"not available: {exc!r}"))

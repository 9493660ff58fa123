"""A Nix build is locked on its target, whichever flake directory builds it, and a lost Nix
build whose builder still runs keeps it until `workbench stop` ends that builder.

Real single-user Nix (root, no daemon) builds a local flake whose derivation holds its builder
until the test creates a file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from needed_tools import needs
from nix_testing import NIX_CONFIG
from supervised import Bench, build_id_from, lose_supervision
from test_supervision_nix import nix_daemon  # noqa: F401  (a fixture: its own daemon)

from workbench.monitor.discovery import builder_name
from workbench.planning.launch import host_platform

# Unique to this run: the builders looked for are this module's, nobody else's.
DERIVATION = f"standin-held-{uuid.uuid4().hex[:8]}"

pytestmark = [
    pytest.mark.nix,
    needs("nix", debian="nix-bin"),
    pytest.mark.skipif(os.geteuid() != 0, reason="single-user Nix writes /nix/store: root"),
]

# The cpu flavour's attribute (configs/flavours.toml): `workbench build cpu -C FLAKE`.
FLAKE = """{{
  outputs = {{ self }}: {{
    packages.{system}.onnxruntime-cpu = derivation {{
      name = "{name}";
      system = "{system}";
      builder = "/bin/sh";
      args = [ "-c" "echo holding; until [ -e {release} ]; do /bin/sleep 0.2; done; echo > $out" ];
      nonce = "{nonce}";
    }};
  }};
}}
"""


@pytest.fixture
def release() -> Iterator[Path]:
    """The file whose existence lets the builders finish: where a nixbld builder can see it."""
    path = Path(tempfile.gettempdir()) / f"workbench-release-{uuid.uuid4().hex}"
    yield path
    path.unlink(missing_ok=True)


def _flake(directory: Path, release: Path, nonce: str) -> Path:
    directory.mkdir(parents=True)
    text = FLAKE.format(system=host_platform(), name=DERIVATION, release=release, nonce=nonce)
    (directory / "flake.nix").write_text(text)
    return directory


def _builders() -> list[int]:
    """Processes working in a build directory of the held derivation (its builder shell)."""
    found = []
    for process in psutil.process_iter(["name"]):
        with contextlib.suppress(psutil.Error):
            if process.info["name"] == "sh" and builder_name(process.pid) == DERIVATION:
                found.append(process.pid)
    return found


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill(bench: Bench, pid: int | None, what: str) -> None:
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    bench.wait_for(what, lambda: not _alive(pid), 30)


@pytest.fixture
def two_copies(tmp_path: Path, release: Path, bench: Bench) -> Iterator[tuple[Path, Path]]:
    """Two flake directories with the same content: one derivation, so one store path."""
    bench.extra_env["NIX_CONFIG"] = NIX_CONFIG
    nonce = uuid.uuid4().hex  # a derivation no earlier run has built
    copies = (
        _flake(tmp_path / "one" / "flake", release, nonce),
        _flake(tmp_path / "two" / "flake", release, nonce),
    )
    yield copies
    release.touch()  # every builder still holding lets go
    for pid in _builders():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _start_held(bench: Bench, flake: Path) -> tuple[int, int]:
    started = bench.run("build", "cpu", "-C", str(flake), "--jobs", "1", "--detach", timeout=120)
    assert started.returncode == 0, started.stderr
    build_id = build_id_from(started.stderr)
    builders = bench.wait_for("the builder to hold", _builders, 120, 0.2)
    assert len(builders) == 1
    return build_id, builders[0]


def test_a_second_build_of_a_target_a_lost_build_still_builds_is_refused(
    bench: Bench, two_copies: tuple[Path, Path], release: Path, tmp_path: Path
) -> None:
    """From another copy of the flake (another checkout, the same derivation), Nix would only
    wait on its output lock, silently, behind a build nobody follows: refused instead, naming
    the lost build and `workbench stop N`, which ends its builder."""
    first, second = two_copies
    build_id, builder = _start_held(bench, first)
    lose_supervision(bench, build_id)

    refused = bench.run("build", "cpu", "-C", str(second), "--jobs", "1", "--detach")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("workbench: error: ")
    assert f"build #{build_id} (cpu) has ended (lost)" in refused.stderr
    assert "hold the Nix target onnxruntime-cpu" in refused.stderr
    assert f"`workbench stop {build_id}`" in refused.stderr
    # Any `nix build` of the target, from anywhere, is the same second build.
    command = ["nix", "build", f"{second}#onnxruntime-cpu", "--no-link"]
    refused = bench.run("run", "--", *command, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert f"build #{build_id} (cpu) has ended (lost)" in refused.stderr

    stop = bench.run("stop", str(build_id), "--grace", "2", timeout=60)
    assert stop.returncode == 0, stop.stderr
    bench.wait_for("the builder to end", lambda: not _alive(builder), 30)
    release.touch()
    accepted = bench.run("build", "cpu", "-C", str(second), "--jobs", "1", "--detach")
    assert accepted.returncode == 0, accepted.stderr
    bench.wait_ended(build_id_from(accepted.stderr), 120)


def test_a_builder_never_outlives_the_nix_that_runs_it(
    bench: Bench, two_copies: tuple[Path, Path]
) -> None:
    """What the locks rely on: a builder holds no copy of the build's lock descriptors (Nix
    closes them), but it ends with the Nix process that runs it, which holds copies: Nix
    gives it a pseudo-terminal and is its only master, so the builder, leading its own session
    on it, is hung up when that Nix dies. A lost build's builder is thus covered by its
    `nix build` (or, through a daemon, by the client whose end makes the daemon cancel)."""
    build_id, builder = _start_held(bench, two_copies[0])
    assert not [
        f
        for f in os.listdir(f"/proc/{builder}/fd")
        if "/locks/" in os.readlink(f"/proc/{builder}/fd/{f}")
    ]
    lose_supervision(bench, build_id)
    client = bench.record(build_id).build_pid
    held = [os.readlink(f"/proc/{client}/fd/{f}") for f in os.listdir(f"/proc/{client}/fd")]
    assert any(str(bench.state / "locks") in path for path in held), held
    _kill(bench, client, "the nix client to die")
    bench.wait_for("the builder to be hung up", lambda: not _alive(builder), 30)


@needs("nix-daemon", debian="nix-bin")
def test_a_lost_daemon_builds_target_is_refused_and_stop_ends_the_daemons_builder(
    bench: Bench,
    two_copies: tuple[Path, Path],
    nix_daemon: dict[str, str],  # noqa: F811
) -> None:
    """Through a nix-daemon the builder is the daemon's child, running as a nixbld user: the
    lost build's `nix build` client holds the locks, and ending it (`stop`) is what makes the
    daemon cancel the builder."""
    daemon_pid = int(nix_daemon.pop("_DAEMON_PID"))
    bench.extra_env.update(nix_daemon)
    first, second = two_copies
    build_id, builder = _start_held(bench, first)
    assert psutil.Process(builder).username().startswith("nixbld")
    assert daemon_pid in [p.pid for p in psutil.Process(builder).parents()]
    lose_supervision(bench, build_id)

    refused = bench.run("build", "cpu", "-C", str(second), "--jobs", "1", "--detach")
    assert refused.returncode == 2, refused.stderr
    assert f"build #{build_id} (cpu) has ended (lost)" in refused.stderr
    assert "hold the Nix target onnxruntime-cpu" in refused.stderr
    assert f"`workbench stop {build_id}`" in refused.stderr

    stop = bench.run("stop", str(build_id), "--grace", "2", timeout=60)
    assert stop.returncode == 0, stop.stderr
    bench.wait_for("the daemon's builder to end", lambda: not _alive(builder), 30)
    os.kill(daemon_pid, 0)  # the daemon itself serves on

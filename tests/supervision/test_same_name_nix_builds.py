"""Two Nix builds of derivations with the same name at once, through one nix-daemon: each
build's supervisor counts only its own builders, and records only its own builder's edges.

Two users building the same release with different patches (two `workbench` states here, as
two users have) give two derivations named alike; the daemon runs both builders as `nixbld*`
users, children of the daemon, not of either `nix build`. Attributed by name alone, each
supervisor took the other's compilers and ninja as its own (seen: 27 edges recorded for a
15-edge build while two pytest workers ran Nix tests at once). The builders wait for each
other before their ninja runs, so the two ninjas compile at the same time, not by luck.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from monitor.cxx_project import needs_cxx_tools, write_project
from supervised import Bench, build_id_from
from test_supervision_nix import (  # noqa: F401  (nix_daemon: a fixture, its own daemon)
    BUILDER,
    DERIVATION,
    FLAKE,
    _check_fixture_build,
    _cpu_layout_lines,
    nix_daemon,
    renew,
)

from workbench.history.records import SUCCEEDED
from workbench.planning.launch import host_platform

pytestmark = [
    needs_cxx_tools,
    pytest.mark.nix,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="a nix-daemon with build users needs root"),
]

# Before its ninja, each builder says it is there and waits (a minute at most) for the other.
MEET = """touch {meeting}/{variant}
waited=0
until [ -e {meeting}/a ] && [ -e {meeting}/b ] || [ $waited -ge 600 ]; do
  /bin/sleep 0.1; waited=$((waited + 1))
done
"""


@pytest.fixture
def meeting() -> Iterator[Path]:
    """A folder the two builders (nixbld users) can write and see: not under pytest's 0700 one."""
    folder = Path(tempfile.mkdtemp(prefix="workbench-meeting-"))
    folder.chmod(0o777)
    yield folder
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()


def _flake(directory: Path, variant: str, meeting: Path) -> Path:
    """The stand-in flake, its derivation named DERIVATION; `variant` makes it another one."""
    flake = directory / f"standin-{variant}"
    write_project(flake / "project")
    first, ninja = BUILDER.split("TERM=dumb ", 1)
    meet = MEET.format(meeting=meeting, variant=variant)
    (flake / "builder.sh").write_text(first + meet + "TERM=dumb " + ninja + _cpu_layout_lines())
    (flake / "flake.nix").write_text(FLAKE.format(system=host_platform(), name=DERIVATION))
    renew(flake)
    return flake


def _builds_out(pid: int) -> str | None:
    """The store path the process `pid` builds (`out` in its environment), as root reads it."""
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).environ().get("out")
    return None


def test_two_builds_of_same_named_derivations_each_count_only_their_own_builders(
    bench: Bench,
    tmp_path: Path,
    nix_daemon: dict[str, str],  # noqa: F811
    meeting: Path,
) -> None:
    nix_daemon.pop("_DAEMON_PID")
    other = Bench(tmp_path / "state-b")
    try:
        benches = {"a": bench, "b": other}
        flakes = {variant: _flake(tmp_path, variant, meeting) for variant in benches}
        ids = {}
        for variant, each in benches.items():
            each.extra_env.update(nix_daemon)
            argv = ["build", "cpu", "-C", str(flakes[variant]), "--jobs", "2", "--detach"]
            # The target is locked host-wide; the second user starts theirs anyway, as they may.
            if variant == "b":
                argv.append("--force")
            result = each.run(*argv, timeout=120)
            assert result.returncode == 0, result.stderr[-3000:]
            ids[variant] = build_id_from(result.stderr)
        # What each live view shows as its jobs, and the store path each job's process builds.
        built_by: dict[str, set[str | None]] = {variant: set() for variant in benches}
        deadline = time.monotonic() + 240
        while True:
            active = False
            for variant, each in benches.items():
                record = each.record(ids[variant])
                active |= record.active
                for job in (record.live or {}).get("jobs", []):
                    if job.get("kind") == "compiler":
                        built_by[variant].add(_builds_out(int(job["pid"])))
            if not active:
                break
            assert time.monotonic() < deadline, "the two builds did not end within 240 s"
            time.sleep(0.2)
        outs = {}
        for variant, each in benches.items():
            assert each.record(ids[variant]).state == SUCCEEDED
            # Edges as many as its own ninja's steps, compilers its own (_check_fixture_build).
            _check_fixture_build(each, ids[variant])
            outs[variant] = str((flakes[variant] / "result-onnxruntime-cpu").resolve())
        assert outs["a"] != outs["b"]  # two derivations, one name
        for variant in benches:
            seen = built_by[variant] - {None}  # a job gone before its environment was read
            assert seen == {outs[variant]}, (variant, seen, outs)
    finally:
        other.cleanup()

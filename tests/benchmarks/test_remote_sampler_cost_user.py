"""benchmarks/remote_sampler_cost.py runs its sleepers as a Nix build user held as Nix holds
one (tests/nix_testing.held_build_user, the flock in /nix/var/nix/userpool), never as a user
a Nix build holds: Nix kills every process of a build user it takes, so a benchmark's sleeper
on a held user dies of SIGKILL mid-measurement (and a stray process of that user is one Nix
build's business). Before, the benchmark always ran them as nixbld1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from needed_tools import needs
from nix_testing import held_build_user

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="running as a Nix build user needs root"),
    needs("runuser", debian="util-linux"),
]

REPO = Path(__file__).resolve().parents[2]


def _sleepers_of(uid: int) -> list[int]:
    """PIDs of `sleep 600` processes (the benchmark's sleepers) running as `uid`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", b"600"]:
            found.append(int(name))
    return found


def test_the_benchmark_runs_its_sleepers_as_a_build_user_nobody_holds(tmp_path: Path) -> None:
    """Holding nixbld1 as a Nix build would, the benchmark's sleepers never run as nixbld1 (a
    watcher looks for them the whole run) and the benchmark says which user it held."""
    with held_build_user(among=["nixbld1"]) as held:
        uid = int(subprocess.run(["id", "-u", held], capture_output=True, text=True).stdout)
        seen: list[int] = []
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                seen.extend(_sleepers_of(uid))
                done.wait(0.01)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            run = subprocess.run(
                [sys.executable, str(REPO / "benchmarks" / "remote_sampler_cost.py"), "--quick"],
                capture_output=True,
                text=True,
                timeout=600,
                env={**os.environ, "TMPDIR": str(tmp_path)},
                check=False,
            )
        finally:
            done.set()
            watcher.join()
    assert run.returncode == 0, run.stderr[-4000:]
    document = json.loads(run.stdout)
    assert not seen, f"the benchmark ran sleepers {sorted(set(seen))} as {held}, held by a build"
    assert document["build_user"] != held
    assert document["build_processes_seen"] >= 6  # its 5 sleepers and their shell
